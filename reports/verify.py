"""``verify``: a checkpoint to its report, as data. The one way a checkpoint becomes verdicts:
``assignadd-verify`` parses its flags, calls it and renders what it returns; the pytest plugin calls it
for the claims it collected.

    >>> from assignadd.reports.verify import verify
    >>> v = verify("checkpoints/reference.pt", n=500)
    >>> v.report["summary"]["passed"], v.report["claims"][0]["verdict"]
    (7, 'pass')

The checkpoint is loaded and its components located once; then ``hypotheses.session.run_claims``, as for
every mutant in ``assignadd-mutants``, runs the claims side by side in forked workers while this process
checks the interfaces (``hypotheses.interfaces``). The report is byte-identical for the same checkpoint,
seed and options; no verdict reads the timings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_N = 2000


@dataclass
class Verification:
    """What ``verify`` returns: the report (report.json's document), the run's timings (timings.json's,
    less the writing), the context the claims ran on (the model, task, pools and located components), and
    the figures when they were asked for (``figures()`` waits for the last of them)."""

    report: dict
    timings: dict
    ctx: object  # hypotheses.base.Context
    located: object  # hypotheses.locate.Located, or None when a role has no candidate
    results: list  # the ClaimResults, in registry order (report["claims"] holds them as dictionaries)
    checks: list | None  # the interface checks (hypotheses.interfaces.check_all), None when not asked for
    painter: object = None  # reports.figures.Painter, drawing while the claims ran

    def figures(self) -> list:
        """Every figure of the report, in report order (none unless ``verify(..., figures=True)``)."""
        if self.painter is None:
            return []
        t0 = time.perf_counter()
        try:
            return self.painter.figures([c["claim"] for c in self.report["claims"]])
        finally:
            self.timings["figures_wait_seconds"] = time.perf_counter() - t0  # what figures add after the claims


def not_run_here(only: list[str] | None) -> list[dict]:
    """The claims one checkpoint cannot decide (they declare what they ``needs``), each with what it needs
    and the command that runs it; none when ``only`` chose the claims."""
    from ..hypotheses.data_requirements import SWEEP_REGISTRY
    from ..hypotheses.learning_phases import SERIES_REGISTRY

    if only is not None:
        return []
    return [
        {"claim": cid, "spec": cls.spec, "statement": cls.statement, "needs": cls.needs[0], "command": cls.needs[1]}
        for registry in (SERIES_REGISTRY, SWEEP_REGISTRY)
        for cid, cls in registry.items()
    ]


def claim_ids(only: list[str] | None) -> list[str]:
    """The registered claims ``only`` names, in registry order (all of them for None). Raises ValueError
    (one line) for an id that is unknown or names a claim one checkpoint cannot decide."""
    from ..hypotheses import REGISTRY

    if only is not None:
        elsewhere = {c["claim"]: c for c in not_run_here(None)}
        for cid in only:
            if cid in elsewhere and cid not in REGISTRY:
                c = elsewhere[cid]
                raise ValueError(
                    f"--only {cid}: this claim needs {c['needs']}, not one checkpoint; run: {c['command']}"
                )
        unknown = [i for i in only if i not in REGISTRY]
        if unknown:
            raise ValueError(
                f"--only: unknown claim id(s) {', '.join(unknown)}; known: {', '.join(REGISTRY) or 'none'}"
            )
    return [i for i in REGISTRY if only is None or i in only]


def with_components(report: dict, located) -> dict:
    """The report with where the components were found (``components``, after ``only``) and, in each
    claim's entry, the components it read (``components``): for a model where that is news (not the
    paper's layout found as the only candidates)."""
    from ..hypotheses import REGISTRY
    from ..hypotheses.declaration import ROLES

    labels = located.components.labels()  # each role as people write it: {"previous_token_head": "0.1", ...}
    for c in report["claims"]:
        reads = REGISTRY[c["claim"]].reads if c["claim"] in REGISTRY else ROLES
        c["components"] = {role: labels[role] for role in reads}
    out = {}
    for key, value in report.items():
        out[key] = value
        if key == "only":
            out["components"] = located.to_dict()
    return out


def verify(
    checkpoint,
    *,
    only: list[str] | None = None,
    seed: int = 0,
    n: int = DEFAULT_N,
    device: str = "cpu",
    task: dict | None = None,
    components=None,
    jobs: int | None = None,
    shown_path: str | None = None,
    documents: dict | None = None,
    figures: bool = False,
    interfaces: bool = True,
    on_result: Callable | None = None,
) -> Verification:
    """Run the registered claims (``only`` those ids, in registry order) on the checkpoint file
    ``checkpoint`` and return its ``Verification``. Raises ValueError, one line naming the file, for a
    checkpoint that cannot be read or a task that does not fit it (``CheckpointError`` is one), for claim
    ids it does not know, and for a device this machine does not have.

    ``checkpoint`` may instead be a ``hypotheses.base.Context`` (a model in memory, its task, seed, pool
    size and, if pinned, its components): then ``seed``, ``n``, ``device``, ``task`` and ``components`` are
    the context's, and the report names the file ``shown_path`` or "(in memory)".

    seed, n, device  the pools' seed and size, where to run
    task             ``{"f", "r", "seed"}`` for a checkpoint that records no task (None: the paper's)
    components       ``model.components.Components`` to use instead of the search of SPEC §2.1
    jobs             worker processes (None: one per usable core, at most one per claim)
    shown_path       how the report names the file (default: as given)
    documents        {claim: the ``--claim-doc`` document it runs under}, reported instead of the code's
    figures          draw the report's figures while the claims run (``Verification.figures``)
    interfaces       check the interfaces between the claims' components (``hypotheses.interfaces``)
    on_result        ``on_result(i, claim, result, seconds)`` as each claim finishes (any order)
    """
    from ..hypotheses.base import Context
    from ..hypotheses.locate import LocateError
    from ..hypotheses.session import load_context, run_claims
    from . import render

    ids = claim_ids(only)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--device cuda: CUDA is not available on this machine")
    t0 = time.perf_counter()
    if isinstance(checkpoint, Context):
        path, ctx, meta, task_source = None, checkpoint, {"format": "in memory"}, "given"
    else:
        path = Path(checkpoint)
        ctx, meta, task_source = load_context(path, seed=seed, n=n, device=device, task=task, components=components)
    timings = {"schema": render.TIMINGS_SCHEMA, "load_seconds": time.perf_counter() - t0, "claims": {}}
    t_locate = time.perf_counter()
    try:  # once, before the workers fork (they inherit it)
        located = ctx.located
    except LocateError:  # a role has no candidate: each claim that needs it says so as an error
        located = None
    timings["locate_seconds"] = time.perf_counter() - t_locate

    t_claims, painter = time.perf_counter(), None

    def start_figures():  # after the workers are forked: the painter is a thread
        nonlocal painter
        if figures:
            from .figures import Painter

            painter = Painter()
            painter.start(ctx, located)

    def each(i, cid, result, seconds):
        if painter is not None or on_result is not None:
            as_dict = result.to_dict()
            if painter is not None:
                painter.claim(as_dict)
            if on_result is not None:
                on_result(i, cid, as_dict, seconds)

    try:
        results, checks = run_claims(
            ctx, ids, jobs=jobs, interfaces=interfaces, on_start=start_figures, on_result=each, timings=timings
        )
    except BaseException:
        if painter is not None:
            painter.close()
        raise
    timings["claims_wall_seconds"] = time.perf_counter() - t_claims

    shown = shown_path or ("(in memory)" if path is None else str(checkpoint))
    report = _report(path, shown, meta, task_source, ctx, located, results, checks, only, documents)
    return Verification(report, timings, ctx, located, results, checks, painter)


def _report(path, shown_path: str, meta: dict, task_source: str, ctx, located, results, checks, only, documents):
    """report.json's document for ``results`` (ClaimResults in registry order) and the interface ``checks``
    (``path`` None: a model in memory)."""
    from .. import __version__
    from ..fileio import sha256_file
    from . import render
    from .claim_document import claim_documents

    ids, n = [r.claim for r in results], ctx.n
    checkpoint_entry = {
        "path": shown_path,
        "sha256": sha256_file(path) if path is not None else None,
        "format": meta.get("format"),
        "step": meta.get("step"),
        "size_bytes": path.stat().st_size if path is not None else None,
    }
    if meta.get("step_source"):
        checkpoint_entry["step_source"] = meta["step_source"]
    report = render.build_report(
        checkpoint=checkpoint_entry,
        model_config=ctx.model.cfg.to_dict(),
        task=ctx.task.config.to_dict(),
        task_source=task_source,
        seed=ctx.seed,
        n=n,
        device=str(ctx.device),
        only=only,
        claims=[r.to_dict() for r in results],
        tool_version=__version__,
        not_run=not_run_here(only),
        interfaces=checks,
    )
    named = located is not None and located.reported  # not on the paper's layout found as such
    if named:
        report = with_components(report, located)
    # each claim run, as data: the document given with --claim-doc, else the registered claim's
    documents = documents or {}
    undocumented = [c for c in ids if c not in documents]
    at = located.components if named else None
    docs = {**claim_documents(undocumented, n=n, components=at), **documents}
    report["claim_documents"] = {c: docs[c] for c in ids}
    return report
