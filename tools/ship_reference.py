"""Copy a finished run into the package as the bundled reference (SPEC §3).

    python tools/ship_reference.py RUN_DIR

Writes checkpoints/reference.pt (the run's final checkpoint, unchanged), checkpoints/series/
(a thinned series, weights only, frozen zero tensors dropped), checkpoints/metrics.jsonl (the run's
log) and checkpoints/run.json. The series steps are fixed here, not picked from the curves.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

SERIES_STEPS = (
    list(range(0, 6001, 500))
    + [7000, 8000, 9000, 10000, 12000, 14000, 16000, 18000, 20000]
    + list(range(24000, 40001, 4000))
)
LIMIT_BYTES = 40 * 2**20


def main(run_dir: str) -> None:
    run = Path(run_dir)
    here = Path(__file__).resolve().parent.parent / "checkpoints"
    series = here / "series"
    if series.exists():
        shutil.rmtree(series)
    series.mkdir(parents=True)
    shutil.copyfile(run / "final.pt", here / "reference.pt")
    shutil.copyfile(run / "metrics.jsonl", here / "metrics.jsonl")
    shutil.copyfile(run / "run.json", here / "run.json")
    for step in SERIES_STEPS:
        src = run / "checkpoints" / f"step_{step:06d}.pt"
        obj = torch.load(src, map_location="cpu", weights_only=True)
        assert obj["step"] == step and obj.get("zero_keys"), src
        shutil.copyfile(src, series / src.name)
    total = sum(p.stat().st_size for p in here.rglob("*.pt"))
    print(f"shipped {len(SERIES_STEPS)} series checkpoints + reference: {total / 2**20:.1f} MiB")
    if total > LIMIT_BYTES:
        raise SystemExit(f"checkpoints total {total} bytes, over the 40 MiB limit")


if __name__ == "__main__":
    main(sys.argv[1])
