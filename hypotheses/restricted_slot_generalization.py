"""Claim (SPEC §4.5): variables work in operand slots they never occupied in training.

`a` and `b` are never the RHS operand in training and `k` and `l` never the LHS. The paper finds
that these sequences generalize late, in a refinement phase. Bars are set from chance and from the
held-out claim's bars (no paper figure); the causal item checks that restricted-slot answers are
computed from the routed values.
"""

from __future__ import annotations

import torch

from ..data import POS_LHS
from .base import Arm, Context, Hypothesis, Measurement, REINITIALISED, Threshold, WRONG_SITE_INTERCHANGE, register
from .declaration import WHOLE_MODEL
from .heldout_generalization import accuracy_items, interchange_item, operand_interchange
from .measures.behaviour import pair_table

ACCURACY_BARS = {
    "1var_restricted_slot": Threshold(0.95, ">=", "as held-out 1-var: within 5 points of perfect, 50x chance (1/59)"),
    "2var_restricted_1": Threshold(0.90, ">=", "as held-out 2-var: within 10 points of perfect, 50x chance"),
    "2var_restricted_2": Threshold(0.90, ">=", "both slots restricted (4 variable pairs): same bar as one slot"),
}
INTERCHANGE_BAR = Threshold(
    0.90,
    ">=",
    "if restricted-slot answers are computed from the routed values, a new value "
    "at the operand's position must move the answer to its sum; chance 1/59",
)


def interchange(ctx: Context, arm: Arm) -> Measurement:
    tokens, labels = ctx.pool("2var_restricted_1")
    # change the operand that sits in its forbidden slot
    never_lhs = torch.tensor([ctx.task.vocab.first_var + v for v in ctx.task.never_lhs.tolist()])
    which = (~torch.isin(tokens[:, POS_LHS], never_lhs)).long()
    allowed = pair_table(ctx.task.training_pairs, ctx.task.vocab.modulus)
    return operand_interchange(ctx, arm, tokens, labels, allowed, which=which)


@register
class RestrictedSlotGeneralization(Hypothesis):
    id = "restricted_slot_generalization"
    spec = "§4.5"
    statement = (
        "Variables answer correctly in operand slots they never occupied in training (a, b as the RHS; "
        "k, l as the LHS), with the answer computed from their assigned values."
    )
    controls = {
        "reinitialised": REINITIALISED,
        "wrong_site": WRONG_SITE_INTERCHANGE,
    }
    owns = WHOLE_MODEL
    cost = 1.75
    items = (
        *accuracy_items(ACCURACY_BARS),
        interchange_item(
            "IIA = mean_i 1[argmax logits(base_i | resid_post_0[p_i] <- source_i)[15] = (x'_i + y_i) mod 59], "
            "base ~ 2var_restricted_1, p_i = the value of the operand in its forbidden slot, source = base with it "
            "set to x', (x', y) a training pair",
            INTERCHANGE_BAR,
            interchange,
        ),
    )
