"""Mechanism knock-outs: copies of a model with one claimed mechanism removed and the rest intact.

They are the "mechanism ablated" controls of SPEC §5: a claim must fail on its own knock-out, and
claims that do not depend on that mechanism should still pass where the paper says they should.
"""
from __future__ import annotations

import copy

import torch

from ...data import value_positions
from ...model import AssignAddTransformer
from .circuits import variable_ov1_embeddings


def _token_aware_copy(model: AssignAddTransformer):
    """A deep copy whose ``forward`` records each batch's tokens (for hooks that depend on them).

    ``forward`` is wrapped on the instance because TransformerLens' ``run_with_hooks`` calls
    ``model.forward`` directly, bypassing module pre-hooks."""
    ablated = copy.deepcopy(model)
    state = {}
    plain_forward = ablated.forward

    def forward(tokens, *args, **kwargs):
        state["tokens"] = tokens
        return plain_forward(tokens, *args, **kwargs)

    ablated.forward = forward
    return ablated, state


def uniform_value_attention(model: AssignAddTransformer) -> AssignAddTransformer:
    """Layer 1's attention rows at value positions (a number right after a variable) made uniform over
    the causal keys: the previous-token mechanism removed. Token-aware, so any caller's forward gets
    the knock-out."""
    ablated, state = _token_aware_copy(model)

    def flatten(pattern, hook):
        mask = value_positions(state["tokens"]).to(pattern.device)  # (B, T)
        T = pattern.shape[-1]
        causal = torch.tril(torch.ones(T, T, dtype=pattern.dtype, device=pattern.device))
        uniform = causal / causal.sum(-1, keepdim=True)  # (T, T)
        return torch.where(mask[:, None, :, None], uniform, pattern)

    ablated.add_perma_hook("blocks.0.attn.hook_pattern", flatten)
    ablated.knockout_name = "uniform Layer-1 attention at value positions"
    return ablated


def scrambled_identity_qk(model: AssignAddTransformer, seed: int = 0) -> AssignAddTransformer:
    """Layer 2's keys at value positions see variable identities permuted.

    With X the variables' OV_1 images (rows) and pi a derangement, the key input x at a value token
    becomes x A, A = I + X^+ (X[pi] - X), the least-change linear map with X A = X[pi]: M = X QK_2 X^T
    becomes M[:, pi] there, so `=` looks up the wrong value. Other positions (the operand slots that
    constants are read from) are untouched."""
    ablated, state = _token_aware_copy(model)
    X = variable_ov1_embeddings(model).double()  # (V, D)
    V = X.shape[0]
    g = torch.Generator().manual_seed(seed)
    while True:
        perm = torch.randperm(V, generator=g)
        if not (perm == torch.arange(V)).any():
            break
    shift = (torch.linalg.pinv(X) @ (X[perm] - X)).float()  # (D, D): x A - x = x @ shift
    W_K, stash = ablated.blocks[1].attn.W_K, {}

    def keep_input(resid, hook):
        stash["x"] = resid
        return resid

    def permute_keys(k, hook):  # k: (B, T, H, d_head)
        delta = torch.einsum("btd,hde->bthe", stash["x"] @ shift, W_K)
        mask = value_positions(state["tokens"]).to(k.device)[:, :, None, None]
        return torch.where(mask, k + delta, k)

    ablated.add_perma_hook("blocks.1.hook_resid_pre", keep_input)
    ablated.add_perma_hook("blocks.1.attn.hook_k", permute_keys)
    ablated.knockout_name = "Layer-2 QK variable block permuted at value positions"
    ablated.knockout_permutation = perm.tolist()
    return ablated
