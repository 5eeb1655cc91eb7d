"""A break of the adding MLP's output: two key frequencies' neurons exchange what they write.

The neurons whose pre-activation is best explained by key frequency k1 (FVE >= 0.5 on the operand grid)
are paired in order with those of k2, and each pair's rows of W_out are swapped: every neuron still
computes its own Fourier feature, and writes it where the unembedding expects the other frequency. The
claim about the MLP reads its output on the model's own grid and cannot see it; the interface between
the MLP and the unembedding must (docs/reregistrations/interfaces_trained_bar_2026-12-07.md).
"""

from __future__ import annotations

import copy

import torch

from assignadd.hypotheses.measures import fourier
from assignadd.model import AssignAddTransformer
from assignadd.model.components import PAPER, Components


def frequency_groups(model: AssignAddTransformer, *, components: Components = PAPER) -> dict[int, list[int]]:
    """Key frequency -> the neurons it explains best (FVE >= 0.5), in index order."""
    grid = fourier.grids(model, components=components)
    scale = fourier.mlp_input_scale(model, grid[fourier.RESID_MID2], components=components)
    r = fourier.neuron_fve(grid[fourier.MLP2_PRE], scale)
    key = fourier.key_frequencies(model, grid=grid, components=components)
    single = r["fve"] >= 0.5
    return {k: r["units"][(r["best_k"] == k) & single].tolist() for k in key}


def frequency_outputs_exchanged(
    model: AssignAddTransformer, k1: int, k2: int, *, components: Components = PAPER
) -> AssignAddTransformer:
    """A copy of ``model`` with the W_out rows of k1's and k2's neurons swapped pairwise (as many pairs as
    the smaller group has); every other weight bit-identical."""
    groups = frequency_groups(model, components=components)
    pairs = min(len(groups[k1]), len(groups[k2]))
    a, b = torch.tensor(groups[k1][:pairs]), torch.tensor(groups[k2][:pairs])
    mutated = copy.deepcopy(model)
    with torch.no_grad():
        W_out = mutated.blocks[components.mlp_layer].mlp.W_out
        rows_a, rows_b = W_out[a].clone(), W_out[b].clone()
        W_out[a], W_out[b] = rows_b, rows_a
    return mutated
