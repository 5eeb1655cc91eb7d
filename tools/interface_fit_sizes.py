"""How much the interface checks' fit size separates recodings from breaks inside a component.

    python tools/interface_fit_sizes.py CKPT [CKPT ...] [--fits 300,500] [--n 1000]

For every break mutant of each checkpoint, the two interfaces at `=` (``ov2_to_mlp``,
``mlp_to_unembedding``; hypotheses/interfaces.py) are checked with the recoding fitted on each number of
sequences per pool in ``--fits`` (the registered values are each interface's ``fit_per_pool``). Printed as a
Markdown table of the recoded answers' share (the verdict where it is not "not a recoding"). A recoding
mutant should be restored above the bar at every fit size, and a break inside a component should stay
below it: the more sequences the fit sees, the better it learns an exact recoding, and the more it can
also repair of a component that no recoding explains. The Layer-1 interface is left out (its fit runs
the whole model, minutes per checkpoint).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import interfaces
from assignadd.hypotheses.base import Context
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions.mutants import MUTANTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--fits", default="300,500", help="sequences fitted per pool, comma-separated")
    parser.add_argument(
        "--n",
        type=int,
        default=1000,
        help="pool size of the context that locates the components (default 1000; the interface checks draw their own pools of 1,000)",
    )
    args = parser.parse_args()
    fits = [int(x) for x in args.fits.split(",")]
    at_eq = [i for i in interfaces.declared() if i.output != "layer1_out"]
    header = ["checkpoint", "mutant"] + [f"{i.name} @ {f}" for i in at_eq for f in fits]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for path in args.checkpoints:
        model = load_checkpoint(path)
        located = Context(model, Task(), seed=0, n=args.n).located
        for name, mutant in MUTANTS.items():
            if mutant.kind != "break":
                continue
            mutated = build_mutant(name, model, 0, components=located.components)
            cells = []
            for interface in at_eq:
                for fit in fits:
                    ctx = Context(mutated, Task(), seed=0, n=args.n)
                    ctx.pin(located)
                    c = interfaces.check(ctx, replace(interface, fit_per_pool=fit))
                    share = c["recoded"]["value"] if c["recoded"] else c["plain"]["value"]
                    note = "" if c["verdict"] == "not a recoding" else f" ({c['verdict']})"
                    cells.append(f"{share:.3f}{note}")
            print(f"| {path} | {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
