"""Claim verdicts along a checkpoint series: does each mechanistic claim change verdict at most once
(fail to pass) from where its mechanism forms? Prints one row per checkpoint and the flips.

    python tools/claim_stability.py [SERIES_DIR] [--n N] [--only ID,...]

Default: the bundled series (checkpoints/series). One torch thread.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import assignadd
from assignadd.hypotheses import Context, run_all
from assignadd.model import load_checkpoint_full
from assignadd.hypotheses.session import task_for

MECHANISTIC = ["previous_token_head", "identity_qk", "shared_residual", "fourier_neurons"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("series", nargs="?", default=None)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--only", default=",".join(MECHANISTIC))
    args = p.parse_args()
    torch.set_num_threads(1)
    paths = sorted(Path(args.series).glob("*.pt")) if args.series else assignadd.reference_series()
    ids = args.only.split(",")
    history = {c: [] for c in ids}
    print("step  " + "  ".join(f"{c:>20s}" for c in ids), flush=True)
    for path in paths:
        model, meta = load_checkpoint_full(path)
        task, _ = task_for(meta, model.cfg, path)
        results = {r.claim: r.verdict for r in run_all(Context(model, task, n=args.n), ids)}
        step = meta.get("step")
        for c in ids:
            history[c].append((step, results[c]))
        print(f"{step!s:>6s}  " + "  ".join(f"{results[c]:>20s}" for c in ids), flush=True)
    bad = 0
    for c, h in history.items():
        changes = [(a, b) for a, b in zip(h, h[1:]) if a[1] != b[1]]
        back = [(a, b) for a, b in changes if a[1] == "pass"]
        bad += bool(back)
        print(
            f"{c}: {len(changes)} verdict change(s)"
            + ("" if not back else "; flips back: " + ", ".join(f"{a[0]}->{b[0]} ({a[1]}->{b[1]})" for a, b in back))
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
