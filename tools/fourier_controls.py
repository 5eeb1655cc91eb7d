"""`fourier_neurons` under two of its choices, registered against the alternative, on the reference's models.

    python tools/fourier_controls.py placebo [--n 500] [--series] [--series-n 2000]
    python tools/fourier_controls.py readout [--n 500]

``placebo``: the control `placebo_directions` drawn as registered (the residual stream's metric on the
task, ``measures.fourier.random_directions_part``) and as before 2026-12-07 (isotropic in the residual's
own coordinates), on the reference, every registry mutant, a re-initialised model and the two hand-built
models of tests/test_fourier_neurons.py; with ``--series``, every checkpoint of the shipped series.
(docs/reregistrations/fourier_placebo_task_metric_2026-12-07.md.)

``readout``: the answer read as registered (the nearest answer centroid at the unembedding's input,
Euclidean) and as the nearest centroid of the logits centred over the classes (through W_U: the same in
every basis of the residual stream), on the reference in three other bases, the Layer-2 MLP's and the
unembedding's registry mutants, and W_U with the answer directions of its input projected out (a break of
W_U alone). (docs/mutation_results/README.md, "The task's own metric".)

Printed as Markdown tables: the claim's verdict, `key_frequencies_kept`, `key_frequencies_excluded` and the
control `placebo_directions` (the drop it causes, which must stay below 0.8).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import inspect
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
from test_fourier_neurons import planted_model  # noqa: E402


def isotropic_part(deviation, task_rows, k, seed):
    """The draw before 2026-12-07: k directions isotropic in the residual's own coordinates."""
    Q = random_subspace(deviation.shape[-1], k, seed, label="placebo directions").to(deviation.dtype)
    return (deviation @ Q.T) @ Q


def _logit_readout_edits():
    """``key_frequency_edits`` with the answer read among centred logits (same arms, same edits)."""
    src = inspect.getsource(fourier.key_frequency_edits)
    src = src.replace(
        "centroids = answer_centroids(model, grid, vocab, components=components)",
        "centroids = answer_centroids(model, grid, vocab, components=components)\n"
        "    W_U, b_U = model.unembed.W_U.detach().double(), model.unembed.b_U.detach().double()\n"
        "    centroids = centroids @ W_U + b_U\n"
        "    centroids = centroids - centroids.mean(-1, keepdim=True)",
    )
    src = src.replace(
        "out[arm] = torch.cdist(post.double(), centroids).argmin(-1) == labels",
        "logits = post.double() @ W_U + b_U\n"
        "        out[arm] = torch.cdist(logits - logits.mean(-1, keepdim=True), centroids).argmin(-1) == labels",
    )
    namespace = dict(vars(fourier))
    exec(compile(src, "fourier_controls", "exec"), namespace)
    return namespace["key_frequency_edits"]


@contextlib.contextmanager
def patched(name: str, value):
    old = getattr(fourier, name)
    setattr(fourier, name, value)
    try:
        yield
    finally:
        setattr(fourier, name, old)


def cells(model, n: int) -> list[str]:
    r = run_all(Context(model, Task(), seed=0, n=n), only=["fourier_neurons"])[0]
    ev = {e.name: e for e in r.evidence}
    kept, excluded = ev["key_frequencies_kept"].measurement, ev["key_frequencies_excluded"].measurement
    control = ev["key_frequencies_excluded"].controls["placebo_directions"]
    return [
        r.verdict,
        f"{kept.value:.3f}",
        f"{excluded.value:.3f}",
        f"{control.value:.3f} [{control.low:.3f}, {control.high:.3f}]",
    ]


def answer_directions_cut(model):
    """W_U with the answer directions of the unembedding's input (the span of the grid's answer centroids
    about their mean) projected out of its input side: a break of the unembedding alone."""
    D = fourier.answer_centroids(model, fourier.grids(model)).double()
    _, S, Vh = torch.linalg.svd(D - D.mean(0), full_matrices=False)
    P = Vh[S > 1e-6 * S[0]]
    cut = copy.deepcopy(model)
    with torch.no_grad():
        W = cut.unembed.W_U.double()
        cut.unembed.W_U.copy_((W - P.T @ (P @ W)).float())
    return cut


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
        arms = (("registered", fourier.key_frequency_edits), ("centred logits", _logit_readout_edits()))
    name_of = "random_directions_part" if args.what == "placebo" else "key_frequency_edits"
    columns = [f"{arm}: {what}" for arm, _ in arms for what in ("verdict", "kept", "excluded", "placebo_directions")]
    print("| model | " + " | ".join(columns) + " |")
    print("|---|" + "---|---:|---:|---|" * len(arms))
    for name, model, n in runs:
        row = [name]
        for _, fn in arms:
            with patched(name_of, fn):
                row += cells(model, n)
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
