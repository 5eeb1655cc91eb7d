"""Claim (SPEC §4.5): variables work in operand slots they never occupied in training.

`a` and `b` are never the RHS operand in training and `k` and `l` never the LHS. The paper finds
that these sequences generalize late, in a refinement phase. Bars are set from chance and from the
held-out claim's bars (no paper figure); the causal item checks that restricted-slot answers are
computed from the routed values.
"""
from __future__ import annotations

import torch

from .base import Context, Evidence, Hypothesis, Threshold, item, rate, register
from .measures.behaviour import operand_value_interchange, pair_table
from .measures.circuits import last_position_correct

ACCURACY_BARS = {
    "1var_restricted_slot": Threshold(0.95, ">=", "as held-out 1-var: within 5 points of perfect, 50x chance (1/59)"),
    "2var_restricted_1": Threshold(0.90, ">=", "as held-out 2-var: within 10 points of perfect, 50x chance"),
    "2var_restricted_2": Threshold(0.90, ">=", "both slots restricted (4 variable pairs): same bar as one slot"),
}
INTERCHANGE_BAR = Threshold(0.90, ">=", "if restricted-slot answers are computed from the routed values, a new value "
                                        "at the operand's position must move the answer to its sum; chance 1/59")


@register
class RestrictedSlotGeneralization(Hypothesis):
    id = "restricted_slot_generalization"
    spec = "§4.5"
    statement = ("Variables answer correctly in operand slots they never occupied in training (a, b as the RHS; "
                 "k, l as the LHS), with the answer computed from their assigned values.")
    controls = {
        "reinitialised": "a freshly initialised model of the same shape (TransformerLens default init)",
        "wrong_site": "the interchange patched at a prefix position that holds neither operand's value",
    }

    def evidence(self, ctx: Context) -> list[Evidence]:
        reinit = ctx.reinitialised_model()
        items = []
        for pool, bar in ACCURACY_BARS.items():
            tokens, labels = ctx.pool(pool)
            items.append(item(
                f"accuracy[{pool}]", f"mean_i 1[argmax logits(x_i)[15] = (n1_i + n2_i) mod 59], x_i ~ {pool}",
                "observational", bar, lambda m: rate(last_position_correct(m, tokens, labels)), ctx.model,
                {"reinitialised": reinit}))
        allowed = pair_table(ctx.task.training_pairs, ctx.task.vocab.modulus)
        tokens, labels = ctx.pool("2var_restricted_1")
        # change the operand that sits in its forbidden slot
        never_lhs = torch.tensor([ctx.task.vocab.first_var + v for v in ctx.task.never_lhs.tolist()])
        which = (~torch.isin(tokens[:, 13], never_lhs)).long()

        def interchange(subject):
            model, wrong = subject
            out = operand_value_interchange(model, tokens, labels, allowed, seed=ctx.seed, wrong_site=wrong,
                                            which=which)
            return rate(out["moved"], dropped=out["dropped"])

        items.append(item(
            "answer_follows_operand_value",
            "IIA = mean_i 1[argmax logits(base_i | resid_post_0[p_i] <- source_i)[15] = (x'_i + y_i) mod 59], "
            "base ~ 2var_restricted_1, p_i = the value of the operand in its forbidden slot, source = base with it set to x', (x', y) a training pair",
            "causal", INTERCHANGE_BAR, interchange, (ctx.model, False),
            {"reinitialised": (reinit, False), "wrong_site": (ctx.model, True)}))
        return items
