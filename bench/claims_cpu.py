"""What `assignadd-verify` costs beside its claims: the claims' own CPU, in one process on one thread.

    python bench/claims_cpu.py [CHECKPOINT] [--n 2000] [--runs 2]

Prints, per run, the CPU seconds of the imports (torch, TransformerLens), loading and locating the
components, the seven claims (``run_all``) and the interface checks (``check_all``), on the bundled
reference by default. Compare the claims' line with the CPU time of the command itself
(``/usr/bin/time assignadd-verify --json ...``) to see what the command adds around them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

ONE_RUN = """
import sys, time
import torch
torch.set_num_threads(1)
t0 = time.process_time()
from assignadd import load_checkpoint, reference_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import Context, run_all
from assignadd.hypotheses.interfaces import check_all
t1 = time.process_time()
ctx = Context(load_checkpoint(sys.argv[1] or reference_checkpoint()), Task(), seed=0, n=int(sys.argv[2]))
ctx.located
t2 = time.process_time()
run_all(ctx)
t3 = time.process_time()
check_all(ctx)
t4 = time.process_time()
print(f"imports {t1 - t0:.2f} s, load and locate {t2 - t1:.2f} s, claims {t3 - t2:.2f} s, interfaces {t4 - t3:.2f} s")
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", nargs="?", default="")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--runs", type=int, default=2)
    args = p.parse_args()
    from assignadd.training.precision import cpu_name

    print(f"machine: {cpu_name()}; CPU seconds on one thread, a fresh process per run")
    for _ in range(args.runs):  # a fresh process each time: the imports are part of what is measured
        subprocess.run([sys.executable, "-c", ONE_RUN, args.checkpoint, str(args.n)], check=True)


if __name__ == "__main__":
    main()
