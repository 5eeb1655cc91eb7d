"""From a checkpoint file to claim results: the shared start of ``assignadd-verify``, the pytest plugin
and ``assignadd-mutants`` (loading, the task a checkpoint was trained on, seeding), and the claim runner
that spreads independent claims over worker processes.

Every claim starts from the same RNG state (``seed_everything``) and reads only the context's pools,
which are fixed by its seed, so a claim's result does not depend on which claims ran before it, in
which process, or in which order: a ``ClaimRunner`` gives the same results for any ``jobs``.
"""

from __future__ import annotations

import sys
import time
import warnings

TASK_FLAGS = {"f": "--f", "r": "--r", "seed": "--split-seed"}


def task_for(meta: dict, model_cfg, path, given: dict | None = None) -> tuple[object, str]:
    """The task a checkpoint was trained on, and where it came from: our format's ``task`` metadata
    (``"checkpoint"``); else ``given`` (``{"f", "r", "seed"}``, any of them, from the command line:
    ``"command line"``); else the paper's default (``"default"``). Without metadata, the modulus and
    variable count are read off the shapes. Raises ``ValueError`` when none fits, or when ``given``
    contradicts the metadata."""
    from ..data import Task, TaskConfig

    given = {k: v for k, v in (given or {}).items() if v is not None}
    task_meta = meta.get("task")
    if task_meta:
        try:
            cfg = TaskConfig.from_dict(task_meta)
            task = Task(**cfg.to_dict())
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"{path}: bad task metadata ({e})") from None
        clash = [k for k, v in given.items() if getattr(cfg, k) != v]
        if clash:
            k = clash[0]
            raise ValueError(
                f"{path}: the checkpoint records its task ({k} = {getattr(cfg, k)}); "
                f"{TASK_FLAGS[k]} {given[k]} contradicts it"
            )
        return task, "checkpoint"
    try:
        task = Task(**given, modulus=model_cfg.d_vocab_out, n_vars=model_cfg.n_vars)
    except ValueError as e:
        what = "the task given on the command line" if given else "the paper's default task"
        raise ValueError(f"{path}: no task metadata, and {what} does not fit the model ({e})") from None
    return task, ("command line" if given else "default")


def load_context(path, *, seed: int, n: int, device: str, task: dict | None = None, components=None):
    """Checkpoint -> (Context, metadata, task source). Raises ``CheckpointError`` or ``ValueError``
    with one line naming the file. ``task``: the task's ``f``, ``r``, ``seed`` for a checkpoint that
    does not record them. ``components`` (``model.components.Components``): where the components sit,
    given rather than searched; checked against the model here."""
    from ..model import load_checkpoint_full
    from .base import Context

    model, meta = load_checkpoint_full(path, device=device)
    task, task_source = task_for(meta, model.cfg, path, task)
    try:
        ctx = Context(model, task, seed=seed, n=n, device=device, components=components)
        if components is not None:
            from .locate import check

            check(components, model.cfg)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return ctx, meta, task_source


def seed_everything(seed: int) -> None:
    """Each claim starts from the same RNG state, so its result does not depend on which claims ran before."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_one(ctx, cid: str) -> tuple[object, float]:
    """One claim from a fresh RNG state: (its ``ClaimResult``, seconds)."""
    from . import run_all

    seed_everything(ctx.seed)
    t0 = time.perf_counter()
    result = run_all(ctx, [cid])[0]
    return result, time.perf_counter() - t0


def parallel_ok(ctx) -> str | None:
    """Why claims cannot run in worker processes here (None: they can). Workers are forked, so they
    share the loaded model, the pools and the registry as they are (no re-import, nothing pickled but a
    claim id and its result); that needs Linux's fork, and a model on the CPU (a forked child cannot
    use its parent's CUDA context)."""
    import multiprocessing as mp

    if not sys.platform.startswith("linux") or "fork" not in mp.get_all_start_methods():
        return "worker processes need fork (Linux)"
    if str(ctx.device) != "cpu":
        return "worker processes run on the CPU only"
    return None


def resolve_jobs(jobs: int | None, ctx, n_claims: int) -> int:
    """``jobs`` None: one process per usable core, at most one per claim; 1 where workers cannot run."""
    if jobs is None:
        from ..training.threads import usable_cores

        jobs = usable_cores()
    return 1 if parallel_ok(ctx) is not None else max(1, min(jobs, n_claims))


_WORKER_CTX = None  # the context a forked worker inherited


def _worker_init(threads: int) -> None:
    import torch

    # One torch thread per worker: the workers are the parallelism. (A forked child must not use its
    # parent's OpenMP pool either: with one thread it never does.)
    torch.set_num_threads(threads)


def _worker_run(cid: str) -> tuple[str, dict, float]:
    return (cid, *run_one(_WORKER_CTX, cid))


class ClaimRunner:
    """Runs the claims ``ids`` on ``ctx``; iterate it for ``(claim, ClaimResult, seconds)`` as
    each claim finishes. ``jobs`` > 1: that many forked worker processes, one torch thread each, taking
    the claims longest first; the results are the same as with ``jobs=1`` (see the module docstring).

    ``start()`` forks the workers and hands them the claims. Call it before starting any thread of your
    own (a fork copies only the calling thread: a lock another thread held would stay held in the
    child); iterating starts them if ``start()`` was not called.
    """

    def __init__(self, ctx, ids: list[str], *, jobs: int = 1):
        self.ctx, self.ids, self.jobs = ctx, list(ids), max(1, min(jobs, len(ids)))
        self._pool = self._futures = None

    def start(self) -> "ClaimRunner":
        global _WORKER_CTX
        if self.jobs > 1 and self._pool is None:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            from .base import REGISTRY

            _WORKER_CTX = self.ctx  # inherited by the workers when they are forked, at the first submit
            try:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.jobs, mp_context=mp.get_context("fork"), initializer=_worker_init, initargs=(1,)
                )
                # longest first (each claim's declared ``cost``), so that no worker is left with a long claim
                # at the end; only the order in which workers take claims depends on it, no result
                order = sorted(self.ids, key=lambda c: -REGISTRY[c].cost if c in REGISTRY else -1.0)
                with warnings.catch_warnings():
                    # Python >= 3.12 warns on any fork of a process with threads; torch's own (OpenMP)
                    # threads are why, and a worker never uses them: it runs with one thread.
                    warnings.filterwarnings(
                        "ignore", message=".*use of fork\\(\\) may lead to deadlocks", category=DeprecationWarning
                    )
                    self._futures = [self._pool.submit(_worker_run, cid) for cid in order]
            finally:
                _WORKER_CTX = None
        return self

    def __iter__(self):
        if self.jobs <= 1:
            for cid in self.ids:
                yield (cid, *run_one(self.ctx, cid))
            return
        from concurrent.futures import as_completed

        self.start()
        try:
            for fut in as_completed(self._futures):
                yield fut.result()
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def run_claims(ctx, ids: list[str], *, jobs: int | None = None, interfaces: bool = True, on_start=None, on_result=None,
               timings: dict | None = None) -> tuple[list, list | None]:  # fmt: skip
    """The claims ``ids`` on ``ctx`` side by side (a ``ClaimRunner`` with ``resolve_jobs(jobs)`` workers),
    and the interface checks naming them (``interfaces.check_all``) in this process meanwhile: they read the
    model and the pools only, like a claim. Returns (the ClaimResults in the order of ``ids``, the checks
    or None when ``interfaces`` is False). The one way claims are run on a model: ``reports.verify.verify``
    (a checkpoint's report) and ``mutation.mutation_matrix`` (each mutant's cells) call it.

    on_start   called once the workers are forked (a thread may start from then on: e.g. figures)
    on_result  ``on_result(i, claim, ClaimResult, seconds)`` as each claim finishes (any order)
    timings    a dictionary to record in: ``jobs``, ``interfaces_seconds``, ``claims`` ({claim: seconds})
    """
    import torch

    from . import interfaces as interface_checks

    timings = {} if timings is None else timings
    # forked first, before this process starts a thread
    runner = ClaimRunner(ctx, ids, jobs=resolve_jobs(jobs, ctx, len(ids))).start()
    timings["jobs"], threads = runner.jobs, torch.get_num_threads()
    if runner.jobs > 1:  # the workers have the cores: this process's checks take one thread, not a pool that spins
        torch.set_num_threads(1)
    try:
        if on_start is not None:
            on_start()
        t0 = time.perf_counter()
        checks = interface_checks.check_all(ctx, claims=ids) if interfaces else None
        timings["interfaces_seconds"] = time.perf_counter() - t0
        by_id, seconds_of = {}, {}
        for i, (cid, result, seconds) in enumerate(runner, 1):
            by_id[cid], seconds_of[cid] = result, seconds
            if on_result is not None:
                on_result(i, cid, result, seconds)
    finally:
        runner.close()
        torch.set_num_threads(threads)
    timings["claims"] = {c: seconds_of[c] for c in ids}
    return [by_id[c] for c in ids], checks
