"""Every claim on a checkpoint written in other bases of its residual stream (the same function).

    python tools/residual_basis.py [CKPT] [--n 1000] [--only ID,...]

Each change of basis x -> x A (``interventions.mutants.residual_change_of_basis``) leaves every answer as
it was; a claim that changes its verdict on one is wrong there. Printed as a Markdown table: per basis,
the largest change of an answer's log-probability at `=` over 2,000 training sequences, and each claim's
verdict with its reason where it does not pass. The bases: a Haar rotation, random invertible matrices of
condition <= 4, 30 and 100, and the variables' or the numbers' embedding span stretched 3x, 10x or 0.1x
(``span_stretch``). docs/mutation_results/README.md, "Residual change of basis", holds a run.
"""

from __future__ import annotations

import argparse

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import REGISTRY, run_all
from assignadd.hypotheses.base import Context
from assignadd.interventions.mutants import (
    random_invertible,
    random_rotation,
    residual_change_of_basis,
    span_stretch,
)
from assignadd.random_streams import torch_generator


def bases(model, task: Task) -> dict[str, torch.Tensor]:
    v, W_E = task.vocab, model.embed.W_E.detach()
    variables, numbers = W_E[v.first_var : v.first_var + v.n_vars], W_E[: v.modulus]
    d = model.cfg.d_model
    return {
        "rotation": random_rotation(d, torch_generator(0, "residual basis rotation")).double(),
        "invertible, condition <= 4": random_invertible(d, torch_generator(0, "residual basis invertible")),
        "invertible, condition <= 30": random_invertible(
            d, torch_generator(0, "residual basis invertible 30"), spread=30.0
        ),
        "invertible, condition <= 100": random_invertible(
            d, torch_generator(0, "residual basis invertible 100"), spread=100.0
        ),
        "variables x3": span_stretch(variables, 3.0),
        "variables x10": span_stretch(variables, 10.0),
        "variables x0.1": span_stretch(variables, 0.1),
        "numbers x10": span_stretch(numbers, 10.0),
        "numbers x0.1": span_stretch(numbers, 0.1),
    }


def cell(result) -> str:
    """The verdict, and for one that is not a pass the claim's reason."""
    return result.verdict if result.verdict == "pass" else f"{result.verdict}: {result.reason}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--only", default=",".join(REGISTRY))
    args = parser.parse_args()
    claims = args.only.split(",")
    model, task = load_checkpoint(args.checkpoint), Task()
    tokens = task.pool("1var_train", 2000, seed=1)[0]
    with torch.no_grad():
        clean = model(tokens)[:, -1].log_softmax(-1)
    rows = {"unbroken": (0.0, run_all(Context(model, task, seed=0, n=args.n), claims))}
    for name, A in bases(model, task).items():
        mutated = residual_change_of_basis(model, A)
        with torch.no_grad():
            moved = float((mutated(tokens)[:, -1].log_softmax(-1) - clean).abs().max())
        rows[name] = (moved, run_all(Context(mutated, task, seed=0, n=args.n), claims))
    print("| basis | largest log-probability change | " + " | ".join(f"`{c}`" for c in claims) + " |")
    print("|---|---:|" + "---|" * len(claims))
    for name, (moved, results) in rows.items():
        print(f"| {name} | {moved:.1e} | " + " | ".join(cell(r) for r in results) + " |")


if __name__ == "__main__":
    main()
