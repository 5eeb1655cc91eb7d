"""Two breaks of the reference found by building mutants outside the registry: the first is judged right
since the interfaces' localization of 2026-12-07 (tests/test_interfaces.py), the second still wrongly (a
strict expected failure in tests/test_known_wrong_cells.py). Each changes one component's weights; every
other weight is bit-identical.

- ``layer1_output_shifted``: Layer 1's b_O plus a constant vector (a random direction, seeded, of norm
  ``scale`` times the mean row norm of its W_O): what Layer 1 writes moves by the same vector at every
  position, an affine recoding of its output (undone by an offset alone).
- ``layer2_values_lose_numbers``: Layer 2's W_V with the ``k`` leading principal directions of the centred
  number embeddings projected out of its input side: the values carry less and less of each number.
"""

from __future__ import annotations

import copy

import torch


def layer1_output_shifted(model, scale: float = 3.0, seed: int = 0):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        attn = broken.blocks[0].attn
        direction = torch.randn(attn.b_O.shape, generator=torch.Generator().manual_seed(seed))
        attn.b_O.add_(direction / direction.norm() * scale * attn.W_O[0].norm(dim=1).mean())
    return broken


def layer2_values_lose_numbers(model, k: int = 12):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        E = broken.embed.W_E[: broken.cfg.d_vocab_out].double()
        _, _, Vh = torch.linalg.svd(E - E.mean(0), full_matrices=False)
        keep = torch.eye(E.shape[1], dtype=torch.float64) - Vh[:k].T @ Vh[:k]
        W_V = broken.blocks[1].attn.W_V
        W_V.copy_(torch.einsum("ij,hjk->hik", keep, W_V.double()).float())
    return broken
