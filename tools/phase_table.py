"""Apply the learning-phase rule to finished runs' evaluation logs and print a Markdown table.

    python tools/phase_table.py RUN_DIR [RUN_DIR ...] [--steps series|all] [--every K]

Each run's ``metrics.jsonl`` (every pool's accuracy at every evaluation, written by assignadd-train)
gives the phase curves with no forward pass at all, so this is instant where a full
``assignadd-report`` over 400 checkpoints takes minutes. ``--steps series`` keeps only the steps of the
shipped reference series (0-6k every 500, then thinner), ``all`` every evaluation; ``--every K`` then
keeps every K-th of those (the last one always, as ``assignadd-report --every``). Onsets are printed as
intervals: the true onset lies after the first step and at or before the second. The rule and the
decision are ``learning_phases``' own (``detect_phases``, ``run_series``), with its time-axis
controls; only the pools differ from a report's (the training log's evaluation pools).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import assignadd
from assignadd.hypotheses.learning_phases import LearningPhases, detect_phases


def records(run: Path, steps: set[int] | None) -> list[dict]:
    out = []
    with open(run / "metrics.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if steps is None or r["step"] in steps:
                out.append({"step": int(r["step"]), "values": {f"acc_{k}": v for k, v in r["accuracy"].items()}})
    return sorted(out, key=lambda r: r["step"])


def _interval(pair) -> str:
    lo, hi = pair
    return "n/a" if lo is None or hi is None else (f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}")


def _onset(p: dict) -> str:
    before, at = p["onset_interval"]
    return "none" if at is None else (f"{at:,}" if before is None else f"({before:,}, {at:,}]")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--steps", choices=("series", "all"), default="series")
    ap.add_argument("--every", type=int, default=1, help="keep every K-th evaluation (the last one always)")
    args = ap.parse_args(argv)
    if args.every < 1:
        ap.error("--every must be at least 1")
    steps = {int(p.stem.split("_")[-1]) for p in assignadd.reference_series()} if args.steps == "series" else None
    print(
        "| run | checkpoints | 1. addition | 2. assignment | 3. restricted slots | spike share (window; contrast) | "
        "gap (steps) | refinement | `learning_phases` |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        recs = records(run, steps)
        recs = recs[:: args.every] + ([recs[-1]] if (len(recs) - 1) % args.every else [])
        found = detect_phases(recs)
        claim = LearningPhases().run_series(recs)
        onsets = [_onset(p) for p in found["phases"]]
        jump, ref, gap = found["assignment_jump"], found["restricted_refinement"], found["separations"][1]
        window = "-" if jump["window"] is None else f"{jump['window'][0]:,} → {jump['window'][1]:,}"
        contrast = "-" if jump["window_contrast"] is None else f"{jump['window_contrast']:.1f}"
        spike = f"{_interval(jump['fraction_interval'])} ({window}; {contrast})"
        lo, hi = gap["gap_interval"]
        gap_text = "n/a" if lo is None else f"{lo:,}-{hi:,}"
        verdict = f"**{claim.verdict}**" + ("" if claim.verdict == "pass" else f" ({claim.reason})")
        print(
            f"| {run.name} | {len(recs)} | {' | '.join(onsets)} | {spike} | {gap_text} | "
            f"{_interval(ref['fraction_interval'])} | {verdict} |"
        )


if __name__ == "__main__":
    main()
