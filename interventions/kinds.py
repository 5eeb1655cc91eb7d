"""The kinds of intervention: what value replaces the activation at a Site, for one forward pass.

Zero, Mean, Resample (optionally conditional, as in causal scrubbing), Replace (any custom edit), Patch
and Project; each class states what the selected cells become. Cells outside the Site keep their value.
The kind is always an explicit object: nothing defaults to "mean" or "zero" behind the caller's back.

An intervention is a description; ``bind`` turns it into an edit function for one model, reading
the reference activations it needs through ``fetch(tokens, hook)`` (the engine runs and caches
those clean forwards). Kinds with no per-batch data (all but Patch, and Resample with ``match``
tied to one batch) can be installed permanently with ``knockout``.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..random_streams import torch_generator
from .site import InterventionError, Site, as_site

Edit = Callable[[torch.Tensor, object], torch.Tensor]  # (activation, hook) -> replacement, same shape
Fetch = Callable[[torch.Tensor, str], torch.Tensor]  # (tokens, hook name) -> clean activation


class Intervention:
    """Base class: an edit of the activation at ``site``, applied once per forward pass."""

    site: Site
    self_contained = True  # usable in a permanent knockout (needs no per-batch source run)
    reference_tokens: torch.Tensor | None = None  # the pool a kind that reads one (Mean, Resample) reads

    def reference_requests(self) -> list[tuple[torch.Tensor, str]]:
        """The (tokens, hook) clean activations ``bind`` will fetch."""
        return [] if self.reference_tokens is None else [(self.reference_tokens, self.site.hook)]

    def bind(self, model, fetch: Fetch) -> Edit:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.site!r})"


class Zero(Intervention):
    """Zero ablation: the selected cells become 0. The harshest ablation; it can push activations far
    off-distribution, so pair it with Mean or Resample before reading much into its effect."""

    def __init__(self, site: Site | str):
        self.site = as_site(site)

    def bind(self, model, fetch):
        return lambda act, hook: torch.zeros_like(act)


class Mean(Intervention):
    """Mean ablation: the selected cells become their mean over a reference pool.

    ``per_position=True``: mean over reference sequences at each position, mean[t] = E_n act[n, t]
    (each position keeps its own typical value). ``False``: one mean over sequences and positions
    (query positions for attention maps). Removes the information a site carries about the
    individual sequence while keeping its typical magnitude.
    """

    def __init__(self, site: Site | str, reference_tokens: torch.Tensor, per_position: bool = True):
        self.site = as_site(site)
        self.reference_tokens = reference_tokens
        self.per_position = per_position

    def bind(self, model, fetch):
        ref = fetch(self.reference_tokens, self.site.hook)
        position_axis = 2 if self.site.attention_map else 1
        dims = (0,) if self.per_position else (0, position_axis)
        if torch.isinf(ref).any():  # masked attention scores (-inf): average the finite cells only
            finite = torch.isfinite(ref)
            count = finite.sum(dim=dims, keepdim=True)
            total = torch.where(finite, ref, torch.zeros_like(ref)).sum(dim=dims, keepdim=True)
            mean = torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, -torch.inf))
        else:
            mean = ref.mean(dim=dims, keepdim=True)  # (1, T, ...) or (1, 1, ...)
        return lambda act, hook: mean.to(act.dtype).expand_as(act)

    def __repr__(self):
        return f"Mean({self.site!r}, reference of {len(self.reference_tokens)}, per_position={self.per_position})"


class Resample(Intervention):
    """Resample ablation: each base sequence's selected cells take the values of one reference
    sequence, drawn at random (seeded), at the same positions.

    ``match=(feature_of_base [B], feature_of_reference [N])``: draw only among reference sequences
    whose feature equals the base sequence's (causal scrubbing: a hypothesis that says the site
    carries only that feature predicts no change). A base sequence with no matching reference raises.
    Without ``match`` the draw depends only on (seed, batch size), so interventions sharing a seed
    read the same reference sequence for a given base sequence. The draws come from the streams
    ``(seed, "resample draws")`` and, with ``match``, ``(seed, "resample matches")``.
    """

    def __init__(
        self,
        site: Site | str,
        reference_tokens: torch.Tensor,
        seed: int = 0,
        match: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        self.site = as_site(site)
        self.reference_tokens = reference_tokens
        self.seed = seed
        self.match = match
        if match is not None:
            self.self_contained = False  # the draws belong to one base batch: no permanent knock-out
            base_f, ref_f = (torch.as_tensor(m) for m in match)
            if ref_f.shape[0] != reference_tokens.shape[0]:
                raise InterventionError(
                    f"Resample({self.site.hook!r}): match's reference feature has "
                    f"{ref_f.shape[0]} entries, reference_tokens {reference_tokens.shape[0]}"
                )
            self.indices = self._matched_indices(base_f, ref_f, seed)

    @staticmethod
    def _matched_indices(base_f: torch.Tensor, ref_f: torch.Tensor, seed: int) -> torch.Tensor:
        gen = torch_generator(seed, "resample matches")
        idx = torch.empty(base_f.shape[0], dtype=torch.long)
        for value in torch.unique(base_f):
            want = (base_f == value).nonzero().flatten()
            have = (ref_f == value).nonzero().flatten()
            if len(have) == 0:
                raise InterventionError(
                    f"Resample match: no reference sequence has feature value {value.item()} "
                    f"(needed by {len(want)} base sequence(s))"
                )
            idx[want] = have[torch.randint(len(have), (len(want),), generator=gen)]
        return idx

    def draw(self, batch: int) -> torch.Tensor:
        """Indices [B] into the reference pool: which reference sequence each base sequence reads."""
        if self.match is not None:
            if batch != len(self.indices):
                raise InterventionError(
                    f"Resample({self.site.hook!r}) was matched for a batch of {len(self.indices)}, "
                    f"run on a batch of {batch}"
                )
            return self.indices
        gen = torch_generator(self.seed, "resample draws")
        return torch.randint(len(self.reference_tokens), (batch,), generator=gen)

    def bind(self, model, fetch):
        ref = fetch(self.reference_tokens, self.site.hook)
        return lambda act, hook: ref[self.draw(act.shape[0]).to(ref.device)].to(act.dtype)

    def __repr__(self):
        how = "matched" if self.match is not None else "random"
        return f"Resample({self.site!r}, {how} from {len(self.reference_tokens)}, seed={self.seed})"


class Replace(Intervention):
    """A custom edit: the selected cells become ``fn(activation, hook)`` (same shape), for edits the
    other kinds do not cover (uniform attention, scaling a direction, a hand-built value)."""

    def __init__(self, site: Site | str, fn: Edit):
        self.site = as_site(site)
        self.fn = fn

    def bind(self, model, fetch):
        def edit(act, hook):
            new = self.fn(act, hook)
            if not isinstance(new, torch.Tensor) or new.shape != act.shape:
                found = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
                raise InterventionError(
                    f"Replace({self.site.hook!r}): fn must return a tensor of shape "
                    f"{tuple(act.shape)}, returned {found}"
                )
            return new

        return edit

    def __repr__(self):
        return f"Replace({self.site!r}, {getattr(self.fn, '__name__', 'fn')})"


class Patch(Intervention):
    """Activation patching: each base sequence's selected cells take the value they have in a clean run
    on ``source_tokens`` (same batch size; example b reads source b).

    ``source_positions`` (same per-sequence form as the site's positions: an int, a list, a LongTensor
    [B] or [B, k]) reads the source at other positions than it writes: base cell
    ``positions[b, j]`` takes source cell ``source_positions[b, j]``. That is the interchange
    intervention for sequences whose variables sit at different places.
    """

    self_contained = False

    def __init__(self, site: Site | str, source_tokens: torch.Tensor, source_positions=None):
        self.site = as_site(site)
        self.source_tokens = source_tokens
        self.source_positions = source_positions
        if source_positions is not None and (
            self.site.attention_map
            or not _is_per_sequence(self.site.positions)
            or not _is_per_sequence(source_positions)
        ):
            raise InterventionError(
                f"Patch({self.site.hook!r}): source_positions needs a (B, T, ...) hook and "
                "site positions given as an int, a list or a LongTensor [B] / [B, k]"
            )

    def reference_requests(self):
        return [(self.source_tokens, self.site.hook)]

    def bind(self, model, fetch):
        src = fetch(self.source_tokens, self.site.hook)

        def edit(act, hook):
            if src.shape != act.shape:
                raise InterventionError(
                    f"Patch({self.site.hook!r}): source activation {tuple(src.shape)} does not "
                    f"match the base activation {tuple(act.shape)} (same batch size needed)"
                )
            if self.source_positions is None:
                return src.to(act.dtype)
            B, T = act.shape[:2]
            to_pos, from_pos = _per_sequence(self.site.positions, B), _per_sequence(self.source_positions, B)
            if ((from_pos < -T) | (from_pos >= T)).any() or (
                isinstance(self.source_positions, torch.Tensor) and (from_pos < 0).any()
            ):
                raise InterventionError(
                    f"Patch({self.site.hook!r}): source_positions must lie in 0..{T - 1} "
                    f"(ints and lists may also count from the end, down to -{T}; "
                    "operand_sources gives -1 for a variable with no assignment)"
                )
            if to_pos.shape != from_pos.shape:
                raise InterventionError(
                    f"Patch({self.site.hook!r}): positions {list(to_pos.shape)} and "
                    f"source_positions {list(from_pos.shape)} must have the same shape"
                )
            rows = torch.arange(B, device=act.device)[:, None].expand_as(to_pos)
            new = act.clone()
            new[rows, to_pos.to(act.device) % T] = src[rows, from_pos.to(act.device) % T].to(act.dtype)
            return new

        return edit

    def __repr__(self):
        extra = "" if self.source_positions is None else ", source_positions=..."
        return f"Patch({self.site!r}, source of {len(self.source_tokens)}{extra})"


def _is_per_sequence(positions) -> bool:
    """An int, a list of ints or an integer tensor: the forms that name cells in order."""
    if isinstance(positions, torch.Tensor):
        return positions.dtype != torch.bool
    return isinstance(positions, (int, list, tuple)) and not isinstance(positions, bool)


def _per_sequence(positions, batch: int) -> torch.Tensor:
    """An int / list / LongTensor [B] / [B, k] position set as a LongTensor [B, k]."""
    if isinstance(positions, int):
        return torch.full((batch, 1), positions, dtype=torch.long)
    if isinstance(positions, (list, tuple)):
        return torch.tensor(positions, dtype=torch.long).unsqueeze(0).expand(batch, -1)
    p = torch.as_tensor(positions).long()
    return p.unsqueeze(1) if p.dim() == 1 else p


def orthonormal_rows(basis: torch.Tensor, *, what: str = "basis") -> torch.Tensor:
    """An orthonormal basis [k, d] of the row space of ``basis`` [k, d] (QR); raises if rank < k."""
    basis = torch.as_tensor(basis).detach().to(torch.float64)
    if basis.dim() == 1:
        basis = basis.unsqueeze(0)
    if basis.dim() != 2 or basis.shape[0] > basis.shape[1]:
        raise InterventionError(f"{what}: expected [k, d] rows with k <= d, found {list(basis.shape)}")
    q, r = torch.linalg.qr(basis.T)  # (d, k), (k, k)
    diag = r.diagonal().abs()
    if (diag < 1e-8 * max(1.0, float(diag.max()))).any():
        raise InterventionError(f"{what}: the {basis.shape[0]} rows are linearly dependent (rank < k)")
    return q.T


class Project(Intervention):
    """Projection on the last axis: keep only a subspace (``mode="keep"``: x -> x Q Qᵀ) or remove it
    (``mode="remove"``: x -> x - x Q Qᵀ), Q the orthonormalised rows of ``basis`` [k, d].

    E.g. keep the cos/sin directions of the key frequencies in the Layer-2 MLP input (restricted loss)
    or remove them (excluded loss); ``random_subspace`` gives the same-rank placebo.
    """

    def __init__(self, site: Site | str, basis: torch.Tensor, mode: str = "keep"):
        if mode not in ("keep", "remove"):
            raise InterventionError(f"Project mode must be 'keep' or 'remove', found {mode!r}")
        self.site = as_site(site)
        if self.site.hook.endswith("hook_attn_scores"):
            raise InterventionError(
                f"Project({self.site.hook!r}): scores hold -inf at masked keys, so a projection "
                "along the key axis gives NaN; project hook_q / hook_k or edit hook_pattern"
            )
        self.mode = mode
        self.basis = orthonormal_rows(basis, what=f"Project({self.site.hook!r}) basis")  # (k, d) float64

    def bind(self, model, fetch):
        def edit(act, hook):
            if act.shape[-1] != self.basis.shape[1]:
                raise InterventionError(
                    f"Project({self.site.hook!r}): basis has dimension {self.basis.shape[1]}, "
                    f"the activation's last axis {act.shape[-1]}"
                )
            q = self.basis.to(device=act.device, dtype=act.dtype)  # (k, d)
            kept = (act @ q.T) @ q
            return kept if self.mode == "keep" else act - kept

        return edit

    def __repr__(self):
        return f"Project({self.site!r}, rank {self.basis.shape[0]}, mode={self.mode!r})"


def random_subspace(
    d: int, k: int, seed: int, exclude: torch.Tensor | None = None, *, label: str = "random subspace"
) -> torch.Tensor:
    """A random k-dimensional subspace of R^d as orthonormal rows [k, d], drawn from the stream
    ``(seed, label)``: the placebo for a projection of the same rank. ``exclude`` [m, d]: the subspace
    is drawn orthogonal to these rows (e.g. a random set of directions disjoint from the key-frequency
    ones)."""
    gen = torch_generator(seed, label)
    m = torch.randn(d, k, generator=gen, dtype=torch.float64)
    if exclude is not None:
        e = orthonormal_rows(exclude, what="random_subspace exclude")  # (m, d)
        if k + e.shape[0] > d:
            raise InterventionError(f"random_subspace: cannot fit {k} directions beside {e.shape[0]} excluded in R^{d}")
        m = m - e.T @ (e @ m)
    return orthonormal_rows(m.T, what="random_subspace")
