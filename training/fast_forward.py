"""The training step's forward: the last position's logits, with no hooks, for training alone.

The loss reads position T-1 only, so the last block needs keys and values at every position but its
query, attention output, MLP and unembedding at one (``model.transformer.last_block_at_last_position``,
which the hooked forward uses too when no hook sits in the last block), and Layer 1's q/k/v products are
kept separate so that neither the forward nor the backward copies (bench/RESULTS.md). Everything that
measures a model goes through its one hooked ``forward`` (``model(tokens, last_only=True)``); this path
fires no hook, so it refuses a model with hooks attached rather than silently skipping them. Tests hold
it equal to the hooked forward (values and gradients).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..model.transformer import AssignAddTransformer, last_block_at_last_position, layer_norm_unhooked, mlp_unhooked


class HookedModelError(ValueError):
    """The hook-free path was given a model with hooks attached."""


def hooks_attached(model: AssignAddTransformer) -> bool:
    """True when any hook point of ``model`` holds a forward or backward hook (TransformerLens'
    ``HookPoint.fwd_hooks`` / ``bwd_hooks``: temporary, permanent, a knock-out's)."""
    return any(hp.fwd_hooks or hp.bwd_hooks for hp in model.hook_dict.values())


def last_logits(model: AssignAddTransformer, tokens: torch.Tensor, biases: bool = True) -> torch.Tensor:
    """Logits at the last position, (B, T) -> (B, d_vocab_out), fp32; equal to
    ``model(tokens, last_only=True)[:, -1]`` up to the order of float sums. ``biases=False`` skips the bias
    terms, for a caller that knows they are zero (the trainer freezes them at zero), which saves
    mixed-dtype additions under autocast."""
    if hooks_attached(model):
        raise HookedModelError(
            "training.fast_forward.last_logits fires no hooks, and this model has hooks "
            "attached: use model(tokens, last_only=True)"
        )
    B, T = tokens.shape
    x = F.embedding(tokens, model.embed.W_E) + model.pos_embed.W_pos[:T]  # (B, T, D)
    for block in model.blocks[:-1]:
        a = block.attn
        H, D, Dh = a.W_Q.shape
        # Three products rather than one fused one: each output is contiguous, so neither the forward
        # (per-head views) nor the backward (re-assembling a fused gradient) copies; about an eighth
        # faster for this block's forward and backward together (bench/RESULTS.md).
        x_in = layer_norm_unhooked(block.ln1, x)  # x itself without LayerNorm
        q, k, v = (x_in @ W.permute(1, 0, 2).reshape(D, H * Dh) for W in (a.W_Q, a.W_K, a.W_V))
        if biases:
            q, k, v = q + a.b_Q.reshape(H * Dh), k + a.b_K.reshape(H * Dh), v + a.b_V.reshape(H * Dh)
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))  # each (B, H, T, Dh)
        scores = (q @ k.transpose(-1, -2)).float() / a.scale
        scores = scores.masked_fill(~a.mask[:T, :T], float("-inf"))
        z = scores.softmax(dim=-1).to(v.dtype) @ v  # (B, H, T, Dh)
        x = x + z.transpose(1, 2).reshape(B, T, H * Dh) @ a.W_O.reshape(H * Dh, D)
        if biases:
            x = x + a.b_O
        if block.has_mlp:
            x = x + mlp_unhooked(block.mlp, layer_norm_unhooked(block.ln2, x), biases)
    return last_block_at_last_position(model, x, biases)
