"""Claim (SPEC §4.5): the model answers number pairs it never saw in training, in any form.

30% of the 59 x 59 pairs never appear in training, neither as constants nor through variables. The
paper reports 99.4% on held-out pairs as constants; it gives no figure for 1- and 2-variable
held-out sequences, which are harder, so their bars are set below it (reasons inline). The causal
item checks that held-out answers are *computed from the operands where they sit*: changing an
operand's value at its position to another held-out pair moves the answer to the new sum.
"""

from __future__ import annotations

from functools import partial

import torch

from ..data.tokens import POS_LHS, POS_RHS
from .base import (
    Arm,
    Context,
    Hypothesis,
    Measurement,
    REINITIALISED,
    Threshold,
    WRONG_SITE_INTERCHANGE,
    rate,
    register,
)
from .declaration import WHOLE_MODEL, Item, Kind
from .measures.behaviour import operand_value_interchange, pair_table
from .measures.circuits import eq_top2_is, fetch_shares, head_pattern, last_position_correct, ov2_mlp2_accuracy

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


# Shared with restricted_slot_generalization: the per-pool accuracy items and the operand-value interchange.


def pool_accuracy(ctx: Context, arm: Arm, pool: str) -> Measurement:
    """Accuracy at the last position on the evaluation pool ``pool``."""
    tokens, labels = ctx.pool(pool)
    return rate(last_position_correct(arm.model, tokens, labels))


def accuracy_items(bars: dict, optional: tuple[str, ...] = ()) -> tuple[Item, ...]:
    """One observational item per pool of ``bars``: accuracy at the last position against its bar; the
    pools in ``optional`` are shown, not deciding."""
    return tuple(
        Item(
            f"accuracy[{pool}]",
            site="the logits at `=` (position 15)",
            definition=f"mean_i 1[argmax logits(x_i)[15] = (n1_i + n2_i) mod 59], x_i ~ {pool}",
            kind=Kind.OBSERVATIONAL,
            threshold=bar,
            measure=partial(pool_accuracy, pool=pool),
            controls=("reinitialised",),
            required=pool not in optional,
        )
        for pool, bar in bars.items()
    )


def operand_interchange(
    ctx: Context,
    arm: Arm,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    allowed: torch.Tensor,
    which: torch.Tensor | None = None,
) -> Measurement:
    """``operand_value_interchange`` on ``tokens`` for ``arm`` (its "wrong_site" variant patches a distractor)."""
    out = operand_value_interchange(
        arm.model,
        tokens,
        labels,
        allowed,
        seed=ctx.seed,
        wrong_site=arm.variant == "wrong_site",
        which=which,
        components=ctx.components,
    )
    return rate(out["moved"], acted=out["acted"], dropped=out["dropped"])


def interchange_item(definition: str, threshold: Threshold, measure) -> Item:
    """The causal item of the generalization claims: the answer follows an operand's value where it sits,
    on the model, a re-initialised model and the wrong-site patch."""
    return Item(
        "answer_follows_operand_value",
        site="$RESID_POST_1 at the operand's value token (Layer 2's input); read at the logits at `=`",
        intervention="patched from a run of the same sequence with that value set to another number",
        definition=definition,
        kind=Kind.CAUSAL,
        threshold=threshold,
        measure=measure,
        controls=("reinitialised", "wrong_site"),
    )


def _exhaustive(ctx: Context) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every held-out pair once as a 0-var sequence: tokens, labels, and which are doubled pairs (n, n)."""

    def build():
        tokens, labels = ctx.task.exhaustive_0var_heldout(seed=ctx.seed)
        return tokens, labels, tokens[:, POS_LHS] == tokens[:, POS_RHS]

    return ctx.memo(("heldout_generalization", "exhaustive"), build)


def exhaustive(ctx: Context, arm: Arm) -> Measurement:
    # Every held-out pair once: the whole population of this split, so no sampling interval.
    tokens, labels, doubled = _exhaustive(ctx)
    ok = last_position_correct(arm.model, tokens, labels).double()
    return Measurement.exact(
        float(ok.mean()),
        n=len(ok),
        wrong=int((ok == 0).sum()),
        doubled_pairs_accuracy=float(ok[doubled].mean()) if doubled.any() else None,
        other_pairs_accuracy=float(ok[~doubled].mean()) if (~doubled).any() else None,
    )


def doubled_pairs(ctx: Context, arm: Arm) -> Measurement:
    # Where the errors lie: the Layer-2 routing (does `=` attend to both operand slots?) and the
    # weights-only addition module (OV_2 e_n + OV_2 e_n through the MLP and W_U, the authors'
    # ov2_mlp2) on the same pairs. Every trained model we know errs on held-out (n, n) only, and
    # its addition module errs there too while the routing is intact: the fault is the adder's.
    m = arm.model
    tokens, labels, doubled = _exhaustive(ctx)
    t = tokens[doubled]
    ok = last_position_correct(m, t, labels[doubled])
    c = ctx.components  # the fetching head and the adding MLP (§2.1)
    pattern = head_pattern(m, t, fetching=True, components=c)
    routed = eq_top2_is(pattern, torch.tensor([[POS_LHS, POS_RHS]]).expand(len(t), 2))
    _, adder_ok = ov2_mlp2_accuracy(m, components=c, shares=fetch_shares(m, t, components=c))
    n_value = t[:, POS_LHS]
    adder = adder_ok[n_value, n_value]
    wrong = ~ok
    return Measurement.exact(
        float(ok.double().mean()),
        n=len(ok),
        right=int(ok.sum()),
        routed_to_both_slots=float(routed.double().mean()),
        addition_module_right=float(adder.double().mean()),
        model_errors_also_wrong_in_addition_module=(float((~adder[wrong]).double().mean()) if wrong.any() else None),
    )


def interchange(ctx: Context, arm: Arm) -> Measurement:
    tokens, labels = ctx.pool("2var_heldout_pair")
    allowed = pair_table(ctx.task.heldout_pairs, ctx.task.vocab.modulus)
    return operand_interchange(ctx, arm, tokens, labels, allowed)


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
    owns = WHOLE_MODEL
    figures = ()
    cost = 1.8
    items = (
        # held-out constants are decided on the exhaustive set below; the pool is shown
        *accuracy_items(ACCURACY_BARS, optional=("0var_heldout_pair",)),
        Item(
            "accuracy[exhaustive_0var_heldout]",
            site="the logits at `=`, every held-out pair as a 0-var sequence",
            definition="accuracy over every held-out pair once, as 0-var sequences",
            kind=Kind.OBSERVATIONAL,
            threshold=EXHAUSTIVE_BAR,
            measure=exhaustive,
            controls=("reinitialised",),
        ),
        Item(
            "accuracy[exhaustive_0var_heldout, doubled pairs (n, n)]",
            site="the logits at `=`, every held-out doubled pair as a 0-var sequence",
            definition="accuracy over every held-out doubled pair (n, n) once, as 0-var sequences",
            kind=Kind.OBSERVATIONAL,
            threshold=DOUBLED_BAR,
            measure=doubled_pairs,
            controls=("reinitialised",),
        ),
        interchange_item(
            "IIA = mean_i 1[argmax logits(base_i | resid_post_0[p_i] <- source_i)[15] = (x'_i + y_i) mod 59], "
            "base ~ 2var_heldout_pair, source = base with the value at p_i set to x', (x', y) held out",
            INTERCHANGE_BAR,
            interchange,
        ),
    )
