"""Breaks of the fetching head's scores that change how much `=` gives each operand, the milder ones
keeping the two operands' values as its two largest keys: a rank-one edit of W_K that adds about ``nats``
of attention score, for the mean `=` query, to every key of one kind (PAD tokens, variable tokens, the
first six positions, the LHS slot, number tokens) and none to an average key; W_Q scaled (softer or
sharper attention, every key's score by the same factor); the operand slots' positions taken out of W_K's
input in part or whole. Used in docs/reregistrations/identity_qk_fetches_evenly_2026-12-07.md,
tests/test_identity_qk_fetch.py and tests/test_whole_algorithm_parts.py.
"""

from __future__ import annotations

import copy

import torch

from assignadd.model import AssignAddTransformer
from assignadd.model.components import PAPER, Components

# Which keys gain score: a mask over (tokens, positions) of a batch.
TARGETS = {
    "PAD tokens": lambda tokens, vocab: tokens == vocab.pad,
    "variable tokens": lambda tokens, vocab: tokens >= vocab.first_var,
    "positions 0-5": lambda tokens, vocab: torch.arange(tokens.shape[1]).expand_as(tokens) < 6,
    "the LHS slot (position 13)": lambda tokens, vocab: torch.arange(tokens.shape[1]).expand_as(tokens) == 13,
    "number tokens": lambda tokens, vocab: tokens < vocab.modulus,
}


def keys_attract(
    model: AssignAddTransformer, target: str, nats: float, tokens: torch.Tensor, *, components: Components = PAPER
) -> AssignAddTransformer:
    """A copy of ``model`` whose fetching head's keys of kind ``target`` (``TARGETS``) gain about ``nats``
    of score from the mean `=` query over ``tokens``; every other weight bit-identical."""
    layer, head = components.fetch_layer, components.fetch_head
    names = (f"blocks.{layer}.hook_resid_pre", f"blocks.{layer}.attn.hook_q")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
        x, q = cache[names[0]].double(), cache[names[1]][:, -1, head].double().mean(0)
        mask = TARGETS[target](tokens, model.vocab)
        d = x[mask].mean(0) - x.reshape(-1, x.shape[-1]).mean(0)  # the kind's mean key input, centred
        u = d / d.dot(d)  # x . u is ~1 on the kind's keys, ~0 on an average key
        edit = nats * model.cfg.d_head**0.5 * torch.outer(u, q / q.dot(q))  # (d_model, d_head)
        mutated = copy.deepcopy(model)
        W_K = mutated.blocks[layer].attn.W_K
        W_K[head] += edit.to(W_K.dtype)
    return mutated


def queries_scaled(
    model: AssignAddTransformer, factor: float, *, components: Components = PAPER
) -> AssignAddTransformer:
    """A copy of ``model`` with the fetching head's W_Q (so every score from it) times ``factor``."""
    mutated = copy.deepcopy(model)
    with torch.no_grad():
        mutated.blocks[components.fetch_layer].attn.W_Q[components.fetch_head] *= factor
    return mutated


def slot_positions_suppressed(
    model: AssignAddTransformer, strength: float, *, components: Components = PAPER
) -> AssignAddTransformer:
    """A copy of ``model`` with the span of the operand slots' positional embeddings (13, 14) taken out of
    the fetching layer's key input, in part (``strength`` < 1) or whole (1): W_K <- (I - strength Q Q^T) W_K,
    Q an orthonormal basis of W_pos[13:15]. `=` finds the constant operands by position less well; every
    other weight bit-identical."""
    mutated = copy.deepcopy(model)
    with torch.no_grad():
        q, _ = torch.linalg.qr(mutated.pos_embed.W_pos[13:15].double().T)  # (d_model, 2)
        P = (torch.eye(q.shape[0], dtype=torch.float64) - strength * q @ q.T).float()
        W_K = mutated.blocks[components.fetch_layer].attn.W_K
        W_K.copy_(torch.einsum("ij,hjk->hik", P, W_K))
    return mutated
