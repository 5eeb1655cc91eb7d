"""Claim (SPEC §4.5): the model answers number pairs it never saw in training, in any form.

30% of the 59 x 59 pairs never appear in training, neither as constants nor through variables. The
paper reports 99.4% on held-out pairs as constants; it gives no figure for 1- and 2-variable
held-out sequences, which are harder, so their bars are set below it (reasons inline). The causal
item checks that held-out answers are *computed from the operands where they sit*: changing an
operand's value at its position to another held-out pair moves the answer to the new sum.
"""
from __future__ import annotations

from ..data.tokens import POS_LHS, POS_RHS
from .base import (
    Context, Evidence, Hypothesis, REINITIALISED, Threshold, WRONG_SITE_INTERCHANGE, item, rate, register,
)
from .measures.behaviour import interchange_item, pair_table, pool_accuracy_items
from .measures.circuits import last_position_correct

ACCURACY_BARS = {
    "0var_heldout_pair": Threshold(0.97, ">=", "paper: 99.4% on held-out constant pairs; at n=2000 a model at that "
                                               "level has a 95% lower bound near 0.99, so 0.97 admits it and rejects "
                                               "one that misses more than ~3%"),
    "1var_heldout_pair": Threshold(0.95, ">=", "no paper figure for variables (harder); 'generalizes' = within 5 "
                                               "points of perfect, 50x chance (1/59)"),
    "2var_heldout_pair": Threshold(0.90, ">=", "no paper figure; the hardest held-out pool; within 10 points of "
                                               "perfect, 50x chance (1/59)"),
}
INTERCHANGE_BAR = Threshold(0.90, ">=", "if held-out answers are computed from the routed values, a new held-out "
                                        "value at the operand's position must move the answer to its sum; chance 1/59")


@register
class HeldoutGeneralization(Hypothesis):
    id = "heldout_generalization"
    spec = "§4.5"
    statement = ("The model adds number pairs that never appeared in training, as constants and through one or "
                 "two variables, and computes those answers from the operands where they sit.")
    controls = {
        "reinitialised": REINITIALISED,
        "wrong_site": WRONG_SITE_INTERCHANGE,
    }

    def evidence(self, ctx: Context) -> list[Evidence]:
        reinit = ctx.reinitialised_model()
        items = pool_accuracy_items(ctx, ACCURACY_BARS, {"reinitialised": reinit})
        tokens, labels = ctx.task.exhaustive_0var_heldout(seed=ctx.seed)
        doubled = tokens[:, POS_LHS] == tokens[:, POS_RHS]

        def exhaustive(m):
            ok = last_position_correct(m, tokens, labels)
            # Reported, not decided on: in every run we trained, all held-out errors but a few were on
            # doubled pairs (n, n), a sub-family the split leaves only ~40 training examples of.
            return rate(ok, doubled_pairs=int(doubled.sum()),
                        doubled_pairs_accuracy=float(ok[doubled].double().mean()) if doubled.any() else None,
                        other_pairs_accuracy=float(ok[~doubled].double().mean()) if (~doubled).any() else None)

        items.append(item(
            "accuracy[exhaustive_0var_heldout]", "accuracy over every held-out pair once, as 0-var sequences "
            "(split by doubled pairs n1 = n2 and the rest in the measurement's extra fields)",
            "observational", ACCURACY_BARS["0var_heldout_pair"], exhaustive, ctx.model, {"reinitialised": reinit},
            required=False))
        tokens, labels = ctx.pool("2var_heldout_pair")
        items.append(interchange_item(
            ctx, tokens, labels, pair_table(ctx.task.heldout_pairs, ctx.task.vocab.modulus),
            "IIA = mean_i 1[argmax logits(base_i | resid_post_0[p_i] <- source_i)[15] = (x'_i + y_i) mod 59], "
            "base ~ 2var_heldout_pair, source = base with the value at p_i set to x', (x', y) held out",
            INTERCHANGE_BAR, reinit))
        return items
