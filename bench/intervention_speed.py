"""What a typical activation-patching sweep costs against a plain forward pass, for both backends.

The sweep: resid_pre of both layers × all 16 positions, patched one cell at a time from a clean batch
into a corrupted one (2000 sequences each), scored per example by logit difference; 32 patched
forwards plus one clean forward for the source activations. Ideal cost: 33 plain forwards, so
"overhead per forward" = sweep time / (33 × plain forward) shows what hooks, masks, the guard and
nnsight's tracing add. One thread, as on the 2-core development machine; record figures in
docs/interventions.md.

    python bench/intervention_speed.py [--n 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from assignadd.data import Task
from assignadd.interventions import logit_diff, patch_sweep
from assignadd.model import AssignAddTransformer
from assignadd.model.hooks import act_name


def timed(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="sequences per batch")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats (median reported)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    model = AssignAddTransformer(seed=0).eval()
    task = Task()
    clean, clean_labels = task.pool("1var_train", args.n, seed=1)
    corrupted, corrupted_labels = task.pool("1var_train", args.n, seed=2)
    hooks = [act_name("resid_pre", layer) for layer in range(model.cfg.n_layers)]
    positions = list(range(model.cfg.n_ctx))
    n_forwards = len(hooks) * len(positions) + 1

    def metric(logits):
        return logit_diff(logits, clean_labels, corrupted_labels)

    def plain():
        with torch.no_grad():
            model(corrupted)

    plain_s = timed(plain, args.repeats)
    print(
        f"{args.n} sequences, 1 thread; sweep = {len(hooks)} hooks x {len(positions)} positions "
        f"= {n_forwards - 1} patched forwards + 1 source forward"
    )
    print(f"plain forward: {plain_s * 1e3:.1f} ms")
    for backend in ("tl", "nnsight"):
        sweep_s = timed(
            lambda: patch_sweep(model, clean, corrupted, hooks, positions, metric, backend=backend),
            max(1, args.repeats - 1),
        )
        print(
            f"{backend:8s} sweep: {sweep_s:.2f} s = {sweep_s / plain_s:.1f} plain forwards; "
            f"overhead per forward {sweep_s / (n_forwards * plain_s):.2f}x"
        )


if __name__ == "__main__":
    main()
