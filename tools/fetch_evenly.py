"""How much `=` fetches of each operand, on breaks of the fetching head's keys and queries.

    python tools/fetch_evenly.py [CKPT] [--n 2000] [--only TEXT]

For the checkpoint (default: the bundled reference) and its breaks in ``tests/attention_breaks.py`` (W_Q
scaled; a rank-one edit of W_K giving one kind of key 0.25 to 1 nat more score from `=`; the operand slots'
positions partly or wholly taken out of W_K's input), printed as a Markdown table: the answers on the
held-out pools (exhaustive 0-var held-out set, 1- and 2-var held-out pairs), the mean weight `=` gives the
two operands' values, the mean ratio of the smaller operand weight to the larger,
`eq_attends_to_operand_values` as registered before 2026-12-07 (1- and 2-var sequences, no ratio bar) and
now, and the verdicts of `identity_qk` and `heldout_generalization`.
(docs/reregistrations/identity_qk_fetches_evenly_2026-12-07.md holds a run.)
"""

from __future__ import annotations

import argparse

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import run_all
from assignadd.hypotheses.base import Arm, Context
from assignadd.hypotheses.identity_qk import _fetch
from assignadd.tests.attention_breaks import TARGETS, keys_attract, queries_scaled, slot_positions_suppressed


def accuracy(model, tokens: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(tokens)[:, -1].argmax(-1) == targets).double().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--only", help="only the rows whose name contains this")
    args = parser.parse_args()
    model, task = load_checkpoint(args.checkpoint), Task()
    # The edits are built on sequences of their own (pool seed 1), not on the claims' (seed 0).
    build = torch.cat([task.pool(p, 1000, seed=1)[0] for p in ("0var_train", "1var_train", "2var_train")])
    models = {"unbroken": model}
    for factor in (0.8, 0.6, 0.4, 2.0, 3.0):
        models[f"W_Q x{factor:g}"] = queries_scaled(model, factor)
    for nats in (0.25, 0.5, 0.75, 1.0):
        for target in TARGETS:
            models[f"{target} +{nats:g} nat"] = keys_attract(model, target, nats, build)
    for strength in (0.4, 0.5, 1.0):
        models[f"the operand slots' positions x{1 - strength:g} in W_K"] = slot_positions_suppressed(model, strength)
    if args.only:
        models = {name: m for name, m in models.items() if args.only in name}
    heldout = {
        "0-var held-out (exhaustive)": task.exhaustive_0var_heldout(),
        "1-var held-out": task.pool("1var_heldout_pair", 2000, seed=0),
        "2-var held-out": task.pool("2var_heldout_pair", 2000, seed=0),
    }
    print(
        "| model | " + " | ".join(f"answers, {p}" for p in heldout) + " | weight on the operands | smaller / larger "
        "| item before 2026-12-07 | item now [95% CI] (worst kind) | `identity_qk` | `heldout_generalization` |"
    )
    print("|---|" + "---:|" * (len(heldout) + 4) + "---|---|")
    for name, m in models.items():
        results = run_all(Context(m, task, seed=0, n=args.n), ["identity_qk", "heldout_generalization"])
        [item] = [e for e in results[0].evidence if e.name == "eq_attends_to_operand_values"]
        mx = item.measurement.extra
        # The criterion before 2026-12-07: 1- and 2-var sequences, both operands first with >= 0.125 each.
        before, arm = Context(m, task, seed=0, n=args.n), Arm(m)
        old = float(torch.cat([_fetch(before, arm, p)["ranked"] for p in ("1var_train", "2var_train")]).double().mean())
        answers = " | ".join(f"{accuracy(m, *pool):.3f}" for pool in heldout.values())
        ms = item.measurement
        print(
            f"| {name} | {answers} | {mx['mean_weight_on_operand_values']:.3f} | {mx['mean_smaller_over_larger']:.3f} "
            f"| {old:.3f} | {ms.value:.3f} [{ms.low:.3f}, {ms.high:.3f}] ({mx['worst_pool']}) | {results[0].verdict} | {results[1].verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
