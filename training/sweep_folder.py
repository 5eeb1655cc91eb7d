"""A sweep folder on disk: written by ``assignadd-sweep`` (``training/sweep.py``), read by the
``data_requirements`` claim and the sweep report.

    sweep.json                    the grid, the options and the precision choice (format
                                  ``assignadd.sweep-grid/1``)
    points/f=0.25_seed=0/         an ordinary run folder of ``training.train.train`` (run.json,
    points/f=0.3_seed=0/          checkpoints/, metrics.jsonl, resume.pt, final.pt)
    ...

A point with a ``final.pt`` is finished; one with logged evaluations is partial (it resumes from its
``resume.pt``); a folder holding another grid is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..fileio import atomic_write
from .grid import SweepConfig, SweepError

GRID_FORMAT = "assignadd.sweep-grid/1"


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
        raise SweepError(
            f"{path}: expected format {GRID_FORMAT!r}, found {doc.get('format') if isinstance(doc, dict) else doc!r}"
        )
    return doc


def config_from_grid_file(doc: dict) -> SweepConfig:
    """The ``SweepConfig`` a ``sweep.json`` records (its grid keys are the config's fields where they agree)."""
    g = doc["grid"]
    ((_, fixed),) = g["fixed"].items()
    same = (
        *("param", "values", "seeds", "split_seed", "steps", "batch_size", "lr", "weight_decay"),
        *("eval_every", "eval_size", "checkpoint_every"),
    )
    return SweepConfig(
        **{k: g[k] for k in same},
        fixed=fixed,
        early_stop=(g["early_stop"] or {}).get("patience", 0),
        precision="bf16" if g["bf16"] else "fp32",
    )


def check_out_folder(out) -> Path:
    """``out`` as a Path, if it can hold this sweep: absent, empty, or a sweep folder."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"{out}: exists and is not a folder")
    if not (out / "sweep.json").exists() and out.exists() and any(out.iterdir()):
        raise SweepError(f"{out}: exists, is not empty and holds no sweep.json; use another --out")
    return out


def write_grid_file(out, cfg: SweepConfig, options: dict | None, precision: dict) -> Path:
    """Write ``sweep.json`` for ``cfg`` (its precision decided), or check that the one ``out`` holds has the
    same grid (it keeps the precision record it was started with); creates ``points/``. Returns ``out``."""
    out = Path(out)
    path = out / "sweep.json"
    grid = cfg.grid()
    record = precision
    if path.exists():
        existing = read_grid_file(out)
        if isinstance(existing.get("precision"), dict):
            record = existing["precision"]  # what decided when the sweep started (the grid check keeps it true)
        old = existing.get("grid", {})
        diff = [k for k in sorted(set(grid) | set(old)) if grid.get(k) != old.get(k)]
        if diff:
            what = "; ".join(f"{k}: {old.get(k)!r} there, {grid.get(k)!r} asked" for k in diff[:4])
            raise SweepError(
                f"{out}: holds a sweep with another grid ({what}{'; ...' if len(diff) > 4 else ''}); "
                "use another --out, or the same options to continue it"
            )
    points_dir(out).mkdir(parents=True, exist_ok=True)
    doc = {
        "format": GRID_FORMAT,
        "grid": grid,
        "points": [{"name": p.name, "f": p.f, "r": p.r, "seed": p.seed} for p in cfg.points()],
        "options": options or {},
        "precision": record,
    }
    atomic_write(path, json.dumps(doc, indent=2) + "\n")
    return out


def point_status(point_dir) -> tuple[str, int]:
    """``("done", step)`` with a final.pt, ``("partial", step)`` with logged progress, else ``("new", 0)``."""
    step = last_logged_step(point_dir)
    if (Path(point_dir) / "final.pt").exists():
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
