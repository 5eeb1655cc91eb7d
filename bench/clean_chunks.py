"""Clean forwards in pieces and computed once: what they buy, and that they give the same bits.

    python bench/clean_chunks.py [CHECKPOINT] [--n 11000] [--rounds 3] [--claims] [--saving all|table]

``interventions.capture`` and a ``run`` with no intervention split a batch of an unhooked model into
pieces of ``engine.CLEAN_CHUNK`` sequences (the claims' largest clean forward is ``shared_residual``'s
11 x 1,000 sequences). The baseline, in the same run, is the same call with splitting turned off (one
forward of the whole batch). Each is timed in CPU seconds of this process (best of ``--rounds``), one
torch thread, alternating so both see the same load; the outputs are compared bit for bit.

``--claims``: every claim of ``assignadd-verify`` at n = 2000, in this process (one thread, a fresh
context each time), with both savings off (no ``reuse_clean_forwards``, no pieces: the baseline) and
on, alternating claim by claim; prints each claim's CPU seconds, the ratio, and whether the two result
dictionaries are identical. ``--saving table``: only Layer 1's q/k/v table (``model.transformer.
EMBEDDING_TABLE``) off in the baseline, everything else on in both. With ``--rounds`` > 1 each claim is
timed that many times each way, alternating, and the best of each is kept.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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
    ap.add_argument("--claims", action="store_true", help="also time every claim with both savings off and on")
    ap.add_argument(
        "--saving", choices=("all", "table"), default="all", help="with --claims: what the baseline turns off"
    )
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
    if args.claims:
        claims(args.checkpoint, args.saving, args.rounds)
    return 0


def claims(checkpoint: str, saving: str = "all", rounds: int = 1) -> None:
    import assignadd.interventions as interventions
    from assignadd.hypotheses import session
    from assignadd.model import transformer

    reuse, chunk = interventions.reuse_clean_forwards, engine.CLEAN_CHUNK
    ids = list(session.COST_HINT)
    what = "the savings" if saving == "all" else "Layer 1's q/k/v table"
    print(f"\nclaims at n = 2000, one process, one thread: CPU seconds with {what} off / on (best of {rounds})")
    print(f"{'claim':32s} {'off (s)':>8s} {'on (s)':>8s} {'ratio':>6s}  same result")
    total = {"off": 0.0, "on": 0.0}
    for cid in ids:
        seconds, result = {"off": [], "on": []}, {}
        for i in range(rounds):
            for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
                ctx, _, _ = session.load_context(checkpoint, seed=0, n=2000, device="cpu")
                if mode == "off":
                    transformer.EMBEDDING_TABLE = False
                    if saving == "all":
                        interventions.reuse_clean_forwards, engine.CLEAN_CHUNK = contextlib.nullcontext, 10**9
                        engine.SERVE_CLEAN_ATTENTION = False
                try:
                    t0 = time.process_time()
                    r, _ = session.run_one(ctx, cid)
                    seconds[mode].append(time.process_time() - t0)
                finally:
                    interventions.reuse_clean_forwards, engine.CLEAN_CHUNK = reuse, chunk
                    engine.SERVE_CLEAN_ATTENTION = transformer.EMBEDDING_TABLE = True
                r.pop("seconds", None)
                result.setdefault(mode, json.dumps(r, sort_keys=True))
                assert result[mode] == json.dumps(r, sort_keys=True), f"{cid}: a repeat gave another result"
        best = {m: min(v) for m, v in seconds.items()}
        total["off"], total["on"] = total["off"] + best["off"], total["on"] + best["on"]
        same = "yes" if result["off"] == result["on"] else "NO"
        print(f"{cid:32s} {best['off']:8.2f} {best['on']:8.2f} {best['off'] / best['on']:5.2f}x  {same}", flush=True)
    print(f"{'all':32s} {total['off']:8.2f} {total['on']:8.2f} {total['off'] / total['on']:5.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
