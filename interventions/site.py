"""Where an intervention acts: a hook point (SPEC §2.3), optionally restricted to positions.

A ``Site`` names one hook and which cells of its activation an intervention may change. Positions
index the sequence axis: axis 1 of every ``(B, T, ...)`` activation, and the *query* axis (axis 2) of
``hook_pattern`` / ``hook_attn_scores`` ``(B, H, T_q, T_k)``, where ``keys`` further restricts the
key axis. Causally masked cells (key after query) are never selected, so no edit can open attention
to the future.

A position set may be given as
    None                    every position
    int                     one position for every sequence (negative counts from the end)
    list / tuple of ints    several positions for every sequence
    LongTensor [B]          one position per sequence (e.g. ``operand_sources(tokens)[:, 0]``)
    LongTensor [B, k]       k positions per sequence (e.g. ``operand_sources(tokens)``)
    BoolTensor [B, T]       a mask (e.g. ``value_positions(tokens)``); a BoolTensor [T] is shared
    callable                tokens [B, T] -> any form above, evaluated on each batch as it runs
                            (e.g. ``value_positions`` itself): for ``knockout`` models, which
                            see batches the Site was not built for
Per-sequence tensors must hold non-negative positions: ``operand_sources`` marks a missing variable
with -1, and silently reading that as "the last position" would patch the wrong cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


class InterventionError(RuntimeError):
    """An intervention that cannot act as asked: a wrong hook name, a hook that did not fire the
    expected number of times, a position set that selects nothing or does not fit the batch."""


ATTENTION_MAP_HOOKS = ("hook_pattern", "hook_attn_scores")


def position_mask(positions: Any, batch: int, seq: int, device=None, *, what: str = "positions") -> torch.Tensor:
    """The bool mask [B, T] a position set selects (forms in the module docstring)."""
    if positions is None:
        return torch.ones(batch, seq, dtype=torch.bool, device=device)
    if isinstance(positions, bool) or (
        isinstance(positions, (list, tuple)) and any(isinstance(c, bool) for c in positions)
    ):
        raise InterventionError(
            f"{what}: booleans in a position list would be read as positions 0 and 1; "
            "give a mask as a bool tensor, e.g. torch.tensor([False] * 15 + [True])"
        )
    if isinstance(positions, (int, list, tuple)):
        cols = [positions] if isinstance(positions, int) else list(positions)
        mask = torch.zeros(batch, seq, dtype=torch.bool, device=device)
        for c in cols:
            if not -seq <= int(c) < seq:
                raise InterventionError(f"{what}: position {c} is outside a sequence of length {seq}")
            mask[:, int(c)] = True
        return mask
    if not isinstance(positions, torch.Tensor):
        raise InterventionError(
            f"{what}: expected None, an int, a list of ints or a tensor, found {type(positions).__name__}"
        )
    positions = positions.to(device)
    if positions.dtype == torch.bool:
        if positions.shape == (seq,):
            return positions.unsqueeze(0).expand(batch, seq)
        if positions.shape != (batch, seq):
            raise InterventionError(
                f"{what}: a bool mask must be [B, T] = [{batch}, {seq}], found {list(positions.shape)}"
            )
        return positions
    if positions.dtype == torch.uint8:
        raise InterventionError(
            f"{what}: a uint8 tensor is ambiguous (a mask or positions?): give a mask as a bool "
            "tensor and positions as a long tensor"
        )
    if positions.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8):
        raise InterventionError(f"{what}: expected an integer or bool tensor, found dtype {positions.dtype}")
    if positions.shape[-1:] == (seq,) and positions.numel() > 0 and bool(((positions == 0) | (positions == 1)).all()):
        raise InterventionError(
            f"{what}: an integer tensor of 0s and 1s over all {seq} positions looks like a mask "
            "but would be read as positions 0 and 1; give a mask as a bool tensor"
        )
    per_seq = positions.long()
    if per_seq.dim() == 1:
        per_seq = per_seq.unsqueeze(1)  # (B,) -> (B, 1)
    if per_seq.dim() != 2 or per_seq.shape[0] != batch:
        raise InterventionError(
            f"{what}: a per-sequence position tensor must be [B] or [B, k] with B = {batch}, found {list(positions.shape)}"
        )
    if (per_seq < 0).any() or (per_seq >= seq).any():
        bad = per_seq[(per_seq < 0) | (per_seq >= seq)][0].item()
        raise InterventionError(
            f"{what}: per-sequence positions must lie in 0..{seq - 1}, found {bad} "
            "(operand_sources gives -1 for a variable with no assignment)"
        )
    mask = torch.zeros(batch, seq, dtype=torch.bool, device=device)
    mask.scatter_(1, per_seq, True)
    return mask


@dataclass(frozen=True, eq=False)
class Site:
    """A hook point and the cells of its activation an intervention may change.

    ``hook``: a hook name of SPEC §2.3 (``blocks.0.hook_attn_out``, ``blocks.1.attn.hook_pattern``, ...).
    ``positions``: the sequence positions (query positions for attention maps); None = all.
    ``keys``: for ``hook_pattern`` / ``hook_attn_scores`` only, the key positions; None = all.
    """

    hook: str
    positions: Any = None
    keys: Any = None

    def __post_init__(self):
        if not isinstance(self.hook, str):
            raise InterventionError(f"Site.hook must be a hook name (str), found {type(self.hook).__name__}")
        if self.keys is not None and not self.attention_map:
            raise InterventionError(
                f"Site {self.hook!r}: keys= only applies to {' / '.join(ATTENTION_MAP_HOOKS)}, which have a key axis"
            )

    @property
    def attention_map(self) -> bool:
        """True for hooks shaped (B, H, T_q, T_k), whose positions index queries and ``keys`` keys."""
        return self.hook.rsplit(".", 1)[-1] in ATTENTION_MAP_HOOKS

    def resolve(self, spec, tokens: torch.Tensor | None):
        """A position set, with a callable one evaluated on this batch's tokens."""
        if not callable(spec):
            return spec
        if tokens is None:
            raise InterventionError(f"Site {self.hook!r}: callable positions need the batch's tokens")
        return spec(tokens)

    def mask(
        self, activation: torch.Tensor, tokens: torch.Tensor | None = None, *, allow_empty: bool = False
    ) -> torch.Tensor:
        """A bool mask that broadcasts against ``activation`` and marks the cells this site selects (for an
        attention map, the query and key selections with the causal mask). ``tokens``: the batch, for
        callable position sets. Raises InterventionError if nothing at all is selected (an edit there
        would be a silent no-op), unless ``allow_empty``."""
        B, T, device = activation.shape[0], activation.shape[2 if self.attention_map else 1], activation.device
        mask = position_mask(self.resolve(self.positions, tokens), B, T, device, what=f"Site {self.hook!r} positions")
        if self.attention_map:
            Tk = activation.shape[3]
            keys = position_mask(self.resolve(self.keys, tokens), B, Tk, device, what=f"Site {self.hook!r} keys")
            causal = torch.ones(T, Tk, dtype=torch.bool, device=device).tril()
            mask = (mask[:, :, None] & keys[:, None, :] & causal).unsqueeze(1)  # (B, 1, T_q, T_k)
        else:
            mask = mask.reshape(B, T, *([1] * (activation.dim() - 2)))  # (B, T, 1, ...)
        if not allow_empty and not mask.any():
            raise InterventionError(
                f"Site {self.hook!r} selects no cell of this batch (positions={self._short(self.positions)}"
                f"{', keys=' + self._short(self.keys) if self.attention_map else ''}): "
                "the intervention would change nothing"
            )
        return mask

    @staticmethod
    def _short(spec) -> str:
        if isinstance(spec, torch.Tensor):
            return f"{spec.dtype} tensor {list(spec.shape)}"
        if callable(spec):
            return getattr(spec, "__name__", "callable")
        return repr(spec)

    def __repr__(self) -> str:
        extra = "" if self.positions is None else f", positions={self._short(self.positions)}"
        extra += "" if self.keys is None else f", keys={self._short(self.keys)}"
        return f"Site({self.hook!r}{extra})"


def as_site(site: "Site | str") -> Site:
    """A Site from a Site or a bare hook name (all positions)."""
    return site if isinstance(site, Site) else Site(site)
