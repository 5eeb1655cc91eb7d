"""Clean forwards in pieces: what splitting a large batch into ``CLEAN_CHUNK`` sequences buys, and
that it gives the same bits.

    python bench/clean_chunks.py [CHECKPOINT] [--n 11000] [--rounds 3]

``interventions.capture`` and a ``run`` with no intervention split a batch of an unhooked model into
pieces of ``engine.CLEAN_CHUNK`` sequences (the claims' largest clean forward is ``shared_residual``'s
11 x 1,000 sequences). The baseline, in the same run, is the same call with splitting turned off (one
forward of the whole batch). Each is timed in CPU seconds of this process (best of ``--rounds``), one
torch thread, alternating so both see the same load; the outputs are compared bit for bit.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from assignadd.data import Task
from assignadd.interventions import capture, engine, run
from assignadd.model import load_checkpoint
from assignadd.training.precision import cpu_name

REFERENCE = Path(__file__).resolve().parents[1] / "checkpoints" / "reference.pt"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", nargs="?", default=str(REFERENCE))
    ap.add_argument("--n", type=int, default=11000, help="sequences in the batch (default 11000)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = load_checkpoint(args.checkpoint).eval()
    tokens, _ = Task().pool("1var_train", args.n, seed=1)
    calls = {
        "capture resid_mid_2 at =": lambda: capture(model, tokens, ["blocks.1.hook_resid_mid"], pos=15)[
            "blocks.1.hook_resid_mid"
        ],
        "run, last position's logits": lambda: run(model, tokens, [], last_only=True).logits,
    }
    chunk = engine.CLEAN_CHUNK
    print(
        f"{cpu_name()}, {os.cpu_count()} cores, 1 torch thread; batch {args.n} x 16; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'call':32s} {'whole (s)':>10s} {f'pieces of {chunk} (s)':>18s} {'ratio':>6s}  same bits")
    for name, call in calls.items():
        best = {"whole": float("inf"), "pieces": float("inf")}
        out = {}
        for _ in range(args.rounds):
            for mode in ("whole", "pieces"):
                engine.CLEAN_CHUNK = 10**9 if mode == "whole" else chunk
                try:
                    t0 = time.process_time()
                    out[mode] = call()
                    best[mode] = min(best[mode], time.process_time() - t0)
                finally:
                    engine.CLEAN_CHUNK = chunk
        same = torch.equal(out["whole"], out["pieces"])
        print(
            f"{name:32s} {best['whole']:10.2f} {best['pieces']:18.2f} {best['whole'] / best['pieces']:5.2f}x  {'yes' if same else 'NO'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
