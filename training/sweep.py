"""Running a data-requirement sweep (SPEC §4.5): every unfinished point of a grid (``training/grid.py``)
trained into one sweep folder (``training/sweep_folder.py``).

Started again, a sweep skips the points that have a ``final.pt`` and resumes the others (``train``
resumes exactly); an existing folder with another grid is refused. Points run on a local pool of
single-thread processes, or as Ray tasks.

Precision: ``auto`` is decided once for the whole sweep (``resolve_sweep_precision``), and every point
trains in it. With Ray the measurement is the driver's: on a cluster of other machines, give
``--precision`` explicitly.
"""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

import torch
from tqdm.auto import tqdm

from ..data import Task
from .grid import EarlyStop, SweepConfig, SweepError
from .precision import PrecisionChoice, choose_precision
from .sweep_folder import check_out_folder, last_logged_step, point_status, points_dir, read_grid_file, write_grid_file
from .threads import torch_threads
from .train import TrainConfig, log_stderr, recorded_precision, step_probe, train


def resolve_sweep_precision(out, cfg: SweepConfig, *, threads: int | None = None) -> PrecisionChoice:
    """One precision for every point: as given; for ``auto``, what an existing ``sweep.json`` records,
    else measured on the step the points will run (one point's ``train`` step on ``threads`` torch
    threads, as its worker will run)."""
    if cfg.precision != "auto":
        return PrecisionChoice.given(cfg.precision)
    if (Path(out) / "sweep.json").is_file():
        recorded = recorded_precision(read_grid_file(out).get("grid"))
        if recorded is not None:
            reason = f"auto, continued: sweep.json records {recorded}, chosen when the sweep started"
            return PrecisionChoice.kept(recorded, reason)
    first = cfg.points()[0]
    with torch_threads(threads or torch.get_num_threads()):
        return choose_precision(cfg.device, step_probe(cfg.train_config(first), Task(first.f, first.r, cfg.split_seed)))


def open_sweep(
    out, cfg: SweepConfig, options: dict | None = None, *, threads: int | None = None
) -> tuple[Path, PrecisionChoice]:
    """Check the grid and the folder, then decide the sweep's precision (``resolve_sweep_precision``: a bad
    option is an error before a second of timing) and write ``sweep.json`` (``sweep_folder.write_grid_file``,
    which checks that an existing folder holds this grid). Returns the folder and the decision."""
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


@contextmanager
def grid_progress(out: Path, cfg: SweepConfig, running: int, enabled: bool = True, every: float = 2.0):
    """One progress bar over the whole grid, read from the point folders every ``every`` seconds (the
    same for every backend: the folders are the only shared state). Units are training steps; the ETA
    assumes every unfinished point runs to ``steps``, so with early stopping it is an upper bound.
    Yields ``note(message)``, which writes a line above the bar (nothing when not ``enabled``)."""
    if not enabled:
        yield lambda message: None
        return
    points = cfg.points()

    def trained_and_done() -> tuple[int, int]:
        statuses = [point_status(points_dir(out) / p.name) for p in points]
        steps = sum(cfg.steps if status == "done" else min(s, cfg.steps) for status, s in statuses)
        return steps, sum(status == "done" for status, _ in statuses)

    def refresh() -> None:
        steps, done = trained_and_done()
        bar.update(max(0, steps - bar.n))
        bar.set_postfix_str(f"points done {done}/{len(points)}, running {min(running, len(points) - done)}")

    def poll() -> None:
        while not stop.wait(every):
            try:
                refresh()
            except OSError:  # a file being replaced as we read it: the next poll sees it
                pass

    total = len(points) * cfg.steps
    bar = tqdm(total=total, initial=trained_and_done()[0], unit="step", dynamic_ncols=True, desc=f"sweep {cfg.param}")
    refresh()
    stop = threading.Event()
    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield bar.write
    finally:
        stop.set()
        thread.join()
        refresh()
        bar.close()


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
    options = {"backend": backend, "jobs": jobs, "ray_address": ray_address, "device": cfg.device}
    stop_ray = _connect_ray(ray_address, jobs) if backend == "ray" else None  # before anything is written
    try:
        return _run_grid(out, cfg, options, backend, jobs, progress, log)
    finally:
        if stop_ray is not None:
            stop_ray()


def _connect_ray(address: str | None, jobs: int) -> Callable[[], None] | None:
    """Start a local Ray instance of ``jobs`` CPUs, or join the cluster at ``address``; returns
    ``ray.shutdown`` where this call started Ray (the caller must stop it), else None. Ray not installed,
    or a cluster that cannot be reached, is a SweepError."""
    try:
        import ray
    except ImportError:
        ray = None
    if not hasattr(ray, "remote"):  # missing, or a stray 'ray' folder seen as a namespace package
        raise SweepError("--backend ray needs Ray: pip install 'assignadd[ray]'")
    if ray.is_initialized():
        return None
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
    return ray.shutdown


def _check_reachable(address: str | None, timeout: float = 5.0) -> None:
    """A ``host:port`` address must accept a TCP connection within ``timeout`` seconds: Ray itself
    waits minutes for a cluster that is not there. (``auto`` and ``ray://`` addresses are left to Ray.)"""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"--ray-address must be HOST:PORT, auto or ray://HOST:PORT, got {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise SweepError(f"--ray-address {address}: no Ray cluster answers there ({e.strerror or e})") from None


def _run_grid(out, cfg, options, backend, jobs, progress, log) -> list[dict]:
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
    with grid_progress(out, cfg, jobs, enabled=progress) as note:

        def record(result: dict):
            reason = "early stop" if result["step"] < cfg.steps else "full length"
            note(f"{result['point']}: finished at step {result['step']} ({reason}, {result['seconds']} s)")
            summary.append({"point": result["point"], "status": f"trained ({reason})", "step": result["step"]})

        # One argument tuple of ``train_point`` per unfinished point (absolute folders: Ray workers
        # may run elsewhere than the driver's working directory).
        folder = points_dir(out).resolve()
        args = [
            (str(folder / p.name), asdict(cfg.train_config(p, threads)), cfg.param, cfg.early_stop, precision)
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
        futures = [pool.submit(train_point, *a) for a in args]
        try:
            for fut in as_completed(futures):
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
