"""The training step's forward: the last position's logits, with no hooks, for training alone.

The loss reads position T-1 only: this is the model's one forward (``AssignAddTransformer.forward``) with
``last_only`` and ``hooked=False``, where every block's q/k/v products are kept separate so that neither
the forward nor the backward copies (bench/RESULTS.md), and the last block runs its query, attention
output, MLP and unembedding at the last position. That forward fires no hook, so this path refuses a model
with hooks attached rather than silently skipping them. Tests hold it equal to the hooked forward (values
and gradients).
"""

from __future__ import annotations

import torch

from ..model.transformer import AssignAddTransformer


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
    return model(tokens, last_only=True, hooked=False, biases=biases).squeeze(1)
