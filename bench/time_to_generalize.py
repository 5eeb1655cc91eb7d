"""Time to generalization, the headline speed figure: from scratch, the paper's configuration, until the
0-, 1- and 2-var held-out pools are all at 0.97 or more (evaluated every 250 steps, 500 sequences each).

    python bench/time_to_generalize.py [--threads 1,2] [--seed 42] [--max-steps 20000] [--precision auto]
    python bench/time_to_generalize.py --threads 2 --seeds 0,1,2,3,4   # the spread over seeds

Runs the same training once per entry of ``--threads`` (a thread count; the first entry is the
baseline) and prints, for each, the wall time and steps until generalization and the ratio to the
baseline, with the machine named. ``--seeds`` runs every entry on each seed in turn (a line as each run ends) and then
gives, per entry, the median over the seeds and how many generalized within five minutes: a seed decides
when the pools generalize, so one seed's figure says little about the next. The
run folders are temporary. Wall times depend on what else the machine is doing: the load average
before each run is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

from assignadd.training.precision import cpu_name
from assignadd.training.train import TrainConfig, train

POOLS = ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair")
BAR = 0.97


def time_one(entry: str, seed: int, max_steps: int, precision: str) -> dict:
    threads = int(entry)
    reached = {}

    def early_stop(step, accs):
        if all(accs.get(p, 0.0) >= BAR for p in POOLS):
            reached["step"] = step
            return True
        return False

    cfg = TrainConfig(
        seed=seed,
        steps=max_steps,
        threads=threads,
        precision=precision,
        eval_every=250,
        checkpoint_every=max_steps,
        eval_size=500,
    )
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        train(tmp, cfg, progress=False, early_stop=early_stop, log=None)
        wall = time.perf_counter() - t0
    return {"threads": entry, "wall_s": wall, "step": reached.get("step"), "load_before": load}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--threads",
        default="1,2",
        help="comma-separated torch thread counts; the first is the baseline",
    )
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--seeds", default=None, help="comma-separated training seeds (instead of --seed): the spread")
    p.add_argument("--max-steps", type=int, default=20_000)
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    args = p.parse_args()
    print(
        f"machine: {cpu_name()}, {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}; precision {args.precision}; bar {BAR} on {', '.join(POOLS)}"
    )
    entries = [t.strip() for t in args.threads.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    header = f"{'seed':>5}  {'threads':>7}  {'steps':>6}  {'wall s':>8}  {'ms/step':>7}  {'vs first':>8}  load before"
    print(header, flush=True)
    rows = []
    for seed in seeds:
        base = None
        for entry in entries:
            r = time_one(entry, seed, args.max_steps, args.precision)
            r["seed"] = seed
            base = base or r["wall_s"]
            rows.append(r)
            steps = r["step"] if r["step"] is not None else f">{args.max_steps}"
            per_step = 1000 * r["wall_s"] / (r["step"] or args.max_steps)  # evaluations included
            print(
                f"{seed:>5}  {r['threads']:>7}  {steps!s:>6}  {r['wall_s']:8.1f}  {per_step:7.1f}  "
                f"{base / r['wall_s']:7.2f}x  {r['load_before']:.2f}",
                flush=True,
            )
    if len(seeds) > 1:
        print(f"over {len(seeds)} seeds ({', '.join(map(str, seeds))}); a seed not generalized counts as its full run")
        for entry in entries:
            mine = [r for r in rows if r["threads"] == entry]
            walls = sorted(r["wall_s"] for r in mine)
            steps = sorted(r["step"] if r["step"] is not None else float("inf") for r in mine)
            within = sum(r["step"] is not None and r["wall_s"] <= 300 for r in mine)
            print(
                f"  threads {entry}: median {statistics.median(walls):.1f} s (range {walls[0]:.1f}-{walls[-1]:.1f}), "
                f"median {statistics.median(steps):g} steps; {within} of {len(mine)} within 5 minutes"
            )


if __name__ == "__main__":
    main()
