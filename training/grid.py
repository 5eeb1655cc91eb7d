"""A data-requirement sweep's grid (SPEC §1.3, §4.5) and its early-stopping rule: what a sweep trains.

The paper trains the model for a grid of f (fraction of number pairs in training) and of r
(keep-probability of 2-var rows, SPEC §1.3) and reads off where generalization starts. A grid is one
parameter, its values and the run seeds (``SweepConfig``); each (value, seed) is a ``Point``, trained as
an ordinary run of ``training.train``. Where a sweep lives on disk: ``training/sweep_folder.py``; how its
points are run: ``training/sweep.py``.

Early stopping (``EarlyStop``): a point stops once its generalization metric on the evaluation pools
has been at or above ``EARLY_STOP_BAR`` for ``patience`` consecutive evaluations. A point that never
generalizes runs to ``steps``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .config import TrainConfig, TrainError

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
    """A grid value as it appears in a point's name: shortest form, ``0.25``, ``0.1``, ``1``. A folder
    name, not a report's number (``reports/render.py``'s ``fmt`` rounds to 3-4 digits): up to 10
    significant digits, so two grid values never share a folder."""
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
            self.fixed = FIXED_DEFAULTS[self.other]

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
        """The run of one point: its seed, f and r, and the training settings every point shares."""
        shared = (
            *("split_seed", "steps", "batch_size", "lr", "weight_decay", "device", "precision"),
            *("checkpoint_every", "eval_every", "eval_size"),
        )
        return TrainConfig(
            seed=point.seed, f=point.f, r=point.r, threads=threads, **{k: getattr(self, k) for k in shared}
        )

    def early_stop_rule(self) -> dict | None:
        if not self.early_stop:
            return None
        return {
            "metric": f"mean({', '.join(EARLY_STOP_POOLS[self.param])})",
            "bar": EARLY_STOP_BAR,
            "patience": self.early_stop,
        }

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
        from ..data import Task

        refused = []
        for f in sorted({p.f for p in self.points()}):
            missing = Task(f, 1.0, self.split_seed).numbers_missing_from_training()
            if missing:
                more = " ..." if len(missing) > 5 else ""
                refused.append(f"f={format_value(f)} (numbers {', '.join(map(str, missing[:5]))}{more})")
        if refused:
            raise SweepError(
                "a split leaves some number out of every training pair, so no model could learn "
                f"it: {'; '.join(refused)}; raise the smallest f"
            )

    def grid(self) -> dict:
        """What makes two sweeps the same sweep (a restart must match it). Needs a decided precision."""
        if self.precision == "auto":
            raise SweepError(
                "SweepConfig.grid: precision 'auto' is decided when the sweep opens "
                "(resolve_sweep_precision); this config was not resolved"
            )
        cfg = self.train_config(self.points()[0])
        return {
            "param": self.param,
            "values": sorted(self.values),
            "seeds": list(self.seeds),
            "fixed": {self.other: self.fixed},
            **{k: getattr(self, k) for k in ("steps", "batch_size", "lr", "weight_decay")},
            "betas": list(cfg.betas),
            "bf16": cfg.use_bf16,
            **{k: getattr(self, k) for k in ("split_seed", "eval_every", "eval_size", "checkpoint_every")},
            "early_stop": self.early_stop_rule(),
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
