"""Data-requirement sweeps (SPEC §4.5): one training run per (grid value, seed), in one sweep folder.

The paper trains the model for a grid of f (fraction of number pairs in training) and of r
(keep-probability of 2-var rows, SPEC §1.3) and reads off where generalization starts. Here a sweep is
a folder:

    sweep.json                    the grid, the options and the precision choice (format
                                  ``assignadd.sweep-grid/1``)
    points/f=0.25_seed=0/         an ordinary run folder of ``model.train.train`` (run.json,
    points/f=0.3_seed=0/          checkpoints/, metrics.jsonl, resume.pt, final.pt)
    ...

Started again, a sweep skips the points that have a ``final.pt`` and resumes the others (``train``
resumes exactly); an existing folder with another grid is refused. Points run on a local pool of
single-thread processes, as Ray tasks, or K at a time in one batched step (``model.batched``, for a GPU).

Precision: ``auto`` is decided once for the whole sweep (``resolve_sweep_precision``: measured on the
step the points will run, single-thread workers or the batched stack; a restarted sweep keeps what
``sweep.json`` records), and every point trains in it. With Ray the measurement is the driver's: on a
cluster of other machines, give ``--precision`` explicitly.

Early stopping (``EarlyStop``): a point stops once its generalization metric on the evaluation pools
has been at or above ``EARLY_STOP_BAR`` for ``patience`` consecutive evaluations. A point that never
generalizes runs to ``steps``.
"""
from __future__ import annotations

import json
import math
import multiprocessing
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

from ..data import Task
from .precision import PrecisionChoice
from .train import TrainConfig, TrainError

GRID_FORMAT = "assignadd.sweep-grid/1"
PARAMS = ("f", "r")
FIXED_DEFAULTS = {"f": 0.7, "r": 1.0}  # the paper's main run: the value of the parameter not swept

# The metric early stopping watches, per swept parameter: the evaluation pools closest to what
# hypotheses/data_requirements.py measures exhaustively on the final weights.
EARLY_STOP_POOLS = {
    "f": ("0var_heldout_pair",),  # held-out pairs as constants: the paper's f figure
    # The exhaustive 2-var union is held-out pairs x valid variable pairs plus training pairs x restricted
    # variable pairs: these three pools sample its parts.
    "r": ("2var_heldout_pair", "2var_restricted_1", "2var_restricted_2"),
}
# 0.97: well above the 0.9 at which data_requirements counts a run as generalized (with 500-sequence
# pools, the 95% interval at 0.97 is about +-1.5 points), so stopping cannot turn a run that generalizes
# into one that does not; it gives up only the last points of refinement toward the paper's 99.4%.
EARLY_STOP_BAR = 0.97


class SweepError(ValueError):
    """A bad sweep option or a sweep folder that does not match the requested grid."""


def format_value(v: float) -> str:
    """A grid value as it appears in a point's name: shortest form, ``0.25``, ``0.1``, ``1``."""
    return f"{v:.10g}"


@dataclass(frozen=True)
class Point:
    param: str
    value: float
    seed: int
    f: float
    r: float

    @property
    def name(self) -> str:
        return f"{self.param}={format_value(self.value)}_seed={self.seed}"


@dataclass
class SweepConfig:
    """A grid (one parameter, its values, seeds) and the training settings every point shares."""

    param: str
    values: tuple[float, ...]
    seeds: tuple[int, ...] = (0,)
    fixed: float | None = None  # the other parameter's value (default: the paper's, FIXED_DEFAULTS)
    steps: int = 20_000
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.02
    eval_every: int = 100
    eval_size: int = 500
    checkpoint_every: int = 1000  # 100 as in train would be ~200 MB per 20k-step point
    early_stop: int = 0  # patience K: consecutive evaluations at or above the bar; 0 = off
    split_seed: int = 42
    device: str = "cpu"
    precision: str = "auto"  # auto: measured once per sweep (resolve_sweep_precision); fp32, bf16: as given

    def __post_init__(self):
        self.values = tuple(float(v) for v in self.values)
        self.seeds = tuple(int(s) for s in self.seeds)
        if self.fixed is None and self.param in PARAMS:
            self.fixed = FIXED_DEFAULTS["r" if self.param == "f" else "f"]

    @property
    def other(self) -> str:
        return "r" if self.param == "f" else "f"

    def points(self) -> list[Point]:
        """Every grid point, by value then seed."""
        out = []
        for v in sorted(self.values):
            fr = {self.param: v, self.other: self.fixed}
            out.extend(Point(self.param, v, s, fr["f"], fr["r"]) for s in self.seeds)
        return out

    def train_config(self, point: Point, threads: int | None = None) -> TrainConfig:
        return TrainConfig(seed=point.seed, f=point.f, r=point.r, split_seed=self.split_seed, steps=self.steps,
                           batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                           device=self.device, precision=self.precision, checkpoint_every=self.checkpoint_every,
                           eval_every=self.eval_every, eval_size=self.eval_size, threads=threads)

    def early_stop_rule(self) -> dict | None:
        if not self.early_stop:
            return None
        return {"metric": f"mean({', '.join(EARLY_STOP_POOLS[self.param])})", "bar": EARLY_STOP_BAR,
                "patience": self.early_stop}

    def validate(self) -> None:
        """Every problem with the grid, as a SweepError with one line."""
        if self.param not in PARAMS:
            raise SweepError(f"--param must be f or r, got {self.param!r}")
        if not self.values:
            raise SweepError("--values needs at least one value")
        lo_ok = {"f": lambda v: 0 < v <= 1, "r": lambda v: 0 <= v <= 1}
        for v in self.values:
            if not math.isfinite(v) or not lo_ok[self.param](v):
                rng = "(0, 1]" if self.param == "f" else "[0, 1]"
                raise SweepError(f"--values: {self.param}={v} is outside {rng}")
        if not lo_ok[self.other](self.fixed):
            raise SweepError(f"--{self.other} {self.fixed} is outside the allowed range")
        names = [format_value(v) for v in self.values]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SweepError(f"--values lists {self.param}={dup[0]} twice")
        if not self.seeds:
            raise SweepError("--seeds needs at least one seed")
        if len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise SweepError(f"--seeds must be distinct non-negative integers, got {list(self.seeds)}")
        if self.early_stop < 0:
            raise SweepError(f"--early-stop must be >= 0 (0: off), got {self.early_stop}")
        try:
            self.train_config(self.points()[0]).validate()
        except TrainError as e:
            raise SweepError(str(e)) from None
        if self.param == "f" or self.other == "f":
            refused = []
            for f in sorted({p.f for p in self.points()}):
                missing = Task(f, 1.0, self.split_seed).numbers_missing_from_training()
                if missing:
                    refused.append(f"f={format_value(f)} (numbers {', '.join(map(str, missing[:5]))}"
                                   f"{' ...' if len(missing) > 5 else ''})")
            if refused:
                raise SweepError("a split leaves some number out of every training pair, so no model could learn "
                                 f"it: {'; '.join(refused)}; raise the smallest f")

    def grid(self) -> dict:
        """What makes two sweeps the same sweep (a restart must match it). Needs a decided precision."""
        if self.precision == "auto":
            raise SweepError("SweepConfig.grid: precision 'auto' is decided when the sweep opens "
                             "(resolve_sweep_precision); this config was not resolved")
        cfg = self.train_config(self.points()[0])
        return {
            "param": self.param, "values": sorted(self.values), "seeds": list(self.seeds),
            "fixed": {self.other: self.fixed}, "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
            "weight_decay": self.weight_decay, "betas": list(cfg.betas), "bf16": cfg.use_bf16,
            "split_seed": self.split_seed, "eval_every": self.eval_every, "eval_size": self.eval_size,
            "checkpoint_every": self.checkpoint_every, "early_stop": self.early_stop_rule(),
        }


# ----- early stopping ---------------------------------------------------------------------------------
def early_stop_metric(param: str, accs: dict) -> float:
    """The pool accuracy a point's early stop watches: ``mean_{p in EARLY_STOP_POOLS[param]} acc_p``."""
    pools = EARLY_STOP_POOLS[param]
    return sum(accs[p] for p in pools) / len(pools)


class EarlyStop:
    """``train``'s ``early_stop(step, accs)``: True once ``early_stop_metric >= bar`` at ``patience``
    consecutive evaluations. Picklable (it crosses to worker processes and Ray tasks).

    With ``run_dir`` it reads the evaluations logged before the first one it sees, so a resumed point
    counts the streak it had when it was killed.
    """

    def __init__(self, param: str, patience: int, bar: float = EARLY_STOP_BAR, run_dir=None):
        if param not in PARAMS or patience < 1:
            raise ValueError(f"EarlyStop needs param f or r and patience >= 1, got {param!r}, {patience}")
        self.param, self.patience, self.bar = param, patience, bar
        self.run_dir = None if run_dir is None else str(run_dir)
        self.streak = 0
        self._primed = run_dir is None

    def _prime(self, step: int) -> None:
        self._primed = True
        log = Path(self.run_dir) / "metrics.jsonl"
        if not log.exists():
            return
        for line in log.read_text().splitlines():
            try:
                rec = json.loads(line)
                if 0 < rec["step"] < step:
                    self.update(rec["accuracy"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue

    def update(self, accs: dict) -> bool:
        self.streak = self.streak + 1 if early_stop_metric(self.param, accs) >= self.bar else 0
        return self.streak >= self.patience

    def __call__(self, step: int, accs: dict) -> bool:
        if not self._primed:
            self._prime(step)
        return self.update(accs)


# ----- the sweep folder -------------------------------------------------------------------------------
def points_dir(out) -> Path:
    return Path(out) / "points"


def read_grid_file(out) -> dict:
    """``sweep.json`` of a sweep folder, checked for its format."""
    path = Path(out) / "sweep.json"
    if not path.is_file():
        raise SweepError(f"{out}: not a sweep folder (no sweep.json)")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SweepError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != GRID_FORMAT:
        raise SweepError(f"{path}: expected format {GRID_FORMAT!r}, found {doc.get('format') if isinstance(doc, dict) else doc!r}")
    return doc


def config_from_grid_file(doc: dict) -> SweepConfig:
    g = doc["grid"]
    (other, fixed), = g["fixed"].items()
    return SweepConfig(param=g["param"], values=tuple(g["values"]), seeds=tuple(g["seeds"]), fixed=fixed,
                       steps=g["steps"], batch_size=g["batch_size"], lr=g["lr"], weight_decay=g["weight_decay"],
                       eval_every=g["eval_every"], eval_size=g["eval_size"], checkpoint_every=g["checkpoint_every"],
                       early_stop=(g["early_stop"] or {}).get("patience", 0), split_seed=g["split_seed"],
                       precision="bf16" if g["bf16"] else "fp32")


def resolve_sweep_precision(out, cfg: SweepConfig, *, batched: int = 1,
                            threads: int | None = None) -> PrecisionChoice:
    """One precision for every point: as given; for ``auto``, what an existing ``sweep.json`` records,
    else measured on the step the points will run (``batched > 1``: the batched stack of that many
    points; else one point's ``train`` step on ``threads`` torch threads, as its worker will run)."""
    if cfg.precision != "auto":
        return PrecisionChoice.given(cfg.precision)
    if (Path(out) / "sweep.json").is_file():
        bf16 = read_grid_file(out).get("grid", {}).get("bf16")
        if isinstance(bf16, bool):
            chosen = "bf16" if bf16 else "fp32"
            return PrecisionChoice(requested="auto", chosen=chosen, source="run folder",
                                   reason=f"auto, continued: sweep.json records {chosen}, chosen when the sweep "
                                          "started")
    import torch

    from .precision import choose_precision

    points = cfg.points()
    before = torch.get_num_threads()
    try:
        if threads:
            torch.set_num_threads(threads)
        if batched > 1:
            from .batched import step_probe as batched_probe

            probe = batched_probe([cfg.train_config(p) for p in points[:batched]])
        else:
            from .train import step_probe

            first = points[0]
            probe = step_probe(cfg.train_config(first), Task(first.f, first.r, cfg.split_seed))
        return choose_precision(cfg.device, probe)
    finally:
        torch.set_num_threads(before)


def _check_out_folder(out) -> Path:
    """``out`` as a Path, if it can hold this sweep: absent, empty, or a sweep folder."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"{out}: exists and is not a folder")
    if not (out / "sweep.json").exists() and out.exists() and any(out.iterdir()):
        raise SweepError(f"{out}: exists, is not empty and holds no sweep.json; use another --out")
    return out


def open_sweep(out, cfg: SweepConfig, options: dict | None = None,
               precision: PrecisionChoice | None = None) -> Path:
    """Create the sweep folder, or check that an existing one holds this grid; write ``sweep.json``.
    ``precision``: the sweep's decision (default: ``resolve_sweep_precision`` with one worker)."""
    cfg.validate()
    out = _check_out_folder(out)
    path = out / "sweep.json"
    if precision is None:
        precision = resolve_sweep_precision(out, cfg)
    cfg = replace(cfg, precision=precision.chosen)
    grid = cfg.grid()
    record = precision.to_dict()
    if path.exists():
        existing = read_grid_file(out)
        if isinstance(existing.get("precision"), dict):
            record = existing["precision"]  # what decided when the sweep started (the grid check keeps it true)
        old = existing.get("grid", {})
        diff = [k for k in sorted(set(grid) | set(old)) if grid.get(k) != old.get(k)]
        if diff:
            what = "; ".join(f"{k}: {old.get(k)!r} there, {grid.get(k)!r} asked" for k in diff[:4])
            raise SweepError(f"{out}: holds a sweep with another grid ({what}{'; ...' if len(diff) > 4 else ''}); "
                             "use another --out, or the same options to continue it")
    out.mkdir(parents=True, exist_ok=True)
    points_dir(out).mkdir(exist_ok=True)
    doc = {"format": GRID_FORMAT, "grid": grid,
           "points": [{"name": p.name, "f": p.f, "r": p.r, "seed": p.seed} for p in cfg.points()],
           "options": options or {}, "precision": record}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
    return out


def point_status(point_dir) -> tuple[str, int]:
    """``("done", step)`` with a final.pt, ``("partial", step)`` with logged progress, else ``("new", 0)``."""
    point_dir = Path(point_dir)
    final = point_dir / "final.pt"
    step = last_logged_step(point_dir)
    if final.exists():
        return "done", step
    return ("partial", step) if step > 0 else ("new", 0)


def last_logged_step(point_dir) -> int:
    log = Path(point_dir) / "metrics.jsonl"
    if not log.exists():
        return 0
    last = 0
    for line in log.read_text().splitlines()[-3:]:
        try:
            last = max(last, int(json.loads(line)["step"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return last


def resume_step(point_dir) -> int:
    """The step a point resumes from (its resume.pt), 0 for a new one."""
    import torch

    resume = Path(point_dir) / "resume.pt"
    if not resume.exists():
        return 0
    try:
        return int(torch.load(resume, map_location="cpu", weights_only=True)["step"])
    except Exception as e:  # a resume file we cannot read is the trainer's to report, with its reason
        raise SweepError(f"{resume}: cannot read its step ({str(e).splitlines()[0][:200]})") from None


# ----- running points ---------------------------------------------------------------------------------
def train_point(point_dir: str, train_cfg: dict, param: str, patience: int, precision: dict | None = None) -> dict:
    """Train one grid point to its end (a top-level function: it runs in worker processes and Ray
    tasks). ``precision``: the sweep's ``PrecisionChoice`` as a dict, recorded in the point's run.json."""
    from .train import train

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
        self.finished: set[str] = set()

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
        self.bar = tqdm(total=len(self.points) * self.cfg.steps, initial=steps, unit="step", dynamic_ncols=True,
                        desc=f"sweep {self.cfg.param}")
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


def _log_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_sweep(out, cfg: SweepConfig, *, backend: str = "local", jobs: int = 1, batched: int = 1,
              ray_address: str | None = None, progress: bool = True,
              log: Callable[[str], None] | None = _log_stderr) -> list[dict]:
    """Train every unfinished point of the grid into ``out``; returns one summary per point.

    ``backend="local"``: ``jobs`` single-thread worker processes (``jobs=1``: in this process), or with
    ``batched=K`` groups of K points in one batched step (``model.batched``; meant for a GPU).
    ``backend="ray"``: one Ray task per point (``num_cpus=1``), on a local instance of ``jobs`` CPUs or
    on the cluster at ``ray_address``. ``log`` gets one line saying which precision the sweep trains in
    and why (default: standard error; None: silent).
    """
    if backend not in ("local", "ray"):
        raise SweepError(f"--backend must be local or ray, got {backend!r}")
    if jobs < 1:
        raise SweepError(f"--jobs must be at least 1, got {jobs}")
    if batched < 1:
        raise SweepError(f"--batched must be at least 1, got {batched}")
    if batched > 1 and (backend != "local" or jobs != 1):
        raise SweepError("--batched K trains K points on one device in this process: use it with --backend local "
                         "--jobs 1")
    if ray_address and backend != "ray":
        raise SweepError("--ray-address needs --backend ray")
    if backend == "ray":
        try:
            import ray
        except ImportError:
            ray = None
        if not hasattr(ray, "remote"):  # missing, or a stray 'ray' folder seen as a namespace package
            raise SweepError("--backend ray needs Ray: pip install 'assignadd[ray]'")
    options = {"backend": backend, "jobs": jobs, "batched": batched, "ray_address": ray_address, "device": cfg.device}
    ray_started = _connect_ray(ray_address, jobs) if backend == "ray" else False  # before anything is written
    try:
        return _run_grid(out, cfg, options, backend, jobs, batched, ray_address, progress, log)
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


def _run_grid(out, cfg, options, backend, jobs, batched, ray_address, progress, log) -> list[dict]:
    threads = 1 if cfg.device == "cpu" and (jobs > 1 or backend == "ray") else None
    cfg.validate()  # a bad option or folder is an error before a second of timing
    _check_out_folder(out)
    choice = resolve_sweep_precision(out, cfg, batched=min(batched, len(cfg.points())), threads=threads)
    cfg = replace(cfg, precision=choice.chosen)
    out = open_sweep(out, cfg, options, precision=choice)
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
    patience = cfg.early_stop
    parallel = batched if batched > 1 else jobs
    with GridProgress(out, cfg, parallel, enabled=progress) as bar:
        def record(result: dict):
            reason = "early stop" if result["step"] < cfg.steps else "full length"
            bar.note(f"{result['point']}: finished at step {result['step']} ({reason}, {result['seconds']} s)")
            summary.append({"point": result["point"], "status": f"trained ({reason})", "step": result["step"]})

        if not todo:
            pass
        elif batched > 1:
            _run_batched(out, cfg, todo, batched, record, PrecisionChoice.from_dict(precision))
        elif backend == "ray":
            _run_ray(out, cfg, todo, jobs, ray_address, threads, record, precision)
        elif jobs == 1:
            for p in todo:
                record(train_point(str(points_dir(out) / p.name), asdict(cfg.train_config(p, threads)), cfg.param,
                                   patience, precision))
        else:
            _run_processes(out, cfg, todo, jobs, threads, record, precision)
    order = {p.name: i for i, p in enumerate(cfg.points())}
    return sorted(summary, key=lambda s: order[s["point"]])


def _run_processes(out, cfg, todo, jobs, threads, record, precision):
    # spawn, not fork: a forked child inherits torch's thread pools mid-state.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(train_point, str(points_dir(out) / p.name), asdict(cfg.train_config(p, threads)),
                               cfg.param, cfg.early_stop, precision) for p in todo}
        try:
            while futures:
                done, futures = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    record(fut.result())
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise


def _run_ray(out, cfg, todo, jobs, address, threads, record, precision):
    """One Ray task per point on the instance ``run_sweep`` connected to (``_connect_ray``)."""
    import ray

    task = ray.remote(num_cpus=1)(train_point)
    refs = [task.remote(str(points_dir(out).resolve() / p.name), asdict(cfg.train_config(p, threads)), cfg.param,
                        cfg.early_stop, precision) for p in todo]
    try:
        while refs:
            done, refs = ray.wait(refs, num_returns=1)
            for ref in done:
                record(ray.get(ref))
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise


def _run_batched(out, cfg, todo, k, record, choice):
    """Groups of up to K points that resume from the same step, each group in one batched run."""
    from .batched import train_batched

    by_start: dict[int, list[Point]] = {}
    for p in todo:
        by_start.setdefault(resume_step(points_dir(out) / p.name), []).append(p)
    for start in sorted(by_start):
        group_all = by_start[start]
        for i in range(0, len(group_all), k):
            group = group_all[i:i + k]
            dirs = [points_dir(out) / p.name for p in group]
            stops = [EarlyStop(cfg.param, cfg.early_stop, run_dir=d) if cfg.early_stop else None for d in dirs]
            t0 = time.time()
            train_batched(dirs, [cfg.train_config(p) for p in group], early_stops=stops, precision=choice,
                          log=None)
            for d in dirs:
                record({"point": d.name, "step": last_logged_step(d), "seconds": round(time.time() - t0, 1)})
