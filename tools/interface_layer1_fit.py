"""The interface check at Layer 1's output, fitted on every break mutant, whatever the later interfaces say.

    python tools/interface_layer1_fit.py [CKPT] [--iterations 300] [--only NAME,...]

For each break mutant of the checkpoint (default: the bundled reference), ``ov1_to_layer2``'s plain answers
and its recoded answers (hypotheses/interfaces.py: pools of 1,000 per training pool, the interface's own
fit size and draw) with the L-BFGS fit capped at ``--iterations``, printed as a Markdown table with the fit's
CPU time. ``check_all`` fits this interface only where no later one restores the answers; this table
fits it everywhere, to show which breaks a recoding of what Layer 1 writes can repair
(docs/reregistrations/previous_token_head_basis_free_2026-12-07.md holds a run).
"""

from __future__ import annotations

import argparse
import time

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import interfaces
from assignadd.hypotheses.base import Context
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions.mutants import MUTANTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--iterations", type=int, default=interfaces.LBFGS_ITERATIONS["layer1_out"])
    parser.add_argument("--only", default=None, help="comma-separated mutant names (default: every break)")
    args = parser.parse_args()
    interfaces.LBFGS_ITERATIONS = {**interfaces.LBFGS_ITERATIONS, "layer1_out": args.iterations}
    names = args.only.split(",") if args.only else [n for n, m in MUTANTS.items() if m.kind == "break"]
    model = load_checkpoint(args.checkpoint)
    located = Context(model, Task(), seed=0, n=1000).located
    [layer1] = [i for i in interfaces.declared() if i.output == "layer1_out"]
    print(f"| mutant | plain | recoded, {args.iterations} iterations [95% CI] | fit CPU s |\n|---|---:|---:|---:|")
    for name in names:
        mutated = build_mutant(name, model, 0, components=located.components)
        ctx = Context(mutated, Task(), seed=0, n=1000)
        ctx.pin(located)
        tokens, labels = interfaces._pool(ctx)
        fit_tokens, fit_labels = interfaces._fit_pool(ctx, layer1)
        with torch.no_grad():
            acts = interfaces._activations(mutated, tokens, ctx.components)
            fit_acts = interfaces._activations(mutated, fit_tokens, ctx.components)
        plain = interfaces.rate(acts["answers"].argmax(-1) == labels)
        start = time.process_time()
        correct = interfaces.recoded_accuracy(
            mutated, layer1, (fit_tokens, fit_labels, fit_acts), (tokens, labels, acts), components=ctx.components
        )
        cpu = time.process_time() - start
        r = interfaces.rate(correct)
        print(f"| `{name}` | {plain.value:.3f} | {r.value:.3f} [{r.low:.3f}, {r.high:.3f}] | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
