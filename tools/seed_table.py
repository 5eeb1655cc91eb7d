"""Measure finished runs against the reference floors (the accuracy floors in checkpoints/SEEDS.md) and write the seeds table.

    python tools/seed_table.py RUN_DIR [RUN_DIR ...] > checkpoints/SEEDS.md

Accuracy on every pool of SPEC §1.4 (2000 sequences each, pool seed 0, as assignadd-verify draws
them) and on the two exhaustive sets, of each run's final checkpoint; the exhaustive 0-var held-out set
also split into its doubled pairs (n, n) and the rest, where every run's held-out errors concentrate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from assignadd import Task, load_checkpoint
from assignadd.data import POOL_NAMES
from assignadd.data.tokens import POS_LHS, POS_RHS
from assignadd.training.train import accuracy

FLOORS = {
    "0var_heldout_pair": 0.99,
    "1var_heldout_pair": 0.99,
    "1var_restricted_slot": 0.99,
    "2var_heldout_pair": 0.97,
    "2var_restricted_1": 0.97,
    "2var_restricted_2": 0.97,
}


def measure(run: Path, task: Task) -> dict:
    model = load_checkpoint(run / "final.pt")
    acc = {name: accuracy(model, *task.pool(name, 2000, seed=0)) for name in POOL_NAMES}
    tokens, labels = task.exhaustive_0var_heldout()
    acc["exhaustive_0var_heldout"] = accuracy(model, tokens, labels)
    doubled = tokens[:, POS_LHS] == tokens[:, POS_RHS]
    acc["exhaustive_0var_heldout (n, n)"] = accuracy(model, tokens[doubled], labels[doubled])
    acc["exhaustive_0var_heldout (n ≠ m)"] = accuracy(model, tokens[~doubled], labels[~doubled])
    acc["exhaustive_2var_union"] = accuracy(model, *task.exhaustive_2var_union())
    return acc


def main(runs: list[str]) -> None:
    task = Task()
    cols = list(POOL_NAMES) + [
        "exhaustive_0var_heldout",
        "exhaustive_0var_heldout (n, n)",
        "exhaustive_0var_heldout (n ≠ m)",
        "exhaustive_2var_union",
    ]
    print("| run seed | meets floors | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for run in map(Path, runs):
        seed = json.loads((run / "run.json").read_text())["train"]["seed"]
        acc = measure(run, task)
        short = [f"{k} {acc[k]:.4f} < {v}" for k, v in FLOORS.items() if acc[k] < v]
        verdict = "yes" if not short else "no: " + "; ".join(short)
        print(f"| {seed} | {verdict} | " + " | ".join(f"{acc[c]:.4f}" for c in cols) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
