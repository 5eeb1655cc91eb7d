"""Behavioural and input-interchange measurements shared by the generalization claims (SPEC §4.5)."""

from __future__ import annotations

import torch

from ...data import operand_sources, value_positions
from ...interventions import Patch, Site, run
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng


def pair_table(pairs, modulus: int) -> torch.Tensor:
    """Bool (N, N): is (a, b) in ``pairs``?"""
    t = torch.zeros(modulus, modulus, dtype=torch.bool)
    if pairs:
        idx = torch.tensor(sorted(pairs))
        t[idx[:, 0], idx[:, 1]] = True
    return t


@torch.no_grad()
def operand_value_interchange(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    allowed: torch.Tensor,
    *,
    seed: int = 0,
    wrong_site: bool = False,
    which: torch.Tensor | None = None,
    components: Components = PAPER,
) -> dict:
    """Does the answer follow an operand's value, read where that value sits?

    For each sequence pick an operand (``which``: 0 LHS, 1 RHS per sequence; default at random) whose value sits at position p (its
    value token for a variable, its slot for a constant), and a new value x' != x such that the new
    pair is in ``allowed`` (e.g. held-out pairs only). The source sequence is the base with the token
    at p replaced by x'. Patch ``components.RESID_POST_1`` (what the fetching layer reads; the paper's
    ``blocks.0.hook_resid_post``) at p from the source run into the base run; the counterfactual label is the sum with x'. Interchange accuracy = fraction of sequences
    whose answer becomes the counterfactual label.

    ``wrong_site`` is the control where the answer must NOT follow: a distractor's value token d is
    set to x' in the source and patched at d (an edit that acts: ``acted`` is the mean change it made
    there); sequences with no distractor are dropped from it.
    Returns per-example ``moved`` (bool) with counts; sequences with no valid x' are dropped.
    """
    RESID_AFTER_LAYER1 = components.RESID_POST_1
    N = model.cfg.d_vocab_out
    rng = numpy_rng(seed, "operand value interchange")  # one stream for every arm: the same x' per sequence
    src = operand_sources(tokens, model.vocab)  # (B, 2)
    B = len(tokens)
    drawn = torch.from_numpy(rng.integers(0, 2, size=B))
    which = drawn if which is None else which.long()
    rows = torch.arange(B)
    pos, other_pos = src[rows, which], src[rows, 1 - which]
    x, y = tokens[rows, pos], tokens[rows, other_pos]
    # candidate new values: x' != x with the (ordered) pair allowed
    cand = torch.where(which[:, None] == 0, allowed[:, y].T, allowed[y, :])  # (B, N): row b -> x' allowed?
    cand[rows, x] = False
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
        # A real edit where the claim says the answer is not read: a *distractor's* value position d,
        # patched from a run in which that distractor's value became x'. Sequences with no distractor
        # are dropped from this arm.
        free = value_positions(tokens, model.vocab)
        free[torch.arange(len(keep))[:, None], operand_sources(tokens, model.vocab).clamp(min=0)] = False
        rows = free.any(dim=1).nonzero().squeeze(1)
        d = free.float().argmax(dim=1)[rows]
        tokens, source, counterfactual, new_x = tokens[rows], tokens[rows].clone(), counterfactual[rows], new_x[rows]
        k = torch.arange(len(rows))
        source[k, d] = torch.where(tokens[k, d] == new_x, (new_x + 1) % N, new_x)
        patch_pos = d
        before = run(model, tokens, [], read=[RESID_AFTER_LAYER1], last_only=True).activations[RESID_AFTER_LAYER1]
    patch = Patch(Site(RESID_AFTER_LAYER1, positions=patch_pos), source)
    out = run(model, tokens, [patch], last_only=True, read=[RESID_AFTER_LAYER1])
    acted = None
    if wrong_site:  # the mean change the edit made where it patched
        change = (out.activations[RESID_AFTER_LAYER1] - before)[k, patch_pos].norm(dim=-1)
        acted = float(change.mean()) if len(k) else 0.0
    moved = out.last_logits.argmax(-1) == counterfactual
    return {
        "moved": moved,
        "n": int(len(tokens)),
        "dropped": int(B - len(tokens)),
        "hook_calls": out.hook_calls,
        "acted": acted,
    }
