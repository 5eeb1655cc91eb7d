"""Behavioural and input-interchange measurements shared by the generalization claims (SPEC §4.5),
and token-aware knock-outs used as "mechanism ablated" controls."""
from __future__ import annotations

import numpy as np
import torch

from ...data import operand_sources, value_positions
from ...interventions import Patch, Site, run
from ...model import AssignAddTransformer
from .circuits import last_position_correct

RESID_AFTER_LAYER1 = "blocks.0.hook_resid_post"


def pair_table(pairs, modulus: int) -> torch.Tensor:
    """Bool (N, N): is (a, b) in ``pairs``?"""
    t = torch.zeros(modulus, modulus, dtype=torch.bool)
    if pairs:
        idx = torch.tensor(sorted(pairs))
        t[idx[:, 0], idx[:, 1]] = True
    return t


@torch.no_grad()
def operand_value_interchange(model: AssignAddTransformer, tokens: torch.Tensor, labels: torch.Tensor,
                              allowed: torch.Tensor, *, seed: int = 0, wrong_site: bool = False,
                              which: torch.Tensor | None = None) -> dict:
    """Does the answer follow an operand's value, read where that value sits?

    For each sequence pick an operand (``which``: 0 LHS, 1 RHS per sequence; default at random) whose value sits at position p (its
    value token for a variable, its slot for a constant), and a new value x' != x such that the new
    pair is in ``allowed`` (e.g. held-out pairs only). The source sequence is the base with the token
    at p replaced by x'. Patch ``blocks.0.hook_resid_post`` at p from the source run into the base
    run; the counterfactual label is the sum with x'. Interchange accuracy = fraction of sequences
    whose answer becomes the counterfactual label.

    ``wrong_site`` patches the same source at another prefix position instead (a position holding
    neither operand's value): the control where the answer must NOT follow.
    Returns per-example ``moved`` (bool) with counts; sequences with no valid x' are dropped.
    """
    N = model.cfg.d_vocab_out
    rng = np.random.default_rng([seed, 31])
    src = operand_sources(tokens)  # (B, 2)
    B = len(tokens)
    drawn = torch.from_numpy(rng.integers(0, 2, size=B))
    which = drawn if which is None else which.long()
    pos = src[torch.arange(B), which]
    other_pos = src[torch.arange(B), 1 - which]
    x = tokens[torch.arange(B), pos]
    y = tokens[torch.arange(B), other_pos]
    # candidate new values: x' != x with the (ordered) pair allowed
    cand = torch.where(which[:, None] == 0, allowed[:, y].T, allowed[y, :])  # (B, N): row b -> x' allowed?
    cand[torch.arange(B), x] = False
    has = cand.any(dim=1) & (pos >= 0) & (other_pos >= 0)
    scores = torch.from_numpy(rng.random((B, N))) * cand
    new_x = scores.argmax(dim=1)
    keep = has.nonzero().squeeze(1)
    tokens, pos, new_x, y = tokens[keep], pos[keep], new_x[keep], y[keep]
    source = tokens.clone()
    source[torch.arange(len(keep)), pos] = new_x
    counterfactual = (new_x + y) % N
    patch_pos = pos
    if wrong_site:
        # the first prefix position that is neither operand's value: a PAD, a variable or a distractor
        srcs = operand_sources(tokens)
        free = torch.ones(tokens.shape, dtype=torch.bool)
        free[:, 12:] = False
        free[torch.arange(len(keep))[:, None], srcs.clamp(min=0)] = False
        patch_pos = free.float().argmax(dim=1)
    out = run(model, tokens, [Patch(Site(RESID_AFTER_LAYER1, positions=patch_pos), source)], last_only=True)
    moved = out.last_logits.argmax(-1) == counterfactual
    return {"moved": moved, "n": int(len(keep)), "dropped": int(B - len(keep)), "hook_calls": out.hook_calls}


def pool_accuracy_items(ctx, bars: dict, controls: dict) -> list:
    """One observational evidence item per pool: accuracy at the last position against its bar."""
    from ..base import item, rate

    items = []
    for pool, bar in bars.items():
        tokens, labels = ctx.pool(pool)
        items.append(item(
            f"accuracy[{pool}]", f"mean_i 1[argmax logits(x_i)[15] = (n1_i + n2_i) mod 59], x_i ~ {pool}",
            "observational", bar, lambda m, t=tokens, y=labels: rate(last_position_correct(m, t, y)), ctx.model,
            controls))
    return items


def interchange_item(ctx, tokens: torch.Tensor, labels: torch.Tensor, allowed: torch.Tensor, definition: str,
                     bar, reinit, which: torch.Tensor | None = None):
    """The causal item of the generalization claims: ``operand_value_interchange`` on ``tokens``, on the
    model, a re-initialised model and the wrong-site patch."""
    from ..base import item, rate

    def interchange(subject):
        model, wrong = subject
        out = operand_value_interchange(model, tokens, labels, allowed, seed=ctx.seed, wrong_site=wrong, which=which)
        return rate(out["moved"], dropped=out["dropped"])

    return item("answer_follows_operand_value", definition, "causal", bar, interchange, (ctx.model, False),
                {"reinitialised": (reinit, False), "wrong_site": (ctx.model, True)})
