"""Mechanism knock-outs: copies of a model with one claimed mechanism removed and the rest intact,
built with the interventions engine's ``knockout`` (so every entry point, ``__call__``,
``run_with_hooks``, ``run``, ``capture`` and ``last_logits``, runs the knock-out).

They are the "mechanism ablated" controls of SPEC §5: a claim must fail on its own knock-out.
"""

from __future__ import annotations

import torch

from ...data import value_positions
from ...interventions import Replace, Site, knockout
from ...interventions.mutants import generator
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components
from .circuits import variable_ov1_embeddings


def uniform_rows(pattern: torch.Tensor, hook=None) -> torch.Tensor:
    """Every query row uniform over its causal keys (the engine applies it only at the site's rows)."""
    T = pattern.shape[-1]
    causal = torch.tril(torch.ones(T, T, dtype=pattern.dtype, device=pattern.device))
    return (causal / causal.sum(-1, keepdim=True)).expand_as(pattern)


def uniform_value_attention(model: AssignAddTransformer, *, components: Components = PAPER) -> AssignAddTransformer:
    """The previous-token head's layer's attention rows at value positions (a number right after a
    variable) made uniform over the causal keys, every head of that layer: the previous-token mechanism
    removed."""
    return knockout(model, [Replace(Site(components.PATTERN_1, positions=value_positions), uniform_rows)])


def scrambled_identity_qk(
    model: AssignAddTransformer, seed: int = 0, *, components: Components = PAPER
) -> AssignAddTransformer:
    """The fetching layer's keys at value positions see variable identities permuted.

    With X the variables' OV_1 images (rows) and pi a derangement, the key input x at a value token
    becomes x A, A = I + X^+ (X[pi] - X), the least-change linear map with X A = X[pi]: M = X QK_2 X^T
    becomes M[:, pi] there, so `=` looks up the wrong value. Other positions (the operand slots that
    constants are read from) are untouched."""
    X = variable_ov1_embeddings(model, components=components).double()  # (V, D)
    V = X.shape[0]
    g = generator(seed, "scrambled_identity_qk")
    while True:
        perm = torch.randperm(V, generator=g)
        if not (perm == torch.arange(V)).any():
            break
    shift = (torch.linalg.pinv(X) @ (X[perm] - X)).float()  # (D, D): x A - x = x @ shift
    W_K, stash = model.blocks[components.fetch_layer].attn.W_K.detach().clone(), {}

    def keep_input(resid, hook):  # reads the key input; changes nothing
        stash["x"] = resid
        return resid

    def permute_keys(k, hook):  # k: (B, T, H, d_head); the Site restricts the edit to value positions
        return k + torch.einsum("btd,hde->bthe", stash["x"] @ shift, W_K.to(k.dtype))

    return knockout(
        model,
        [
            Replace(Site(components.RESID_PRE_2), keep_input),
            Replace(Site(components.KEYS_2, positions=value_positions), permute_keys),
        ],
    )
