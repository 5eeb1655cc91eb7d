"""The curves behind the seeds table: held-out accuracy over training, and where the errors are.

    python tools/heldout_curves.py OUT.png RUN_DIR [RUN_DIR ...]

Left: each run's `0var_heldout_pair` accuracy from its training log (`metrics.jsonl`: 500 sequences
every 100 steps; a rolling median of 11 evaluations), against the 0.99
floor of the foundation issue. Right: on the shipped series of the reference run, the exhaustive 0-var
held-out set split into doubled pairs (n, n) and the rest, per checkpoint, with the weights-only
addition accuracy (`ov2_mlp2_accuracy`) on the held-out doubles.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.data.tokens import POS_LHS, POS_RHS
from assignadd.fileio import atomic_write
from assignadd.hypotheses.measures.circuits import ov2_mlp2_accuracy
from assignadd.reports.png import REPORT_DPI, png_bytes, pyplot
from assignadd.training.train import accuracy

WINDOW = 11  # evaluations in the rolling median of the training-log curves


def log_curve(run: Path, pool: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = np.array([r["step"] for r in rows])
    acc = np.array([r["accuracy"][pool] for r in rows])
    half = WINDOW // 2
    padded = np.pad(acc, half, mode="edge")
    return steps, np.median(np.stack([padded[i : i + len(acc)] for i in range(WINDOW)]), axis=0)


def series_split(task: Task) -> dict[str, list[float]]:
    tokens, labels = task.exhaustive_0var_heldout()
    doubled = tokens[:, POS_LHS] == tokens[:, POS_RHS]
    N = task.vocab.modulus
    held = torch.zeros(N, N, dtype=torch.bool)
    for a, b in task.heldout_pairs:
        held[a, b] = True
    diag = held & torch.eye(N, dtype=torch.bool)
    out = {"step": [], "doubled": [], "other": [], "weights_only_doubled": []}
    for path in assignadd.reference_series():
        model = load_checkpoint(path)
        with torch.no_grad():
            _, correct = ov2_mlp2_accuracy(model)
        out["step"].append(int(path.stem.split("_")[-1]))
        out["doubled"].append(accuracy(model, tokens[doubled], labels[doubled]))
        out["other"].append(accuracy(model, tokens[~doubled], labels[~doubled]))
        out["weights_only_doubled"].append(float(correct[diag].float().mean()))
    return out


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit(__doc__)
    plt = pyplot()
    out, runs = Path(argv[0]), [Path(a) for a in argv[1:]]
    torch.set_num_threads(1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    colors = plt.cm.tab10(np.arange(len(runs)))
    for run, color in zip(runs, colors):
        seed = json.loads((run / "run.json").read_text())["train"]["seed"]
        steps, acc = log_curve(run, "0var_heldout_pair")
        left.plot(steps, acc, "-", color=color, linewidth=1.2, label=f"seed {seed}")
    left.axhline(0.99, color="#d62728", linestyle="--", linewidth=1, label="floor 0.99")
    left.set_ylim(0.95, 1.002)
    left.set_xlabel("training step")
    left.set_ylabel(f"accuracy (rolling median of {WINDOW} evaluations)")
    left.set_title("0var_heldout_pair over training, every run")
    left.legend(fontsize=7, ncol=2, loc="lower right")
    split = series_split(Task())
    right.plot(split["step"], split["other"], "o-", color="#1f77b4", label="held-out pairs n ≠ m (1025)")
    right.plot(split["step"], split["doubled"], "s-", color="#d62728", label="held-out doubled pairs (n, n) (20)")
    right.plot(
        split["step"],
        split["weights_only_doubled"],
        "^:",
        color="#7f7f7f",
        label="weights-only addition on the doubled pairs",
    )
    right.set_xlabel("training step (shipped series of the reference run, seed 42)")
    right.set_ylabel("accuracy, exhaustive 0-var held-out set")
    right.set_title("Where the held-out errors are")
    right.legend(fontsize=7, loc="lower right")
    atomic_write(out, png_bytes(fig, dpi=REPORT_DPI))
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
