"""Candidate metrics for ``ov1_transmits_variables`` that a residual change of basis leaves unchanged.

    python tools/ov1_invariant_metrics.py [CKPT] [--draws 1000]

The registered item (``hypotheses.measures.local.ov1_variables_against_placements``) measures OV_1's gain
for the variables against random placements in the residual stream's own coordinates, which the
function does not fix (docs/mutation_results/README.md, "Residual change of basis"). Two candidates,
each the same gain and null with OV_1 seen through other coordinates, printed beside it for the
reference, a re-initialised model, the same model in three other bases and every mutant of Layer 1 and
Layer 2 (gain, share of placements below it, placements' 99th percentile):

- ``whitened``: input z = x P^T M^-1/2 (P, M: basis and second moment of every input Layer 1 can read),
  output the same with what Layer 2 can read;
- ``readers``: input whitened so, output read through Layer 2's own W_Q, W_K, W_V (x A A^-1 W = x W).

Neither is registered: a candidate must keep every break the registered item catches, fail on the
re-initialised model, and leave every symmetry mutant's value as it was, before it replaces the item.
"""

from __future__ import annotations

import argparse

import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses.measures.local import ov1_variables_against_placements
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions.mutants import (
    MUTANTS,
    layer1_inputs,
    layer2_inputs,
    random_invertible,
    residual_change_of_basis,
    span_basis,
    span_stretch,
)
from assignadd.model import AssignAddTransformer
from assignadd.random_streams import torch_generator


def _power(M: torch.Tensor, p: float) -> torch.Tensor:
    w, V = torch.linalg.eigh(M)
    return V @ torch.diag(w.clamp(min=1e-12 * float(w.max())) ** p) @ V.T


def _whitening(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(P (q, d) a basis of the span of ``rows``, M (q, q) their second moment in it)."""
    P = span_basis(rows.detach().double())[0]
    Y = rows.detach().double() @ P.T
    return P, Y.T @ Y / len(Y)


def gain_against_placements(B: torch.Tensor, E_in: torch.Tensor, seed: int, draws: int) -> tuple[float, float, float]:
    """The registered gain and null of an operator B (q, out) for embeddings E_in (k, q) in its input
    coordinates: (gain, share of placements below it, the placements' 99th percentile)."""
    S, Vh = torch.linalg.svd(E_in, full_matrices=False)[1:]
    keep = S > 1e-5 * S.max()
    S, Vh = S[keep], Vh[keep]
    q, k, total = B.shape[0], len(S), B.pow(2).sum()

    def gains(bases):  # bases (..., k, q)
        SB = bases @ B
        placed = (S[..., :, None] * SB).pow(2).sum((-2, -1)) / S.pow(2).sum()
        return placed / ((total - SB.pow(2).sum((-2, -1))) / (q - k))

    g = float(gains(Vh))
    Q = torch.linalg.qr(
        torch.randn(draws, q, k, generator=torch_generator(seed, "ov1 random placements"), dtype=torch.float64)
    ).Q
    null = gains(Q.transpose(1, 2))
    return g, float((null < g).double().mean()), float(null.quantile(0.99))


def candidates(model, seed: int = 0, draws: int = 1000) -> dict[str, tuple[float, float, float]]:
    first = model.cfg.first_var
    E = model.embed.W_E[first : first + model.cfg.n_vars].detach().double()
    E = E - E.mean(0)
    P, M = _whitening(layer1_inputs(model))
    Po, Mo = _whitening(layer2_inputs(model))
    a, b = model.blocks[0].attn, model.blocks[1].attn
    OV = (a.W_V[0] @ a.W_O[0]).detach().double()
    readers = torch.cat([b.W_Q[0], b.W_K[0], b.W_V[0]], 1).detach().double()
    E_in, into = E @ P.T @ _power(M, -0.5), _power(M, 0.5) @ P @ OV
    below, g, null = ov1_variables_against_placements(model, seed=seed, draws=draws)
    return {
        "registered": (g, float(below.double().mean()), float(null.quantile(0.99))),
        "whitened": gain_against_placements(into @ Po.T @ _power(Mo, -0.5), E_in, seed, draws),
        "readers": gain_against_placements(into @ readers, E_in, seed, draws),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", nargs="?", default=str(assignadd.reference_checkpoint()))
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    ref, v = load_checkpoint(args.checkpoint), Task().vocab
    W_E = ref.embed.W_E.detach()
    models = {
        "unbroken": ref,
        "re-initialised": AssignAddTransformer(ref.cfg, seed=1),
        "basis: invertible, condition <= 4": residual_change_of_basis(
            ref, random_invertible(ref.cfg.d_model, torch_generator(0, "ov1 metrics basis"))
        ),
        "basis: variables x10": residual_change_of_basis(
            ref, span_stretch(W_E[v.first_var : v.first_var + v.n_vars], 10.0)
        ),
        "basis: numbers x10": residual_change_of_basis(ref, span_stretch(W_E[: v.modulus], 10.0)),
    }
    for name, m in MUTANTS.items():
        if m.component in ("layer1_previous_token", "layer2_identity_qk", "layer2_ov"):
            models[f"{m.kind}: {name}"] = build_mutant(name, ref, seed=0)
    print("| model | registered | whitened | readers |")
    print("|---|---|---|---|")
    for name, model in models.items():
        cells = [f"{g:.3g} ({share:.3f}; {q99:.3g})" for g, share, q99 in candidates(model, draws=args.draws).values()]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
