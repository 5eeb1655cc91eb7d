"""Two cores for training: one run with two torch threads against two one-thread runs side by side.

    python bench/thread_scaling.py [--steps 20] [--precision fp32|bf16]

Times the training step (``last_logits``, batch 512, as ``training/train.py`` runs it) in one process
with 1 and with 2 torch threads, and the step's matrix products alone with 1 and 2 threads (the part
that threads can split); then starts two one-thread processes at once and adds their rates (what
``assignadd-sweep --jobs 2`` or two ``assignadd-train`` runs get). Prints steps/s and the ratios, with the
machine named. CPU-bound work on a shared machine: run it with nothing else busy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def rate(threads: int, steps: int, bf16: bool) -> tuple[float, float]:
    """(steps/s of the whole step, seconds of its products alone per step), wall, best of 2 rounds."""
    from train_speed import gemm_seconds, make_step, step_gemms

    from assignadd import ModelConfig

    torch.set_num_threads(threads)
    step = make_step(True, bf16, 512)
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(2):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, time.perf_counter() - t)
    products = gemm_seconds(step_gemms(512, ModelConfig()), torch.bfloat16 if bf16 else torch.float32, wall=True)
    return steps / best, products


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    bf16 = args.precision == "bf16"
    if args.child:
        print(json.dumps({"rate": rate(1, args.steps, bf16)[0]}))
        return

    from assignadd.training.precision import cpu_name

    one, prod1 = rate(1, args.steps, bf16)
    two, prod2 = rate(2, args.steps, bf16)
    cmd = [sys.executable, __file__, "--child", "--steps", str(args.steps), "--precision", args.precision]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    side = [json.loads(p.communicate()[0])["rate"] for p in procs]
    print(f"thread_scaling: {cpu_name()}, {args.precision}, last_logits batch 512, torch {torch.__version__}")
    print(f"  one process, 1 thread      {one:7.2f} steps/s   products alone {prod1 * 1e3:6.1f} ms/step")
    print(
        f"  one process, 2 threads     {two:7.2f} steps/s   products alone {prod2 * 1e3:6.1f} ms/step   "
        f"x{two / one:.2f} (products x{prod1 / prod2:.2f})"
    )
    print(
        f"  two 1-thread processes     {side[0]:7.2f} + {side[1]:.2f} = {sum(side):.2f} steps/s   x{sum(side) / one:.2f}"
    )
    rest1, rest2 = 1 / one - prod1, 1 / two - prod2
    print(
        f"  outside the products: {rest1 * 1e3:.1f} ms/step with 1 thread, {rest2 * 1e3:.1f} ms with 2 "
        f"(x{rest1 / rest2:.2f})"
    )


if __name__ == "__main__":
    main()
