"""Threads for one training run, idle and under a load this script makes: 1 thread, every usable core, and
what the automatic choice (``training/threads.py``) picks.

    python bench/thread_choice.py [--steps 20] [--batch-size 512] [--precision fp32] [--spinners 1] [--rounds 1]

For each condition (no added load, then ``--spinners`` processes spinning in Python, each started here,
bounded in time and stopped before the script ends), trains a short run of the paper's model
(``training.train.train``, real steps, a temporary folder) with ``--threads 1``, with every usable core, and
with the threads left to the automatic choice, and prints each run's steps/s (from its metrics.jsonl: the
wall time between the evaluations at step 0 and at the last step), the ratio of the two fixed counts, what
the automatic choice picked and measured, the machine (``lscpu``'s model name) and the load average before
and after each condition. The runs of a condition alternate over ``--rounds``. Wall times are the point
here (a waiting thread costs wall time, not CPU time), so they depend on what else the machine runs: read
the load averages beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from assignadd.training.precision import cpu_name
from assignadd.training.threads import usable_cores
from assignadd.training.train import TrainConfig, train

SPIN = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass\n"


def lscpu_model() -> str:
    """``lscpu``'s model name, else ``/proc/cpuinfo``'s or the platform's."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                return value.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return cpu_name()


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def one_run(folder: Path, threads: int | None, args) -> tuple[float, dict]:
    """(steps/s of the run's steps, its run.json ``threads`` record)."""
    cfg = TrainConfig(
        seed=0,
        steps=args.steps,
        batch_size=args.batch_size,
        precision=args.precision,
        eval_every=args.steps,
        checkpoint_every=args.steps,
        eval_size=20,
        threads=threads,
    )
    train(folder, cfg, progress=False, log=None)
    lines = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    wall = lines[-1]["wall_s"] - lines[0]["wall_s"]
    return args.steps / max(wall, 1e-9), json.loads((folder / "run.json").read_text())["threads"]


def condition(name: str, cores: int, args, tmp: Path) -> dict:
    """The three runs, ``--rounds`` times alternating; steps/s summed over rounds as total steps / time."""
    time.sleep(args.settle)
    before = load()
    entries = {"1": 1, str(cores): cores, "auto": None}
    seconds = {k: 0.0 for k in entries}
    picks = []
    for r in range(args.rounds):
        for label, threads in entries.items():
            rate, record = one_run(tmp / f"{name}-{label}-{r}", threads, args)
            seconds[label] += args.steps / rate
            if threads is None:
                picks.append(record)
    rates = {k: args.rounds * args.steps / s for k, s in seconds.items()}
    return {"name": name, "rates": rates, "picks": picks, "load_before": before, "load_after": load()}


def report(c: dict, cores: int) -> None:
    one, many, auto = c["rates"]["1"], c["rates"][str(cores)], c["rates"]["auto"]
    print(f"  {c['name']}: load average {c['load_before']} before, {c['load_after']} after")
    print(f"    1 thread      {one:7.2f} steps/s")
    print(f"    {cores} threads     {many:7.2f} steps/s   {cores} threads / 1 = {many / one:.2f}x")
    for p in c["picks"]:
        rates = ", ".join(f"{n}: {r:.2f}" for n, r in p["steps_per_s"].items())
        print(
            f"    auto chose {p['chosen']}  (measured steps/s {rates}; load then {p['load_average']}; {p['measure_s']} s)"
        )
    best = max(one, many)
    print(f"    auto run      {auto:7.2f} steps/s   {auto / best:.2f}x the faster fixed count")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--spinners", type=int, default=None, help="busy processes for the load (default: cores - 1)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--settle", type=float, default=5.0, help="seconds to wait after starting or stopping the load")
    p.add_argument("--max-load-s", type=float, default=600.0, help="the spinners stop by themselves after this")
    args = p.parse_args(argv)
    cores = usable_cores()
    if cores < 2:
        sys.exit("thread_choice: one usable core; nothing to compare")
    spinners = args.spinners if args.spinners is not None else cores - 1
    print(
        f"thread_choice: {lscpu_model()}, {cores} usable cores, torch {torch.__version__}, {args.precision}, "
        f"batch {args.batch_size}, {args.steps} steps a run, {args.rounds} round(s); "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(condition("no added load", cores, args, Path(tmp)))
        report(results[-1], cores)
        procs = [
            subprocess.Popen([sys.executable, "-c", SPIN, str(args.max_load_s)], stdout=subprocess.DEVNULL)
            for _ in range(spinners)
        ]
        try:
            results.append(condition(f"{spinners} spinning process(es) added", cores, args, Path(tmp)))
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait()
        report(results[-1], cores)


if __name__ == "__main__":
    main()
