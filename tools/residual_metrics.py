"""The basis-dependent items of three claims, read in metrics a residual change of basis leaves unchanged.

    python tools/residual_metrics.py [CKPT] [--n 300] [--readings own,task,task_to_reader,mlp_reader]

Without LayerNorm, x -> x A of the residual stream is the same function (``residual_change_of_basis``),
yet ``ov1_transmits_variables``, ``ov2_transmits_numbers``, ``resid_mid_matches_constant_run`` and the
Fourier items' nearest-centroid read-out and random placebo measure norms and angles in the residual's
own coordinates. Each item is computed here, unchanged, on the model written in another basis B(model)
that is itself a function of the model, so that B(model A) = A^-1 B(model) R, R a rotation (which the
items respect). The readings:

- ``own``: the residual's own coordinates (the registered items);
- ``task``: B whitens the second moment of every residual site over the task's sequences (0-, 1- and
  2-var training pools, every position);
- ``task_to_reader``: the same from the sites up to the component's reader only (Layer 1's items:
  resid_pre of both layers; Layer 2's: and resid_mid of Layer 2; the MLP's: every site), so that no
  later component enters;
- ``mlp_reader``: Euclidean after x -> x W, W the Layer-2 MLP's W_in with each neuron's column divided
  by its pre-activation's RMS on the task (so the metric is also blind to the MLP's own rescalings);
  Layer 2's and the MLP's items only.

Printed as a Markdown table, one row per model and reading: the reference, the reference in five other
bases, each break of Layer 1, Layer 2 and the MLP, and a re-initialised model. The columns: share of
OV_1's placements below the variables' gain (bar 0.99), OV_2's number gain (bar 2), the matched cosine
(bar 0.9), and the Fourier items' kept accuracy (bar 0.9), excluded drop (bar 0.8) and random-direction
drop (the control: acts, and stays below 0.8). Nothing here is registered.
"""

from __future__ import annotations

import argparse

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses.measures import fourier, local, residual
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions.mutants import MUTANTS, random_invertible, residual_change_of_basis, span_stretch
from assignadd.model import AssignAddTransformer
from assignadd.random_streams import torch_generator

SITES = ("blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid", "blocks.1.hook_resid_post")
UPTO = {"task": (4, 4, 4), "task_to_reader": (2, 3, 4)}  # sites read for (Layer 1, Layer 2, the MLP)
BROKEN = ("layer1_previous_token", "layer2_identity_qk", "layer2_ov", "layer2_mlp")


def _sqrt_and_inverse(S: torch.Tensor, inverse: bool) -> torch.Tensor:
    e, V = torch.linalg.eigh(S)
    e = e.clamp(min=1e-12 * float(e.max()))
    return V @ torch.diag(e.rsqrt() if inverse else e.sqrt())


def task_basis(model, tokens: torch.Tensor, sites: int) -> torch.Tensor:
    """B (d, d): x B has identity second moment over the first ``sites`` residual sites."""
    names = SITES[:sites]
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    X = torch.cat([cache[k].reshape(-1, model.cfg.d_model) for k in names]).double()
    return _sqrt_and_inverse(X.T @ X / len(X), inverse=True)


def mlp_reader_basis(model, tokens: torch.Tensor) -> torch.Tensor:
    """B (d, d) with B B^T = W W^T, W the MLP's W_in with each column divided by its pre-activation's RMS."""
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.1.mlp.hook_pre")
    rms = cache["blocks.1.mlp.hook_pre"].double().pow(2).mean((0, 1)).sqrt().clamp(min=1e-12)
    W = model.blocks[1].mlp.W_in.detach().double() / rms
    return _sqrt_and_inverse(W @ W.T, inverse=False)


def readings(model, reading: str, tokens: torch.Tensor) -> tuple:
    """The model as (Layer 1's, Layer 2's, the MLP's) items read it."""
    if reading == "own":
        return model, model, model
    if reading == "mlp_reader":
        m = residual_change_of_basis(model, mlp_reader_basis(model, tokens))
        return None, m, m
    return tuple(residual_change_of_basis(model, task_basis(model, tokens, k)) for k in UPTO[reading])


def row(model, reading: str, task: Task, n: int) -> list[str]:
    tokens = torch.cat([task.pool(p, n, seed=7)[0] for p in ("0var_train", "1var_train", "2var_train")])
    m1, m2, m3 = readings(model, reading, tokens)
    cells = [
        "" if m1 is None else f"{float(local.ov1_variables_against_placements(m1, seed=0)[0].double().mean()):.3f}"
    ]
    cells.append(f"{local.ov2_number_transmission(m2):.2f}")
    pairs = torch.cat([task.pool("1var_train", n // 2, seed=0)[0], task.pool("2var_train", n // 2, seed=0)[0]])
    matched = residual.matched_vs_mismatched(m2, pairs, 0, basis=local.ov2_number_basis(m2))["matched"]
    cells.append(f"{float(matched.mean()):.3f}")
    pools = [task.pool(p, n // 2, seed=0) for p in ("0var_train", "0var_heldout_pair")]
    e = fourier.key_frequency_edits(m3, torch.cat([p[0] for p in pools]), torch.cat([p[1] for p in pools]), seed=0)
    clean = e["clean"].double()
    cells.append(f"{float((e['kept'].double() * clean).sum() / clean.sum().clamp(min=1)):.3f}")
    cells += [f"{float(clean.mean() - e[k].double().mean()):.3f}" for k in ("excluded", "random_removed")]
    return cells


def models(reference, task: Task) -> dict:
    v, W_E = task.vocab, reference.embed.W_E.detach()
    variables, numbers = W_E[v.first_var : v.first_var + v.n_vars], W_E[: v.modulus]
    d = reference.cfg.d_model
    bases = {
        "variables x10": span_stretch(variables, 10.0),
        "numbers x10": span_stretch(numbers, 10.0),
        "numbers x0.1": span_stretch(numbers, 0.1),
        "invertible, condition 30": random_invertible(d, torch_generator(0, "residual metrics"), spread=30.0),
        "invertible, condition 100": random_invertible(d, torch_generator(1, "residual metrics"), spread=100.0),
    }
    out = {"reference": reference} | {k: residual_change_of_basis(reference, A) for k, A in bases.items()}
    out |= {
        m.name: build_mutant(m.name, reference, 0)
        for m in MUTANTS.values()
        if m.kind == "break" and m.component in BROKEN
    }
    return out | {"re-initialised": AssignAddTransformer(reference.cfg, seed=10_000).eval()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--readings", default="own,task,task_to_reader,mlp_reader")
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = Task()
    print("| model | reading | ov1 share | ov2 gain | matched cos | Fourier kept | excluded drop | random drop |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, model in models(load_checkpoint(args.checkpoint), task).items():
        for reading in args.readings.split(","):
            print(f"| {name} | {reading} | " + " | ".join(row(model, reading, task, args.n)) + " |", flush=True)


if __name__ == "__main__":
    main()
