"""Running a data-requirement sweep (SPEC §4.5): every unfinished point of a grid (``training/grid.py``)
trained into one sweep folder (``training/sweep_folder.py``).

Started again, a sweep skips the points that have a ``final.pt`` and resumes the others (``train``
resumes exactly); an existing folder with another grid is refused. Points run on a local pool of
single-thread processes, or as Ray tasks.

Precision: ``auto`` is decided once for the whole sweep (``resolve_sweep_precision``: measured on the
step the points will run, on the workers' threads; a restarted sweep keeps what
``sweep.json`` records), and every point trains in it. With Ray the measurement is the driver's: on a
cluster of other machines, give ``--precision`` explicitly.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from ..data import Task
from .grid import EarlyStop, SweepConfig, SweepError
from .precision import PrecisionChoice
from .sweep_folder import check_out_folder, last_logged_step, point_status, points_dir, read_grid_file, write_grid_file
from .train import TrainConfig, log_stderr, recorded_precision, train


def resolve_sweep_precision(out, cfg: SweepConfig, *, threads: int | None = None) -> PrecisionChoice:
    """One precision for every point: as given; for ``auto``, what an existing ``sweep.json`` records,
    else measured on the step the points will run (one point's ``train`` step on ``threads`` torch
    threads, as its worker will run)."""
    if cfg.precision != "auto":
        return PrecisionChoice.given(cfg.precision)
    if (Path(out) / "sweep.json").is_file():
        recorded = recorded_precision(read_grid_file(out).get("grid"))
        if recorded is not None:
            return PrecisionChoice.kept(
                recorded, f"auto, continued: sweep.json records {recorded}, chosen when the sweep started"
            )
    import torch

    from .precision import choose_precision
    from .train import step_probe

    first = cfg.points()[0]
    before = torch.get_num_threads()
    try:
        if threads:
            torch.set_num_threads(threads)
        return choose_precision(cfg.device, step_probe(cfg.train_config(first), Task(first.f, first.r, cfg.split_seed)))
    finally:
        torch.set_num_threads(before)


def open_sweep(
    out, cfg: SweepConfig, options: dict | None = None, *, threads: int | None = None
) -> tuple[Path, PrecisionChoice]:
    """Check the grid and the folder, decide the sweep's precision (``resolve_sweep_precision``, after
    the checks: a bad option is an error before a second of timing), then create the sweep folder or
    check that an existing one holds this grid, and write ``sweep.json``
    (``sweep_folder.write_grid_file``). Returns the folder and the decision."""
    cfg.validate()
    out = check_out_folder(out)
    precision = resolve_sweep_precision(out, cfg, threads=threads)
    return write_grid_file(out, replace(cfg, precision=precision.chosen), options, precision.to_dict()), precision


# ----- running points ---------------------------------------------------------------------------------
def train_point(point_dir: str, train_cfg: dict, param: str, patience: int, precision: dict | None = None) -> dict:
    """Train one grid point to its end (a top-level function: it runs in worker processes and Ray
    tasks). ``precision``: the sweep's ``PrecisionChoice`` as a dict, recorded in the point's run.json."""
    cfg = TrainConfig(**{**train_cfg, "betas": tuple(train_cfg["betas"])})
    stop = EarlyStop(param, patience, run_dir=point_dir) if patience else None
    t0 = time.time()
    choice = PrecisionChoice.from_dict(precision) if precision is not None else None
    train(point_dir, cfg, progress=False, early_stop=stop, precision=choice, log=None)
    return {"point": Path(point_dir).name, "step": last_logged_step(point_dir), "seconds": round(time.time() - t0, 1)}


class GridProgress:
    """One progress bar over the whole grid, read from the point folders every ``every`` seconds (the
    same for every backend: the folders are the only shared state). Units are training steps; the ETA
    assumes every unfinished point runs to ``steps``, so with early stopping it is an upper bound."""

    def __init__(self, out: Path, cfg: SweepConfig, running: int, enabled: bool = True, every: float = 2.0):
        self.out, self.cfg, self.running, self.enabled, self.every = out, cfg, running, enabled, every
        self.points = cfg.points()
        self._stop = threading.Event()
        self._thread = None
        self.bar = None

    def _counts(self) -> tuple[int, int]:
        steps, done = 0, 0
        for p in self.points:
            status, s = point_status(points_dir(self.out) / p.name)
            if status == "done":
                done += 1
                steps += self.cfg.steps
            else:
                steps += min(s, self.cfg.steps)
        return steps, done

    def __enter__(self):
        if not self.enabled:
            return self
        from tqdm.auto import tqdm

        steps, done = self._counts()
        self.bar = tqdm(
            total=len(self.points) * self.cfg.steps,
            initial=steps,
            unit="step",
            dynamic_ncols=True,
            desc=f"sweep {self.cfg.param}",
        )
        self._set_postfix(done)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _set_postfix(self, done: int) -> None:
        n = len(self.points)
        self.bar.set_postfix_str(f"points done {done}/{n}, running {min(self.running, n - done)}")

    def refresh(self) -> None:
        if self.bar is None:
            return
        steps, done = self._counts()
        self.bar.update(max(0, steps - self.bar.n))
        self._set_postfix(done)

    def note(self, message: str) -> None:
        if self.bar is not None:
            self.bar.write(message)

    def _loop(self):
        while not self._stop.wait(self.every):
            try:
                self.refresh()
            except OSError:  # a file being replaced as we read it: the next poll sees it
                pass

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.bar is not None:
            self.refresh()
            self.bar.close()


def run_sweep(
    out,
    cfg: SweepConfig,
    *,
    backend: str = "local",
    jobs: int = 1,
    ray_address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = log_stderr,
) -> list[dict]:
    """Train every unfinished point of the grid into ``out``; returns one summary per point.

    ``backend="local"``: ``jobs`` single-thread worker processes (``jobs=1``: in this process).
    ``backend="ray"``: one Ray task per point (``num_cpus=1``), on a local instance of ``jobs`` CPUs or
    on the cluster at ``ray_address``. ``log`` gets one line saying which precision the sweep trains in
    and why (default: standard error; None: silent).
    """
    if backend not in ("local", "ray"):
        raise SweepError(f"--backend must be local or ray, got {backend!r}")
    if jobs < 1:
        raise SweepError(f"--jobs must be at least 1, got {jobs}")
    if ray_address and backend != "ray":
        raise SweepError("--ray-address needs --backend ray")
    if backend == "ray":
        try:
            import ray
        except ImportError:
            ray = None
        if not hasattr(ray, "remote"):  # missing, or a stray 'ray' folder seen as a namespace package
            raise SweepError("--backend ray needs Ray: pip install 'assignadd[ray]'")
    options = {"backend": backend, "jobs": jobs, "ray_address": ray_address, "device": cfg.device}
    ray_started = _connect_ray(ray_address, jobs) if backend == "ray" else False  # before anything is written
    try:
        return _run_grid(out, cfg, options, backend, jobs, ray_address, progress, log)
    finally:
        if ray_started:
            import ray

            ray.shutdown()


def _connect_ray(address: str | None, jobs: int) -> bool:
    """Start a local Ray instance of ``jobs`` CPUs, or join the cluster at ``address``; True if this call
    started Ray (and so must shut it down). A cluster that cannot be reached is a SweepError."""
    import ray

    if ray.is_initialized():
        return False
    _check_reachable(address)
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as e:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SweepError(f"--backend ray: cannot start or reach {where}: {first}") from None
    return True


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A ``host:port`` address must accept a TCP connection within ``timeout`` seconds: Ray itself
    waits minutes for a cluster that is not there. (``auto`` and ``ray://`` addresses are left to Ray.)"""
    import socket

    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"--ray-address must be HOST:PORT, auto or ray://HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise SweepError(f"--ray-address {address}: no Ray cluster answers there ({e.strerror or e})") from None


def _run_grid(out, cfg, options, backend, jobs, ray_address, progress, log) -> list[dict]:
    threads = 1 if cfg.device == "cpu" and (jobs > 1 or backend == "ray") else None
    out, choice = open_sweep(out, cfg, options, threads=threads)
    cfg = replace(cfg, precision=choice.chosen)
    if log is not None:
        log(f"{out}: {choice.log_line()}")
    # Points record the measurement that decided (kept in sweep.json when a sweep is continued).
    precision = read_grid_file(out).get("precision") or choice.to_dict()
    todo, summary = [], []
    for p in cfg.points():
        status, step = point_status(points_dir(out) / p.name)
        if status == "done":
            summary.append({"point": p.name, "status": "skipped (finished)", "step": step})
        else:
            todo.append(p)
    with GridProgress(out, cfg, jobs, enabled=progress) as bar:

        def record(result: dict):
            reason = "early stop" if result["step"] < cfg.steps else "full length"
            bar.note(f"{result['point']}: finished at step {result['step']} ({reason}, {result['seconds']} s)")
            summary.append({"point": result["point"], "status": f"trained ({reason})", "step": result["step"]})

        # One argument tuple of ``train_point`` per unfinished point (absolute folders: Ray workers
        # may run elsewhere than the driver's working directory).
        args = [
            (
                str(points_dir(out).resolve() / p.name),
                asdict(cfg.train_config(p, threads)),
                cfg.param,
                cfg.early_stop,
                precision,
            )
            for p in todo
        ]
        if backend == "ray":
            _run_ray(args, record)
        elif jobs == 1:
            for a in args:
                record(train_point(*a))
        elif args:
            _run_processes(args, jobs, record)
    order = {p.name: i for i, p in enumerate(cfg.points())}
    return sorted(summary, key=lambda s: order[s["point"]])


def _run_processes(args, jobs, record):
    # spawn, not fork: a forked child inherits torch's thread pools mid-state.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(train_point, *a) for a in args}
        try:
            while futures:
                done, futures = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    record(fut.result())
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _run_ray(args, record):
    """One Ray task per point on the instance ``run_sweep`` connected to (``_connect_ray``)."""
    import ray

    task = ray.remote(num_cpus=1)(train_point)
    refs = [task.remote(*a) for a in args]
    try:
        while refs:
            done, refs = ray.wait(refs, num_returns=1)
            for ref in done:
                record(ray.get(ref))
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
