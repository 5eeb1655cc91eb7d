"""The interface checks on models that answer their training pools between 0.9 and 0.98.

    python tools/interface_trained_bar.py [CKPT] [--only TEXT]

For the checkpoint (default: the bundled reference), breaks of it that leave its training answers
above 0.9 (two key frequencies' neurons exchanging their W_out rows, ``tests/mlp_breaks.py``; breaks of
Layer 2's scores, ``tests/attention_breaks.py``) and the shipped series' checkpoints from 4,000 to 16,000
steps (healthy and partly trained), printed as a Markdown table: each interface's verdict, the plain
answers and, where fitted, the recoded ones with their lower bound
(docs/reregistrations/interfaces_trained_bar_2026-12-07.md holds a run).
"""

from __future__ import annotations

import argparse

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import interfaces
from assignadd.hypotheses.base import Context
from assignadd.tests.attention_breaks import keys_attract, queries_scaled, slot_positions_suppressed
from assignadd.tests.mlp_breaks import frequency_outputs_exchanged

SERIES = assignadd.reference_checkpoint().parent / "series"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--only", help="only the rows whose name contains this")
    args = parser.parse_args()
    model, task = load_checkpoint(args.checkpoint), Task()
    build = torch.cat([task.pool(p, 1000, seed=1)[0] for p in ("0var_train", "1var_train", "2var_train")])
    models = {
        "unbroken": lambda: model,
        "frequencies 22 and 6 exchange outputs": lambda: frequency_outputs_exchanged(model, 22, 6),
        "frequencies 2 and 6 exchange outputs": lambda: frequency_outputs_exchanged(model, 2, 6),
        "frequencies 22 and 12 exchange outputs": lambda: frequency_outputs_exchanged(model, 22, 12),
        "Layer 2's W_Q x2": lambda: queries_scaled(model, 2.0),
        "Layer 2's W_Q x3": lambda: queries_scaled(model, 3.0),
        "the LHS slot's keys +0.75 nat": lambda: keys_attract(model, "the LHS slot (position 13)", 0.75, build),
        "PAD tokens' keys +1 nat": lambda: keys_attract(model, "PAD tokens", 1.0, build),
        "the operand slots' positions x0.6 in W_K": lambda: slot_positions_suppressed(model, 0.4),
    }
    for step in (4000, 5000, 6000, 7000, 8000, 9000, 10000, 12000, 14000, 16000):
        models[f"series, step {step:,}"] = lambda step=step: load_checkpoint(SERIES / f"step_{step:06d}.pt")
    names = [i.name for i in interfaces.declared()]
    print("| model | " + " | ".join(f"`{n}`" for n in names) + " |\n|---|" + "---|" * len(names))
    for name, build_model in models.items():
        if args.only and args.only not in name:
            continue
        checks = {c["interface"]: c for c in interfaces.check_all(Context(build_model(), task, seed=0, n=500)) or []}
        cells = []
        for n in names:
            c = checks[n]
            cell = f"{c['verdict']}: {c['plain']['value']:.3f}"
            if c["recoded"]:
                cell += f" → {c['recoded']['value']:.3f} (lower {c['recoded']['ci'][0]:.3f})"
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
