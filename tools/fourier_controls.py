"""`fourier_neurons` under two of its choices, registered against the alternative, on the reference's models.

    python tools/fourier_controls.py placebo [--n 500] [--series] [--series-n 2000]
    python tools/fourier_controls.py readout [--n 500]

``placebo``: the control `placebo_directions` drawn as registered (the residual stream's metric on the
task, ``measures.fourier.random_directions_part``) and as before 2026-12-07 (isotropic in the residual's
own coordinates), on the reference, every registry mutant, a re-initialised model and the two hand-built
models of tests/test_fourier_neurons.py; with ``--series``, every checkpoint of the shipped series.
(docs/reregistrations/fourier_placebo_task_metric_2026-12-07.md.)

``readout``: the answer read as registered (the nearest answer centroid at the unembedding's input, in the
unembedding's metric or the task's, docs/reregistrations/fourier_readout_basis_free_2026-12-08.md) and as
before 2026-12-08 (Euclidean in the residual's own coordinates), on the reference in three other bases, the
Layer-2 MLP's and the unembedding's registry mutants, W_U with the answer directions of its input projected
out (a break of W_U alone) and the hand-built Fourier model; the registered columns also give each metric's
reading of the kept and excluded arms.

Printed as Markdown tables: the claim's verdict, `key_frequencies_kept`, `key_frequencies_excluded` and the
control `placebo_directions` (the drop it causes, which must stay below 0.8).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses import Context, run_all
from assignadd.hypotheses.measures import fourier
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions import random_subspace
from assignadd.interventions.mutants import MUTANTS, residual_change_of_basis
from assignadd.model import AssignAddTransformer

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from residual_basis import bases  # noqa: E402
from test_fourier_neurons import answer_directions_cut, planted_model  # noqa: E402


def isotropic_part(deviation, task_rows, k, seed):
    """The draw before 2026-12-07: k directions isotropic in the residual's own coordinates."""
    Q = random_subspace(deviation.shape[-1], k, seed, label="placebo directions").to(deviation.dtype)
    return (deviation @ Q.T) @ Q


def euclidean_answer(post, centroids, metric):
    """The reading before 2026-12-08: the nearest centroid in the residual's own coordinates (each metric
    replaced by the identity, so that both readings are that one)."""
    return torch.cdist(post.double(), centroids).argmin(-1)


@contextlib.contextmanager
def patched(name: str, value):
    old = getattr(fourier, name)
    setattr(fourier, name, value)
    try:
        yield
    finally:
        setattr(fourier, name, old)


def cells(model, n: int, by_metric: bool = False) -> list[str]:
    r = run_all(Context(model, Task(), seed=0, n=n), only=["fourier_neurons"])[0]
    ev = {e.name: e for e in r.evidence}
    kept, excluded = ev["key_frequencies_kept"].measurement, ev["key_frequencies_excluded"].measurement
    control = ev["key_frequencies_excluded"].controls["placebo_directions"]
    row = [
        r.verdict,
        f"{kept.value:.3f}",
        f"{excluded.value:.3f}",
        f"{control.value:.3f} [{control.low:.3f}, {control.high:.3f}]",
    ]
    if by_metric:
        read = [m.extra["read_by_metric_edited"] for m in (kept, excluded)]
        row.append(", ".join(f"{r['unembedding']:.3f} / {r['task']:.3f}" for r in read))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("placebo", "readout"))
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--series", action="store_true", help="placebo: also every checkpoint of the shipped series")
    parser.add_argument("--series-n", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    reference = load_checkpoint(assignadd.reference_checkpoint())
    if args.what == "placebo":
        models = {"reference": reference, "re-initialised": AssignAddTransformer(seed=1)}
        models.update({name: build_mutant(name, reference, 0) for name in MUTANTS})
        models["hand-built, Fourier"] = planted_model(True)
        models["hand-built, random features"] = planted_model(False)
        runs = [(name, m, args.n) for name, m in models.items()]
        if args.series:
            runs += [(p.stem, load_checkpoint(p), args.series_n) for p in assignadd.reference_series()]
        arms = (("registered", fourier.random_directions_part), ("isotropic", isotropic_part))
    else:
        models = {"reference": reference}
        models.update(
            {k: residual_change_of_basis(reference, A) for k, A in bases(reference, Task()).items() if "x10" in k}
        )
        models["invertible, condition <= 100"] = residual_change_of_basis(
            reference, bases(reference, Task())["invertible, condition <= 100"]
        )
        for name, mutant in MUTANTS.items():
            if mutant.component in ("layer2_mlp", "unembedding"):
                models[name] = build_mutant(name, reference, 0)
        models["W_U without the answer directions"] = answer_directions_cut(reference)
        models["hand-built, Fourier"] = planted_model(True)
        runs = [(name, m, args.n) for name, m in models.items()]
        arms = (("registered", fourier.nearest_answer), ("Euclidean", euclidean_answer))
    name_of = "random_directions_part" if args.what == "placebo" else "nearest_answer"
    columns = [f"{arm}: {what}" for arm, _ in arms for what in ("verdict", "kept", "excluded", "placebo_directions")]
    if args.what == "readout":
        columns.insert(4, "kept, excluded arm by metric (unembedding / task)")
    print("| model | " + " | ".join(columns) + " |")
    print("|---|" + "---|---:|---:|---|" * len(arms) + ("---|" if args.what == "readout" else ""))
    for name, model, n in runs:
        row = [name]
        for i, (_, fn) in enumerate(arms):
            with patched(name_of, fn):
                row += cells(model, n, by_metric=args.what == "readout" and i == 0)
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
