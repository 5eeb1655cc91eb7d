"""Claim (SPEC §4.5): the model answers number pairs it never saw in training, in any form.

30% of the 59 x 59 pairs never appear in training, neither as constants nor through variables. The
paper reports 99.4% on held-out pairs as constants; it gives no figure for 1- and 2-variable
held-out sequences, which are harder, so their bars are set below it (reasons inline). The causal
item checks that held-out answers are *computed from the operands where they sit*: changing an
operand's value at its position to another held-out pair moves the answer to the new sum.
"""

from __future__ import annotations

import torch

from ..data.tokens import POS_LHS, POS_RHS
from .base import (
    Context,
    Evidence,
    Hypothesis,
    Measurement,
    REINITIALISED,
    Threshold,
    WRONG_SITE_INTERCHANGE,
    item,
    register,
)
from .measures.behaviour import interchange_item, pair_table, pool_accuracy_items
from .measures.circuits import eq_top2_is, head_pattern, last_position_correct, ov2_mlp2_accuracy

ACCURACY_BARS = {
    "0var_heldout_pair": Threshold(
        0.97,
        ">=",
        "paper: 99.4% on held-out constant pairs; at n=2000 a model at that "
        "level has a 95% lower bound near 0.99, so 0.97 admits it and rejects "
        "one that misses more than ~3%",
    ),
    "1var_heldout_pair": Threshold(
        0.95,
        ">=",
        "no paper figure for variables (harder); 'generalizes' = within 5 points of perfect, 50x chance (1/59)",
    ),
    "2var_heldout_pair": Threshold(
        0.90, ">=", "no paper figure; the hardest held-out pool; within 10 points of perfect, 50x chance (1/59)"
    ),
}
EXHAUSTIVE_BAR = Threshold(
    0.97,
    ">=",
    "paper: 99.4% on held-out constant pairs; its own final checkpoint is wrong on 6 of "
    "1045, all doubled pairs (n, n); 0.97 admits ~30 wrong of 1045. Exact: every "
    "held-out pair once, no sampling error",
)
DOUBLED_BAR = Threshold(
    0.25,
    ">=",
    "held-out doubled pairs (n, n) are where every model we know errs: the paper's "
    "final checkpoint gets 14 of its 20, our seven runs 3-20 of 20. 'Adds pairs it never "
    "saw' must include them well above chance (1/59): at least 5 of 20. A model that "
    "gets every doubled pair wrong fails the claim (registered 2026-12)",
)
INTERCHANGE_BAR = Threshold(
    0.90,
    ">=",
    "if held-out answers are computed from the routed values, a new held-out "
    "value at the operand's position must move the answer to its sum; chance 1/59",
)


@register
class HeldoutGeneralization(Hypothesis):
    id = "heldout_generalization"
    spec = "§4.5"
    statement = (
        "The model adds number pairs that never appeared in training, as constants and through one or "
        "two variables, and computes those answers from the operands where they sit."
    )
    controls = {
        "reinitialised": REINITIALISED,
        "wrong_site": WRONG_SITE_INTERCHANGE,
    }

    def evidence(self, ctx: Context) -> list[Evidence]:
        reinit = ctx.reinitialised_model()
        items = pool_accuracy_items(ctx, ACCURACY_BARS, {"reinitialised": reinit})
        for e in items:  # held-out constants are decided on the exhaustive set below; the pool is shown
            if e.name == "accuracy[0var_heldout_pair]":
                e.required = False
        tokens, labels = ctx.task.exhaustive_0var_heldout(seed=ctx.seed)
        doubled = tokens[:, POS_LHS] == tokens[:, POS_RHS]

        def exhaustive(m):
            # Every held-out pair once: the whole population of this split, so no sampling interval.
            ok = last_position_correct(m, tokens, labels).double()
            return Measurement.exact(
                float(ok.mean()),
                n=len(ok),
                wrong=int((ok == 0).sum()),
                doubled_pairs_accuracy=float(ok[doubled].mean()) if doubled.any() else None,
                other_pairs_accuracy=float(ok[~doubled].mean()) if (~doubled).any() else None,
            )

        def doubled_pairs(m):
            # Where the errors lie: the Layer-2 routing (does `=` attend to both operand slots?) and the
            # weights-only addition module (OV_2 e_n + OV_2 e_n through the MLP and W_U, the authors'
            # ov2_mlp2) on the same pairs. Every trained model we know errs on held-out (n, n) only, and
            # its addition module errs there too while the routing is intact: the fault is the adder's.
            t = tokens[doubled]
            ok = last_position_correct(m, t, labels[doubled])
            c = ctx.components  # the fetching head and the adding MLP (§2.1)
            pattern = head_pattern(m, t, fetching=True, components=c)
            routed = eq_top2_is(pattern, torch.tensor([[POS_LHS, POS_RHS]]).expand(len(t), 2))
            _, adder_ok = ov2_mlp2_accuracy(m, components=c)
            n_value = t[:, POS_LHS]
            adder = adder_ok[n_value, n_value]
            wrong = ~ok
            return Measurement.exact(
                float(ok.double().mean()),
                n=len(ok),
                right=int(ok.sum()),
                routed_to_both_slots=float(routed.double().mean()),
                addition_module_right=float(adder.double().mean()),
                model_errors_also_wrong_in_addition_module=(
                    float((~adder[wrong]).double().mean()) if wrong.any() else None
                ),
            )

        items.append(
            item(
                "accuracy[exhaustive_0var_heldout]",
                site="the logits at `=`, every held-out pair as a 0-var sequence",
                definition="accuracy over every held-out pair once, as 0-var sequences",
                kind="observational",
                threshold=EXHAUSTIVE_BAR,
                measure=exhaustive,
                on=ctx.model,
                controls={"reinitialised": reinit},
            )
        )
        items.append(
            item(
                "accuracy[exhaustive_0var_heldout, doubled pairs (n, n)]",
                site="the logits at `=`, every held-out doubled pair as a 0-var sequence",
                definition="accuracy over every held-out doubled pair (n, n) once, as 0-var sequences",
                kind="observational",
                threshold=DOUBLED_BAR,
                measure=doubled_pairs,
                on=ctx.model,
                controls={"reinitialised": reinit},
            )
        )
        tokens, labels = ctx.pool("2var_heldout_pair")
        items.append(
            interchange_item(
                ctx,
                tokens,
                labels,
                pair_table(ctx.task.heldout_pairs, ctx.task.vocab.modulus),
                "IIA = mean_i 1[argmax logits(base_i | resid_post_0[p_i] <- source_i)[15] = (x'_i + y_i) mod 59], "
                "base ~ 2var_heldout_pair, source = base with the value at p_i set to x', (x', y) held out",
                INTERCHANGE_BAR,
                reinit,
            )
        )
        return items
