"""Claim (SPEC §4.2): Layer 2's QK circuit matches variable identity.

The `=` query carries OV_1 of the operand variables (Layer 1 copied them from the operand slots); a
value token's key carries OV_1 of its own variable (Layer 1's previous-token head copied it). So in
M = (E_var OV_1) QK_2 (E_var OV_1)^T the diagonal should win, and `=` should attend to the operands'
value tokens. Causal test: swap which value token carries which variable identity (Layer 1's output
at the operand's value token and at a distractor's) and the answer must follow the swap.
"""
from __future__ import annotations

import numpy as np
import torch

from ..data import operand_sources, value_positions
from ..interventions import Patch, Site, run
from .base import Context, Evidence, Hypothesis, Measurement, REINITIALISED, Threshold, item, rate, register
from .measures.circuits import identity_qk_diagonal, layer2_eq_to_operand_values

ATTN_OUT_1 = "blocks.0.hook_attn_out"

DIAGONAL = Threshold(0.90, ">=", "every variable should find itself: >= 11 of 12 rows (0.917); chance 1/12")
EQ_VALUES = Threshold(0.90, ">=", "'= attends to the operands' values' in >= 90% of sequences; chance of a given "
                                  "top-2 pair among 16 keys is 1/120")
FOLLOWS = Threshold(0.80, ">=", "identity-based routing must move the answer to the swapped value in most sequences "
                                "(no paper figure); chance of a given wrong answer is 1/59")


def identity_swap(model, tokens: torch.Tensor, *, seed: int, wrong_site: bool = False) -> dict:
    """Swap Layer 1's output between the value token of one variable operand and that of a distractor
    assignment (same sequence). The `=` query looking for the operand's identity should now find the
    distractor's value z: counterfactual label (z + other operand) mod N.

    ``wrong_site`` swaps at the two *variable* tokens instead (one position earlier), where the claim
    says identity is not read. Sequences without a distractor, or whose distractor value equals the
    operand's, are dropped.
    """
    N = model.cfg.d_vocab_out
    rng = np.random.default_rng([seed, 41])
    B = len(tokens)
    src = operand_sources(tokens)
    is_var = tokens[:, 13:15] >= model.cfg.d_vocab_out + 3  # (B, 2)
    # choose a variable operand (random when both are)
    pick = torch.from_numpy(rng.integers(0, 2, size=B))
    pick = torch.where(is_var[torch.arange(B), pick], pick, 1 - pick)
    p = src[torch.arange(B), pick]
    other = src[torch.arange(B), 1 - pick]
    vals = value_positions(tokens)
    vals[torch.arange(B)[:, None], src.clamp(min=0)] = False  # distractor values only
    scores = torch.from_numpy(rng.random(vals.shape)) * vals
    d = scores.argmax(dim=1)
    z = tokens[torch.arange(B), d]
    x = tokens[torch.arange(B), p]
    y = tokens[torch.arange(B), other]
    keep = (vals.any(dim=1) & is_var[torch.arange(B), pick] & (z != x)).nonzero().squeeze(1)
    tokens, p, d, z, y = tokens[keep], p[keep], d[keep], z[keep], y[keep]
    at = torch.stack([p, d], 1) - (1 if wrong_site else 0)
    out = run(model, tokens, [Patch(Site(ATTN_OUT_1, positions=at), tokens, source_positions=at.flip(1))],
              last_only=True)
    moved = out.last_logits.argmax(-1) == (z + y) % N
    return {"moved": moved, "dropped": int(B - len(keep))}


@register
class IdentityQK(Hypothesis):
    id = "identity_qk"
    spec = "§4.2"
    statement = ("Layer 2's QK circuit matches variable identity: the `=` query, carrying OV_1 of an operand "
                 "variable, attends to the value token whose key carries OV_1 of the same variable.")
    controls = {
        "reinitialised": REINITIALISED,
        "wrong_site": "the identity swap done at the variable tokens instead of the value tokens",
    }

    def evidence(self, ctx: Context) -> list[Evidence]:
        reinit = ctx.reinitialised_model()
        mixed = torch.cat([ctx.pool("1var_train")[0], ctx.pool("2var_train")[0]])

        def diagonal(model):
            is_diag, margin = identity_qk_diagonal(model)
            return Measurement.exact(float(is_diag.double().mean()), n=len(is_diag),
                                     median_margin=float(margin.median()), rows_on_diagonal=int(is_diag.sum()))

        def swap(subject):
            model, wrong = subject
            out = identity_swap(model, mixed, seed=ctx.seed, wrong_site=wrong)
            return rate(out["moved"], dropped=out["dropped"])

        return [
            item("identity_block_diagonal",
                 "fraction of rows i of M = (E_var OV_1) W_Q^2 W_K^2T (E_var OV_1)^T with argmax_j M[i, j] = i",
                 "observational", DIAGONAL, diagonal, ctx.model, {"reinitialised": reinit}),
            item("eq_attends_to_operand_values",
                 "mean_i 1[top2_k A2_i[15, k] = value positions of the two operands], 1var_train + 2var_train",
                 "observational", EQ_VALUES, lambda m: rate(layer2_eq_to_operand_values(m, mixed)), ctx.model,
                 {"reinitialised": reinit}),
            item("answer_follows_identity_swap",
                 "mean_i 1[argmax logits(x_i | attn_out_1[p] <-> attn_out_1[d])[15] = (z_i + y_i) mod 59], p the "
                 "operand's value token, d a distractor's (value z)", "causal", FOLLOWS, swap, (ctx.model, False),
                 {"reinitialised": (reinit, False), "wrong_site": (ctx.model, True)}),
        ]
