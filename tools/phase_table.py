"""Apply the learning-phase rule to finished runs' evaluation logs and print a Markdown table.

    python tools/phase_table.py RUN_DIR [RUN_DIR ...] [--steps series|all]

Each run's ``metrics.jsonl`` (every pool's accuracy at every evaluation, written by assignadd-train)
gives the phase curves with no forward pass at all, so this is instant where a full
``assignadd-report`` over 400 checkpoints takes minutes. ``--steps series`` keeps only the steps of the
shipped reference series (0-6k every 500, then thinner), ``all`` every evaluation. The rule and the
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


def _r2(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--steps", choices=("series", "all"), default="series")
    args = ap.parse_args(argv)
    steps = {int(p.stem.split("_")[-1]) for p in assignadd.reference_series()} if args.steps == "series" else None
    print(
        "| run | checkpoints | 1. addition | 2. assignment | 3. restricted slots | separations | "
        "monotone-fit R² on permuted / reversed (max) | `learning_phases` |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        recs = records(run, steps)
        found = detect_phases(recs)
        claim = LearningPhases().run_series(recs)
        cells = []
        for p in found["phases"]:
            on = "none" if p["onset_step"] is None else f"{p['onset_step']:,}"
            cells.append(f"{on} (R² {_r2(p['coherence_r2'])}; step R² {_r2(p['step_r2'])})")
        seps = ", ".join(
            "n/a" if g["separating_checkpoints"] is None else str(g["separating_checkpoints"])
            for g in found["separations"]
        )
        coherence = [e for e in claim.evidence if e.name.endswith("_is_a_learning_curve")]
        worst = {c: max((e.controls[c].value or 0.0) for e in coherence) for c in ("permuted_steps", "reversed_steps")}
        verdict = f"**{claim.verdict}**" + ("" if claim.verdict == "pass" else f" ({claim.reason})")
        print(
            f"| {run.name} | {len(recs)} | {' | '.join(cells)} | {seps} | "
            f"{worst['permuted_steps']:.2f} / {worst['reversed_steps']:.2f} | {verdict} |"
        )


if __name__ == "__main__":
    main()
