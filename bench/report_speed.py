"""What assignadd-report costs per checkpoint, and the projected time for the authors' 400-checkpoint run.

Measures, in this process with one torch thread (as each --jobs worker runs):
  curves   the per-checkpoint pools and progress measures (SeriesMeasurer.measure), on --checkpoints
           checkpoints of PATH;
  claims   every registered claim on one checkpoint (what --claims adds per chosen checkpoint);
and prints CPU and wall seconds for each and the projection
  400 x curves + claims x claims_cost, spread over --jobs processes (+ one process start each).
CPU seconds are the figure to trust on a busy machine (wall is CPU x contention). ``--full`` also runs
the whole report on PATH with --jobs and prints its wall time. Record results in docs/dynamics.md.

    python bench/report_speed.py [PATH] [--checkpoints 20] [--jobs 2] [--n 1000] [--claims 8] [--full]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from assignadd import hypotheses
from assignadd.model import load_checkpoint
from assignadd.hypotheses.measures.progress import SeriesMeasurer
from assignadd.reports.series import _task_config, compute_series, find_checkpoints
from assignadd.data import Task


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", default="/work/runs/seed42")
    p.add_argument("--checkpoints", type=int, default=20, help="checkpoints timed for the curves")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--claims", type=int, default=8, help="claim checkpoints in the projection")
    p.add_argument("--skip-claims", action="store_true", help="do not time the claims")
    p.add_argument("--full", action="store_true", help="also run the whole report on PATH")
    a = p.parse_args()
    torch.set_num_threads(1)
    entries = find_checkpoints(a.path)
    idx = sorted({round(i * (len(entries) - 1) / max(1, a.checkpoints - 1)) for i in range(a.checkpoints)})
    chosen = [entries[i] for i in idx]
    t0, c0 = time.perf_counter(), time.process_time()
    m = SeriesMeasurer(Task(**_task_config(__import__("pathlib").Path(a.path), entries).__dict__), a.n)
    setup_wall, setup_cpu = time.perf_counter() - t0, time.process_time() - c0
    walls, cpus = [], []
    for e in chosen:
        t0, c0 = time.perf_counter(), time.process_time()
        m.measure(load_checkpoint(e.path))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    curve_cpu = statistics.median(cpus)
    print(f"setup (task, pools): {setup_cpu:.2f} s CPU, {setup_wall:.2f} s wall")
    print(
        f"curves, per checkpoint (median of {len(chosen)}): {curve_cpu:.3f} s CPU, "
        f"{statistics.median(walls):.3f} s wall"
    )
    claim_cpu = 0.0
    if not a.skip_claims and hypotheses.REGISTRY:
        model = load_checkpoint(entries[-1].path)
        t0, c0 = time.perf_counter(), time.process_time()
        verdicts = m.claims(model)
        claim_cpu = time.process_time() - c0
        print(
            f"claims ({len(verdicts)} registered) on one checkpoint: {claim_cpu:.1f} s CPU, "
            f"{time.perf_counter() - t0:.1f} s wall"
        )
    start_cpu = 4.0  # a spawned worker importing torch + transformer_lens, measured ~3-4 s
    total = 400 * curve_cpu + a.claims * claim_cpu
    print(
        f"projection, 400 checkpoints, --claims {a.claims}: {total:.0f} CPU-s; "
        f"on {a.jobs} free cores ~{total / a.jobs + start_cpu + setup_cpu:.0f} s wall"
    )
    if a.full:
        t0 = time.perf_counter()
        doc = compute_series(a.path, jobs=a.jobs, n=a.n, claims=a.claims, progress=True)
        print(
            f"full report: {len(doc['checkpoints'])} checkpoints, --jobs {a.jobs}, --claims {a.claims}: "
            f"{time.perf_counter() - t0:.0f} s wall"
        )


if __name__ == "__main__":
    main()
