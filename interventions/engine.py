"""Running a model under interventions, through TransformerLens hooks or nnsight, with a guard.

``run(model, tokens, interventions)`` does one forward pass in which every intervention edits its hook's activation, and
returns the logits with the number of times each intervened hook fired. Every intervened hook must fire exactly once per
forward pass; if one did not (a wrong name, a hook the forward bypasses such as Layer 1's absent MLP, a fast path that
runs no hooks), the run raises InterventionError instead of returning logits that were never intervened on.

The two backends do the same thing by different means: "tl" adds temporary TransformerLens hook
functions (``run_with_hooks``); "nnsight" writes the edited value through an ``nnsight.NNsight``
trace. Reference activations (means, resample pools, patch sources) are read by the same backend
from clean forwards, so the two agree to the last bit on the same intervention (tested); with
``last_only=True`` to float rounding (the "tl" backend then computes what no hook reads of the last block at the last
position alone, another summation order). ``knockout`` installs interventions as permanent hooks on a copy of the model.
"""

from __future__ import annotations

import copy
import difflib
import weakref
from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import torch

from ..fileio import sha256_bytes
from .kinds import Edit, Intervention
from .site import InterventionError, Site

BACKENDS = ("tl", "nnsight")


@dataclass
class Result:
    """One intervened forward pass: ``logits`` (B, T, V), or (B, 1, V) from ``run(..., last_only=True)``,
    and ``hook_calls`` {intervened hook name: times it fired} (always 1 in a returned Result: anything
    else raised)."""

    logits: torch.Tensor
    hook_calls: dict[str, int]
    activations: dict[str, torch.Tensor] = field(default_factory=dict)  # the hooks asked for with ``read``
    # {intervened hook: largest absolute change its edits made}: 0.0 means the intervention did nothing
    # (e.g. Zero on an activation that is always zero): the guard proves a hook fired, this that it acted.
    changed: dict[str, float] = field(default_factory=dict)

    @property
    def last_logits(self) -> torch.Tensor:
        """Logits at the last position, where the answer is read: (B, V)."""
        return self.logits[:, -1]


# ----- hook names and their execution order ---------------------------------------------------------
def check_hook_names(model, interventions) -> None:
    """Raise InterventionError naming every intervention whose hook the model does not have."""
    for iv in interventions:
        if not isinstance(iv, Intervention):
            raise InterventionError(
                f"expected Intervention objects (Zero, Mean, Resample, Replace, Patch, Project), "
                f"found {type(iv).__name__}"
            )
        if iv.site.hook not in model.hook_dict:
            close = difflib.get_close_matches(iv.site.hook, list(model.hook_dict), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InterventionError(f"{iv!r}: the model has no hook named {iv.site.hook!r}{hint}")


@contextmanager
def _counting(model, names):
    """Count the calls of the named hook points (plain torch forward hooks, so any backend counts).
    The counter holds the hooks in the order they first fired."""
    counts: Counter = Counter()
    handles = [model.hook_dict[n].register_forward_hook(lambda m, i, o, n=n: counts.update([n])) for n in set(names)]
    try:
        yield counts
    finally:
        for h in handles:
            h.remove()


_ORDER: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def execution_order(model) -> list[str]:
    """Hook names in the order a forward pass fires them (nnsight must be addressed in that order).
    Hooks that never fire come last. Found once per model by a one-sequence dry run of a hook-free
    copy (a knock-out's permanent hooks may only fit batches of their own size)."""
    if model not in _ORDER:
        probe = copy.deepcopy(model)
        probe.reset_hooks(including_permanent=True)
        with torch.no_grad(), _counting(probe, probe.hook_dict) as fired:
            probe(torch.zeros(1, probe.cfg.n_ctx, dtype=torch.long, device=next(probe.parameters()).device))
        _ORDER[model] = list(fired)
    return _ORDER[model] + [n for n in model.hook_dict if n not in _ORDER[model]]


def firing_hooks(model) -> list[str]:
    """The hooks a forward pass of ``model`` fires, in order."""
    execution_order(model)
    return list(_ORDER[model])


def _check_fired(counts: Counter, names, expected: int, what: str) -> None:
    bypassed = " (the forward bypasses it: e.g. Layer 1 has no MLP, or a fast path such as last_logits runs no hooks)"
    for name in names:
        if counts[name] != expected:
            raise InterventionError(
                f"{what}: hook {name!r} fired {counts[name]} time(s) where {expected} were "
                f"expected{bypassed if counts[name] == 0 else ''}; its intervention did not act as asked"
            )


def _known_hooks(model, hooks, what: str) -> list[str]:
    """``hooks`` (a name or several) once each, in order; raises InterventionError naming any the model lacks."""
    hooks = list(dict.fromkeys([hooks] if isinstance(hooks, str) else hooks))
    unknown = [h for h in hooks if h not in model.hook_dict]
    if unknown:
        raise InterventionError(f"{what}: the model has no hook named {', '.join(map(repr, unknown))}")
    return hooks


# ----- reference activations --------------------------------------------------------------------------
def _envoy(wrapped, hook: str):
    node = wrapped
    for part in hook.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


class _Captured(Exception):
    """Raised by the last capturing hook of ``capture``: nothing after it is needed."""


@torch.no_grad()
def capture(model, tokens: torch.Tensor, hooks, pos: int | None = None, backend: str = "tl") -> dict[str, torch.Tensor]:
    """The package's one activation reader: {hook: activation} from one clean forward of ``tokens``
    (no temporary interventions; a ``knockout`` copy's permanent hooks act on the way). With "tl" the
    forward stops as soon as the last of ``hooks`` has fired, so what follows (often the Layer-2 MLP over
    every position) is never computed; "nnsight" traces the same module and reads the same tensors.
    ``pos``: keep only that position, (B, ...) instead of (B, T, ...). Raises InterventionError for a
    hook the model does not have or one that did not fire once."""
    hooks = _known_hooks(model, hooks, "capture")
    if backend == "tl":
        parts = [_capture_tl(model, chunk, hooks, pos) for chunk in _clean_chunks(model, tokens)]
        out = parts[0] if len(parts) == 1 else {h: torch.cat([p[h] for p in parts]) for h in parts[0]}
    else:
        out = {
            h: (v if pos is None else v[:, pos])
            for h, v in run(model, tokens, backend=backend, read=hooks).activations.items()
        }
    missing = [h for h in hooks if h not in out]
    if missing:
        raise InterventionError(f"capture: hook(s) {', '.join(map(repr, missing))} did not fire on the forward pass")
    return out


def _capture_tl(model, tokens: torch.Tensor, hooks: list[str], pos: int | None) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}

    def keep(act, hook):
        if hook.name in out:
            raise InterventionError(f"capture: hook {hook.name!r} fired more than once in one forward")
        out[hook.name] = (act if pos is None else act[:, pos]).detach()
        if len(out) == len(hooks):
            raise _Captured

    with suppress(_Captured):
        model.run_with_hooks(tokens, fwd_hooks=[(h, keep) for h in hooks])
    return out


# Sequences per forward when a clean forward of an unhooked model is split (``_clean_chunks``). Every
# operation of the forward treats sequences independently, so the pieces give the same bits as one
# forward (tested); small pieces keep each layer's intermediates in the caches, where thousands of
# sequences at once stream through memory (bench/RESULTS.md: 512 against one piece, 1.12x of the claims'
# CPU; 128 against 512, 1.08x of `assignadd-verify`'s CPU, 2026-12-05).
CLEAN_CHUNK = 128


def _clean_chunks(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """``tokens`` in pieces of ``CLEAN_CHUNK`` sequences for a clean forward (``capture`` with "tl"; ``run``
    with "tl" and no intervention); whole when the model is in split-input mode or any hook point has a
    TransformerLens hook (``HookPoint.has_hooks``: a knock-out's permanent hooks, which may hold positions
    fixed to one batch size, or a caller's ``add_hook``)."""
    if len(tokens) <= CLEAN_CHUNK or any(getattr(m, "split_qkv_input", False) for m in model.modules()):
        return [tokens]
    if any(hp.has_hooks() for hp in model.hook_dict.values()):
        return [tokens]
    return list(tokens.split(CLEAN_CHUNK))


def _content_key(tokens: torch.Tensor) -> tuple:
    """Equal token tensors get one key, whichever object holds them (one clean forward serves both)."""
    t = tokens.detach().cpu().contiguous()
    return (tuple(t.shape), str(t.dtype), sha256_bytes(t.numpy().tobytes()))


def _bind_all(model, interventions, backend: str) -> dict[str, list[tuple[Site, Edit]]]:
    """Every intervention bound, grouped by hook in list order: {hook: [(site, edit), ...]}. One clean
    forward per distinct reference token batch (by content: two equal tensors share one forward)."""
    wanted: dict[tuple, tuple[torch.Tensor, set]] = {}
    for iv in interventions:
        for tokens, hook in iv.reference_requests():
            wanted.setdefault(_content_key(tokens), (tokens, set()))[1].add(hook)
    acts = {key: capture(model, tokens, hooks, backend=backend) for key, (tokens, hooks) in wanted.items()}

    def fetch(tokens, hook):
        return acts[_content_key(tokens)][hook]

    by_hook: dict[str, list] = {}
    for iv in interventions:
        by_hook.setdefault(iv.site.hook, []).append((iv.site, iv.bind(model, fetch)))
    return by_hook


def _hook_fn(edits: list[tuple[Site, Edit]], batch: dict, allow_empty: bool = False, changes: dict | None = None):
    """One hook function applying, in order, each edit to the cells its site selects.
    ``batch["tokens"]`` is the running batch, for callable position sets. ``changes``: filled with
    {hook: largest absolute change the edits made}, so a caller can see an edit that did nothing."""

    def hook_fn(act, hook):
        for site, edit in edits:
            mask = site.mask(act, batch.get("tokens"), allow_empty=allow_empty)
            # The edit gets a copy: a function that edits in place cannot reach cells outside its site.
            new = torch.where(mask, edit(act.clone(), hook), act)
            if changes is not None and new.numel():
                changes[hook.name] = max(changes.get(hook.name, 0.0), float((new - act).abs().max()))
            act = new
        return act

    return hook_fn


# ----- the two entry points ---------------------------------------------------------------------------
def run(
    model,
    tokens: torch.Tensor,
    interventions=(),
    backend: str = "tl",
    last_only: bool = False,
    read=(),
    stop_at_layer: int | None = None,
) -> Result:
    """One forward pass of ``tokens`` with every intervention applied; raises if any did not act.

    ``interventions``: Intervention objects (or one); several at one hook apply in list order, each to
    its own cells. Reference activations come from clean forwards of this model, one per distinct
    reference token tensor, each stopped after the last block it needs. No gradients are kept. The
    nnsight backend instruments the model's modules the way nnsight does (plain calls are unaffected).
    ``last_only=True``: the last position's logits, (B, 1, V); the "tl" backend computes only them (every
    hook still fires as in the full forward), nnsight runs the full forward and returns its last position.
    ``read``: hook names whose (post-edit) activations to return in ``Result.activations``,
    measured in the same forward: for claims measured where the next component reads, not at the answer.
    ``stop_at_layer`` ("tl" backend): run blocks 0..L-1 only; ``Result.logits`` is then the residual stream.
    """
    if backend not in BACKENDS:
        raise InterventionError(f"backend must be one of {BACKENDS}, found {backend!r}")
    interventions = [interventions] if isinstance(interventions, Intervention) else list(interventions)
    check_hook_names(model, interventions)
    by_hook = _bind_all(model, interventions, backend)
    read = _known_hooks(model, read, "run (read=)")
    if stop_at_layer is not None and backend != "tl":
        raise InterventionError("run: stop_at_layer= needs the 'tl' backend")
    chunks = _clean_chunks(model, tokens) if backend == "tl" and not by_hook else [tokens]
    return _joined([_run_once(model, chunk, by_hook, backend, last_only, read, stop_at_layer) for chunk in chunks])


def run_in_pieces(model, tokens: torch.Tensor, interventions_for, **kwargs) -> Result:
    """``run`` over consecutive pieces of ``tokens`` (``CLEAN_CHUNK`` sequences each), joined: for edits
    that treat every sequence on its own. ``interventions_for(rows)`` (``rows`` a slice of the batch)
    gives the interventions of one piece, built from that piece's rows of any per-sequence data (masks,
    keys, sources). Each piece's run has the guard of ``run``; ``hook_calls`` then counts the pieces
    that edited at each hook, and ``changed`` is the largest change over the pieces. The same bits as one ``run`` of the
    whole batch with the whole batch's edits, when those edits treat sequences independently (a
    ``Mean`` over the batch itself, or a ``Resample`` drawn per batch, does not: build those whole)."""
    rows = [slice(i, i + CLEAN_CHUNK) for i in range(0, len(tokens), CLEAN_CHUNK)] or [slice(0, 0)]
    return _joined([run(model, tokens[r], interventions_for(r), **kwargs) for r in rows])


def _joined(parts: list[Result]) -> Result:
    """The runs of consecutive pieces of one batch as one Result (a single run as it is)."""
    if len(parts) == 1:
        return parts[0]
    calls: Counter = Counter()
    changed: dict[str, float] = {}
    for p in parts:
        calls.update(p.hook_calls)
        for h, c in p.changed.items():
            changed[h] = max(changed.get(h, 0.0), c)
    return Result(
        logits=torch.cat([p.logits for p in parts]),
        hook_calls=dict(calls),
        activations={h: torch.cat([p.activations[h] for p in parts]) for h in parts[0].activations},
        changed=changed,
    )


def _run_once(model, tokens, by_hook, backend, last_only, read, stop_at_layer) -> Result:
    """The one forward of ``run``, under the guard."""
    order = execution_order(model)  # before counting starts: finding it runs a forward pass
    batch = {"tokens": tokens}
    seen: dict[str, torch.Tensor] = {}
    changes: dict[str, float] = {}
    with torch.no_grad(), _counting(model, list(by_hook) + read) as counts:
        if backend == "tl":
            kwargs = {"last_only": True} if last_only else {}
            if stop_at_layer is not None:
                kwargs = {"stop_at_layer": stop_at_layer}
            # Edits first, then reads: a read at an intervened hook sees the edited value.
            hooks = [(h, _hook_fn(e, batch, changes=changes)) for h, e in by_hook.items()]
            hooks += [(h, lambda act, hook: seen.__setitem__(hook.name, act.detach())) for h in read]
            logits = model.run_with_hooks(tokens, fwd_hooks=hooks, **kwargs)
        else:
            import nnsight

            wrapped = nnsight.NNsight(model)  # about a millisecond, so not cached: a cache would keep the model alive
            try:
                with wrapped.trace(tokens):
                    for hook in sorted({*by_hook, *read}, key=order.index):
                        envoy = _envoy(wrapped, hook)
                        if hook in by_hook:
                            edit = _hook_fn(by_hook[hook], batch, changes=changes)
                            envoy.output = edit(envoy.output, model.hook_dict[hook])
                        if hook in read:
                            seen[hook] = envoy.output.save()
                    saved = wrapped.output.save()
            except InterventionError:
                raise
            except Exception:  # nnsight's own error for a hook that never fired: say it our way
                _check_fired(counts, list(by_hook) + read, 1, "run (nnsight)")
                raise
            logits = saved[:, -1:] if last_only else saved
            seen = {h: act.detach() for h, act in seen.items()}
    _check_fired(counts, list(by_hook) + read, 1, f"run ({backend})")
    return Result(
        logits=logits.detach(),
        hook_calls={h: counts[h] for h in by_hook},
        activations=seen,
        changed={h: changes.get(h, 0.0) for h in by_hook},
    )


def knockout(model, interventions, probe_tokens: torch.Tensor | None = None):
    """A deep copy of ``model`` with ``interventions`` installed as permanent hooks; the original is
    untouched. For control models ("the mechanism ablated") that later code runs as usual.

    Only self-contained kinds (Zero, Mean, Resample, Replace, Project): Patch needs a source run per batch. Reference
    activations are read from the original model. Position sets fixed to one batch (tensors) only fit batches of that
    size; a callable position set (``Site(hook, value_positions)``) is evaluated on every batch the copy runs. A batch
    in which a site selects no cell passes through unchanged (a control model must run any batch). The copy is checked
    once on ``probe_tokens`` (default: a batch of token-0 sequences, as many as any per-sequence positions need): each
    intervened hook must fire once, else InterventionError. ``copy.knockout_interventions`` lists what was installed.
    """
    interventions = list(interventions)
    check_hook_names(model, interventions)
    for iv in interventions:
        if not iv.self_contained:
            raise InterventionError(
                f"knockout: {iv!r} is tied to one batch (a Patch's source run, a matched "
                "Resample's draws) and cannot be permanent; use run(..., [...]) per batch instead"
            )
    by_hook = _bind_all(model, interventions, "tl")
    ablated = copy.deepcopy(model)
    batch: dict = {}
    # The hooks see activations, not tokens: each batch is read at ``hook_tokens``, which fires first
    # in every forward whatever called it (``__call__``, ``run_with_hooks``, nnsight).
    if "hook_tokens" not in ablated.hook_dict:
        raise InterventionError(
            "knockout: the model has no hook_tokens hook point, so a knock-out could not see which batch it runs on"
        )

    def remember_tokens(tokens, hook):
        batch["tokens"] = tokens
        return tokens

    ablated.add_perma_hook("hook_tokens", remember_tokens)
    for hook, edits in by_hook.items():
        ablated.add_perma_hook(hook, _hook_fn(edits, batch, allow_empty=True))
    if probe_tokens is None:
        probe_tokens = torch.zeros(
            _probe_batch(interventions), model.cfg.n_ctx, dtype=torch.long, device=next(model.parameters()).device
        )
    with torch.no_grad(), _counting(ablated, list(by_hook)) as counts:
        ablated(probe_tokens)
    _check_fired(counts, by_hook, 1, "knockout")
    ablated.knockout_interventions = interventions
    return ablated


def _probe_batch(interventions) -> int:
    for iv in interventions:
        for spec in (iv.site.positions, iv.site.keys):
            if isinstance(spec, torch.Tensor) and (spec.dtype != torch.bool or spec.dim() == 2):
                return spec.shape[0]
        if getattr(iv, "match", None) is not None:
            return len(iv.indices)
    return 1
