"""Component mutants: copies of a trained model with one component of the paper's circuit broken.

Mutation testing for interpretability claims. A mutant changes the weights of exactly one component
(its input space rotated, its attention flattened, a direction projected out, its neurons shuffled)
and keeps every other weight bit-identical. The circuit runs, upstream to downstream (SPEC §6):

    Layer-1 previous-token head  ->  Layer-2 identity QK  ->  Layer-2 OV into the shared residual
    ->  Layer-2 MLP Fourier features  ->  answer

so a mutant predicts a verdict pattern (for mutants that break a component's *input* side or its
attention; a rotation of a writer's *output* space breaks the interface to its reader, which only
the reader's claim can see, so such mutants are not in this list): the claim about the broken component fails; every claim
about a component upstream of it passes (nothing it reads has changed); claims downstream are shown
but not judged (they read a broken input); behaviour claims fail when the mutant breaks behaviour.

Every mutant is a pure function ``(model, seed) -> model``; random choices (rotations, permutations)
come from the stream ``random_streams.torch_generator(seed, mutant name)``. ``MUTANTS`` lists them
with the component each breaks, and ``COMPONENT_OF_CLAIM`` / ``UPSTREAM`` give the expected pattern.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import torch

from ..random_streams import torch_generator

# The circuit's components in order, upstream first, and the claim that owns each (SPEC §6). The
# unembedding owns no claim: a break there must fail only the behaviour claims, every component claim
# being upstream of it.
COMPONENTS = ("layer1_previous_token", "layer2_identity_qk", "layer2_ov", "layer2_mlp", "unembedding")
COMPONENT_OF_CLAIM = {
    "previous_token_head": "layer1_previous_token",
    "identity_qk": "layer2_identity_qk",
    "shared_residual": "layer2_ov",
    "fourier_neurons": "layer2_mlp",
}
# Claims about what the whole model does: any break of a component that the answers need must fail them.
BEHAVIOUR_CLAIMS = ("heldout_generalization", "restricted_slot_generalization", "whole_algorithm")


# A torch generator for one named purpose, ``(seed, label)``: the one derivation is
# ``random_streams``'s; the name stays here for the modules that import it from this one.
generator = torch_generator


def random_rotation(d: int, gen: torch.Generator) -> torch.Tensor:
    """A Haar-random orthogonal matrix (d, d): QR of a Gaussian matrix with the signs fixed."""
    a = torch.randn(d, d, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    return (q * torch.sign(torch.diagonal(r))).float()


@dataclass(frozen=True)
class Mutant:
    """One way to break one component. ``build(model, seed)`` returns a new model."""

    name: str
    component: str
    description: str
    build: Callable

    def __call__(self, model, seed: int = 0):
        mutated = copy.deepcopy(model)
        with torch.no_grad():
            self.build(mutated, generator(seed, self.name))
        mutated.mutant_name = self.name
        return mutated


def _attn(model, layer):
    return model.blocks[layer].attn


def _rotate_input(param: torch.Tensor, gen) -> None:
    """W (H, d_model, d_head) or (d_model, d_out): its input (d_model) space rotated in place."""
    R = random_rotation(param.shape[-2], gen)
    param.copy_(R @ param if param.dim() == 2 else torch.einsum("ij,hjk->hik", R, param))


def _flatten(layer):
    def build(model, gen):
        a = _attn(model, layer)
        a.W_Q.zero_()
        a.b_Q.zero_()

    return build


def _rotate(layer, name):
    def build(model, gen):
        _rotate_input(getattr(_attn(model, layer), name), gen)

    return build


def _scale_scores(layer, factor):
    def build(model, gen):
        a = _attn(model, layer)
        a.W_Q.mul_(factor)
        a.b_Q.mul_(factor)

    return build


def _span_out_of_input(param: torch.Tensor, rows: torch.Tensor) -> None:
    """Project the span of ``rows`` (k, d_model) out of the input space of ``param`` (H, d_model, d_head),
    in place: whatever the weight reads, it no longer reads anything in that span."""
    q, _ = torch.linalg.qr(rows.double().T)  # (d_model, k) orthonormal basis of the span
    P = (torch.eye(q.shape[0], dtype=torch.float64) - q @ q.T).float()
    param.copy_(torch.einsum("ij,hjk->hik", P, param))


def _identity_out_of_ov1(model, gen):
    """Project the variables' embeddings out of Layer 1's value input: the head still attends as
    before, but whatever it copies carries no variable identity."""
    cfg = model.cfg
    _span_out_of_input(_attn(model, 0).W_V, model.embed.W_E[cfg.first_var : cfg.first_var + cfg.n_vars])


def _positions_out_of_k2(model, gen):
    """Project the positional embeddings' span out of Layer 2's key input: `=` can no longer find the
    operand slots by position, while the rest of what the keys read stays."""
    _span_out_of_input(_attn(model, 1).W_K, model.pos_embed.W_pos)


def _numbers_out_of_v2(model, gen):
    """Project the number embeddings' span out of Layer 2's value input: `=` still attends where it did,
    but what it moves carries no number."""
    _span_out_of_input(_attn(model, 1).W_V, model.embed.W_E[: model.cfg.d_vocab_out])


def _rotate_unembedding_input(model, gen):
    _rotate_input(model.unembed.W_U, gen)


def _rotate_mlp_input(model, gen):
    _rotate_input(model.blocks[1].mlp.W_in, gen)


def _permute_mlp_neurons(model, gen):
    """Shuffle which input weights feed which output weights: W_in's columns (and b_in) permuted,
    W_out kept. (Permuting both together would be a symmetry: the same function.)"""
    mlp = model.blocks[1].mlp
    perm = torch.randperm(mlp.W_in.shape[1], generator=gen)
    mlp.W_in.copy_(mlp.W_in[:, perm])
    mlp.b_in.copy_(mlp.b_in[perm])


def _key_frequencies_out_of_mlp(model, gen):
    """Project the directions the operand grid's key frequencies occupy at the MLP input out of W_in:
    the MLP can no longer read the Fourier features it uses."""
    from ..hypotheses.measures import fourier  # lazy: measures sit above interventions

    grid = fourier.grids(model)
    key = fourier.key_frequencies(model, grid=grid)
    if not key:
        raise ValueError("mlp_key_frequencies_removed: the model has no key frequencies, so there is nothing to remove")
    directions = fourier.frequency_directions(grid[fourier.RESID_MID2], key)  # (k, D) orthonormal rows
    P = (torch.eye(model.cfg.d_model, dtype=torch.float64) - directions.T @ directions).float()
    mlp = model.blocks[1].mlp
    mlp.W_in.copy_(P @ mlp.W_in)


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        Mutant(
            "layer1_attention_flattened",
            "layer1_previous_token",
            "Layer 1's W_Q zeroed: every query attends uniformly over its causal keys",
            _flatten(0),
        ),
        Mutant(
            "layer1_keys_rotated",
            "layer1_previous_token",
            "Layer 1's W_K input space rotated by a random orthogonal matrix",
            _rotate(0, "W_K"),
        ),
        Mutant(
            "layer1_values_rotated",
            "layer1_previous_token",
            "Layer 1's W_V input space rotated by a random orthogonal matrix",
            _rotate(0, "W_V"),
        ),
        Mutant(
            "layer1_queries_rotated",
            "layer1_previous_token",
            "Layer 1's W_Q input space rotated by a random orthogonal matrix",
            _rotate(0, "W_Q"),
        ),
        Mutant(
            "ov1_identity_removed",
            "layer1_previous_token",
            "the variables' embedding span projected out of Layer 1's W_V input",
            _identity_out_of_ov1,
        ),
        Mutant(
            "layer2_keys_rotated",
            "layer2_identity_qk",
            "Layer 2's W_K input space rotated by a random orthogonal matrix",
            _rotate(1, "W_K"),
        ),
        Mutant(
            "layer2_queries_rotated",
            "layer2_identity_qk",
            "Layer 2's W_Q input space rotated by a random orthogonal matrix",
            _rotate(1, "W_Q"),
        ),
        Mutant(
            "layer2_attention_flattened",
            "layer2_identity_qk",
            "Layer 2's W_Q zeroed: `=` attends uniformly over all 16 positions",
            _flatten(1),
        ),
        Mutant(
            "layer2_scores_scaled",
            "layer2_identity_qk",
            "Layer 2's W_Q (hence its attention scores) scaled by 0.05",
            _scale_scores(1, 0.05),
        ),
        Mutant(
            "layer2_scores_sharpened",
            "layer2_identity_qk",
            "Layer 2's W_Q (hence its attention scores) scaled by 5: sharper attention from `=`",
            _scale_scores(1, 5.0),
        ),
        Mutant(
            "layer2_positions_out_of_keys",
            "layer2_identity_qk",
            "the positional embeddings' span projected out of Layer 2's W_K input",
            _positions_out_of_k2,
        ),
        Mutant(
            "layer2_numbers_out_of_values",
            "layer2_ov",
            "the number embeddings' span projected out of Layer 2's W_V input",
            _numbers_out_of_v2,
        ),
        Mutant(
            "layer2_values_rotated",
            "layer2_ov",
            "Layer 2's W_V input space rotated by a random orthogonal matrix",
            _rotate(1, "W_V"),
        ),
        Mutant(
            "mlp_input_rotated",
            "layer2_mlp",
            "the Layer-2 MLP's W_in input space rotated by a random orthogonal matrix",
            _rotate_mlp_input,
        ),
        Mutant(
            "mlp_neurons_permuted",
            "layer2_mlp",
            "the Layer-2 MLP's input weights shuffled across neurons (W_out kept)",
            _permute_mlp_neurons,
        ),
        Mutant(
            "mlp_key_frequencies_removed",
            "layer2_mlp",
            "the key-frequency directions of the MLP input projected out of W_in",
            _key_frequencies_out_of_mlp,
        ),
        Mutant(
            "unembedding_input_rotated",
            "unembedding",
            "the unembedding's W_U input space rotated by a random orthogonal matrix (no claim owns it: "
            "every component claim is upstream)",
            _rotate_unembedding_input,
        ),
    ]
}


def expected(claim: str, mutant: Mutant) -> str:
    """What a claim's verdict should be on a mutant: "fail" (the broken component's own claim, or a
    behaviour claim), "pass" (a component upstream of the break), or "not judged" (downstream)."""
    if claim in BEHAVIOUR_CLAIMS:
        return "fail"
    own = COMPONENT_OF_CLAIM.get(claim)
    if own is None:
        return "not judged"
    i, j = COMPONENTS.index(own), COMPONENTS.index(mutant.component)
    return "fail" if i == j else "pass" if i < j else "not judged"


def changed_parameters(model, mutated) -> list[str]:
    """Names of the parameters that differ (bitwise) between ``model`` and ``mutated``."""
    a, b = dict(model.named_parameters()), dict(mutated.named_parameters())
    return [n for n in a if not torch.equal(a[n], b[n])]
