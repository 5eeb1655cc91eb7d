"""What ``assignadd-mutants --judged-only`` (and ``--calibrate``, which always runs so) saves: the break
matrix on the bundled reference run in full (the baseline) and with only its judged cells, alternating,
in one process, with the same judged cells checked equal.

    python bench/mutants_speed.py [--n 500] [--mutants NAME,...] [--runs 1] [--jobs N]

Prints the machine, the wall and CPU time of each way and the ratio (full / judged-only). Default: every
break mutant of the registry, n = 500 (as the test suite's matrix), the claims in one worker per core as
the command runs them.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

import torch


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--mutants", help="comma-separated mutant names (default: every break mutant)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--jobs", type=int, default=None)
    args = p.parse_args()

    import assignadd
    from assignadd import Task, load_checkpoint
    from assignadd.hypotheses.mutation import matrix_to_dict, mutation_matrix
    from assignadd.interventions.mutants import MUTANTS

    names = args.mutants.split(",") if args.mutants else [n for n, m in MUTANTS.items() if m.kind == "break"]
    model = load_checkpoint(assignadd.reference_checkpoint())
    cpu_name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line), "?")
    print(
        f"machine: {platform.machine()} {cpu_name}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"load {os.getloadavg()[0]:.2f}; {len(names)} mutants, n = {args.n}"
    )
    times = {False: [], True: []}
    judged = {}
    for _ in range(args.runs):
        for only in (False, True):
            w, c = time.perf_counter(), _cpu()
            doc = matrix_to_dict(
                mutation_matrix(model, Task(), seed=0, n=args.n, mutants=names, jobs=args.jobs, judged_only=only)
            )
            times[only].append((time.perf_counter() - w, _cpu() - c))
            judged[only] = (
                doc["summary"],
                sorted((c["claim"], c["mutant"], c["verdict"]) for c in doc["cells"] if c["right"] is not None),
            )
            print(
                f"  {'judged-only' if only else 'full       '}: {times[only][-1][0]:7.1f} s wall, "
                f"{times[only][-1][1]:7.1f} s CPU, {len(doc['cells'])} cells run",
                flush=True,
            )
    same = judged[False] == judged[True]
    wall = {k: min(t[0] for t in v) for k, v in times.items()}
    cpu = {k: min(t[1] for t in v) for k, v in times.items()}
    print(
        f"full / judged-only: wall {wall[False] / wall[True]:.2f}x, CPU {cpu[False] / cpu[True]:.2f}x; "
        f"judged cells and summary the same: {same}"
    )


if __name__ == "__main__":
    main()
