"""Activation patching, path patching and interchange interventions, built on ``run``.

- ``activation_patch``: copy chosen activations from one run into another. Denoising (the default)
  runs the corrupted batch with clean activations at the sites: does this site *suffice* to restore
  the clean answer? Noising runs the clean batch with corrupted activations: is it *necessary*?
- ``patch_sweep``: the same for one site at a time over hooks × positions, per example.
- ``path_patch``: the effect of a sender only through named receivers (Wang et al., 2022).
- ``interchange``: a site's activation from a source sequence into a base sequence, scored against
  the label the source implies (interchange-intervention accuracy, Geiger et al.).

TransformerLens' ``patching.generic_activation_patch`` does the sweep for models with a
``HookedTransformerConfig`` (it reads ``cfg.device`` and maps short names through ``get_act_name``);
this model's config has neither, and the sweep here also needs the firing guard and the nnsight
backend, so it loops over ``run`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from ..model.hooks import act_name
from .engine import Result, capture, execution_order, run
from .kinds import Patch, Replace
from .metrics import accuracy
from .site import InterventionError, Site, as_site
from .statistics import rate_ci

DIRECTIONS = ("denoise", "noise")


def _base_and_source(clean_tokens, corrupted_tokens, direction: str):
    if direction not in DIRECTIONS:
        raise InterventionError(f"direction must be one of {DIRECTIONS}, found {direction!r}")
    if clean_tokens.shape != corrupted_tokens.shape:
        raise InterventionError(
            f"clean tokens {list(clean_tokens.shape)} and corrupted tokens "
            f"{list(corrupted_tokens.shape)} must have the same shape (patching is per example)"
        )
    return (corrupted_tokens, clean_tokens) if direction == "denoise" else (clean_tokens, corrupted_tokens)


def activation_patch(
    model,
    clean_tokens: torch.Tensor,
    corrupted_tokens: torch.Tensor,
    sites: Sequence[Site | str],
    direction: str = "denoise",
    backend: str = "tl",
) -> Result:
    """One forward pass with every site patched at once, example by example (``direction``: see the module
    docstring)."""
    base, source = _base_and_source(clean_tokens, corrupted_tokens, direction)
    return run(model, base, [Patch(as_site(s), source) for s in sites], backend=backend)


def patch_sweep(
    model,
    clean_tokens: torch.Tensor,
    corrupted_tokens: torch.Tensor,
    hooks: Sequence[str],
    positions: Sequence,
    metric: Callable[[torch.Tensor], torch.Tensor],
    direction: str = "denoise",
    backend: str = "tl",
) -> torch.Tensor:
    """Per-example metric of patching one (hook, positions) cell at a time: tensor [len(hooks), len(positions), B].

    ``positions``: a list of position sets (each an int, a list, a LongTensor [B] / [B, k] or a bool
    mask; see ``Site``). ``metric(logits (B, T, V)) -> [B]``, e.g.
    ``lambda logits: logit_diff(logits, clean_labels, corrupted_labels)``. The source activations of
    all hooks come from one clean forward; each cell then costs one forward pass.
    """
    base, source = _base_and_source(clean_tokens, corrupted_tokens, direction)
    hooks = list(hooks)
    source_acts = capture(model, source, hooks, backend=backend)
    out = torch.empty(len(hooks), len(positions), base.shape[0])
    for i, hook in enumerate(hooks):
        for j, pos in enumerate(positions):
            copy_source = Replace(Site(hook, pos), lambda act, h, src=source_acts[hook]: src.to(act.dtype))
            values = torch.as_tensor(metric(run(model, base, [copy_source], backend=backend).logits))
            if values.shape != (base.shape[0],):
                raise InterventionError(
                    f"patch_sweep: metric must return one value per example [{base.shape[0]}], "
                    f"returned shape {list(values.shape)}"
                )
            out[i, j] = values.detach().float().cpu()
    return out


def _component(hook: str) -> str | None:
    """The component output hook a hook belongs to: blocks.l.attn.* -> blocks.l.hook_attn_out, etc."""
    parts = hook.split(".")
    if len(parts) >= 3 and parts[0] == "blocks":
        for kind in ("attn", "mlp"):
            if parts[2] in (kind, f"hook_{kind}_out"):
                return act_name(f"{kind}_out", parts[1])
    return None


def path_patch(
    model,
    base_tokens: torch.Tensor,
    source_tokens: torch.Tensor,
    sender: Site | str,
    receivers: Sequence[Site | str],
    backend: str = "tl",
    freeze: Sequence[str] | None = None,
) -> Result:
    """The effect of ``sender`` on the output only through the ``receivers`` (path patching).

    1. Run ``base_tokens`` with the sender's cells patched from ``source_tokens`` and every other
       component output (``blocks.l.hook_attn_out``, ``blocks.l.hook_mlp_out``) frozen at its base value,
       and record the receivers' activations: they now differ from base only through paths from the
       sender that pass through no other component.
    2. Run ``base_tokens`` again with only the receivers set to those values (at their positions).
    E.g. sender ``Site("blocks.0.hook_attn_out", value_positions)`` and receivers
    ``["blocks.1.attn.hook_k"]``: Layer 1's effect through Layer-2 keys only, not queries or values.
    ``freeze`` overrides the frozen hooks. Returns the result of run 2.
    """
    sender = as_site(sender)
    receivers = [as_site(r) for r in receivers]
    if not receivers:
        raise InterventionError("path_patch: name at least one receiver hook")
    receiver_hooks = [r.hook for r in receivers]
    if sender.hook in receiver_hooks:
        raise InterventionError(f"path_patch: the sender {sender.hook!r} cannot also be a receiver")
    if freeze is None:
        own = {_component(sender.hook), sender.hook}
        freeze = [h for h in model.hook_dict if _component(h) == h and h not in own and h not in receiver_hooks]
    order = execution_order(model)
    sender_at = order.index(sender.hook)
    for r in receiver_hooks:
        if r in order and order.index(r) < sender_at:
            raise InterventionError(f"path_patch: receiver {r!r} runs before the sender {sender.hook!r}")

    first = [Patch(sender, source_tokens)] + [Patch(Site(h), base_tokens) for h in freeze]
    recorded = run(model, base_tokens, first, backend=backend, read=receiver_hooks).activations
    second = [Replace(r, lambda act, hook: recorded[hook.name].to(act.dtype)) for r in receivers]
    return run(model, base_tokens, second, backend=backend)


@dataclass
class InterchangeResult:
    """Interchange-intervention accuracy: ``accuracy`` with its Clopper-Pearson ``low``/``high``,
    per-example ``correct`` [B] (argmax == counterfactual label) and the intervened ``logits``."""

    accuracy: float
    low: float
    high: float
    correct: torch.Tensor
    logits: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.correct.numel())


def interchange(
    model,
    base_tokens: torch.Tensor,
    source_tokens: torch.Tensor,
    sites: Sequence[Site | str],
    counterfactual_labels: torch.Tensor,
    source_positions: Sequence | None = None,
    backend: str = "tl",
) -> InterchangeResult:
    """Interchange intervention: each site's cells in the base run take the source run's values (example
    b reads source b); scored against ``counterfactual_labels``, the answer a model that uses the
    sites as hypothesised must then give. ``source_positions`` (one per site, or None) reads the
    source at other positions than the base is written at (see ``Patch``)."""
    sites = [as_site(s) for s in sites]
    if source_positions is None:
        source_positions = [None] * len(sites)
    if len(source_positions) != len(sites):
        raise InterventionError(f"interchange: {len(sites)} sites but {len(source_positions)} source_positions")
    patches = [Patch(s, source_tokens, p) for s, p in zip(sites, source_positions)]
    result = run(model, base_tokens, patches, backend=backend)
    correct = accuracy(result.logits, counterfactual_labels)
    rate, low, high = rate_ci(correct)
    return InterchangeResult(accuracy=rate, low=low, high=high, correct=correct, logits=result.logits)
