"""Mechanism knock-outs for the tests: copies of a model with one claimed mechanism removed and the rest
intact, built with the interventions engine's ``knockout`` (so every entry point, ``__call__``,
``run_with_hooks``, ``run``, ``capture`` and ``last_logits``, runs the knock-out).

They are "mechanism ablated" controls (SPEC §5): a claim must fail on its own knock-out.
"""

from __future__ import annotations

import torch

from assignadd.data import POS_EQ, value_positions
from assignadd.hypotheses.measures import fourier
from assignadd.hypotheses.measures.circuits import variable_ov1_embeddings
from assignadd.hypotheses.measures.local import uniform_rows
from assignadd.interventions import Replace, Site, knockout
from assignadd.interventions.mutants import generator
from assignadd.model import AssignAddTransformer
from assignadd.model.components import PAPER, Components


def uniform_value_attention(model: AssignAddTransformer, *, components: Components = PAPER) -> AssignAddTransformer:
    """The previous-token head's layer's attention rows at value positions (a number right after a
    variable) made uniform over the causal keys, every head of that layer: the previous-token mechanism
    removed."""
    return knockout(model, [Replace(Site(components.PATTERN_1, positions=value_positions), uniform_rows)])


def scrambled_identity_qk(
    model: AssignAddTransformer, seed: int = 0, *, components: Components = PAPER
) -> AssignAddTransformer:
    """The fetching layer's keys at value positions see variable identities permuted.

    With X the variables' OV_1 images (rows) and pi a derangement, the key input x at a value token
    becomes x A, A = I + X^+ (X[pi] - X), the least-change linear map with X A = X[pi]: M = X QK_2 X^T
    becomes M[:, pi] there, so `=` looks up the wrong value. Other positions (the operand slots that
    constants are read from) are untouched."""
    X = variable_ov1_embeddings(model, components=components).double()  # (V, D)
    V = X.shape[0]
    g = generator(seed, "scrambled_identity_qk")
    while True:
        perm = torch.randperm(V, generator=g)
        if not (perm == torch.arange(V)).any():
            break
    shift = (torch.linalg.pinv(X) @ (X[perm] - X)).float()  # (D, D): x A - x = x @ shift
    W_K, stash = model.blocks[components.fetch_layer].attn.W_K.detach().clone(), {}

    def keep_input(resid, hook):  # reads the key input; changes nothing
        stash["x"] = resid
        return resid

    def permute_keys(k, hook):  # k: (B, T, H, d_head); the Site restricts the edit to value positions
        return k + torch.einsum("btd,hde->bthe", stash["x"] @ shift, W_K.to(k.dtype))

    return knockout(
        model,
        [
            Replace(Site(components.RESID_PRE_2), keep_input),
            Replace(Site(components.KEYS_2, positions=value_positions), permute_keys),
        ],
    )


def key_frequencies_removed(model: AssignAddTransformer, reference_tokens: torch.Tensor):
    """A copy of ``model`` with its key-frequency directions Q (orthonormal rows) permanently mean-ablated
    from the Layer-2 MLP input at `=`:

        x -> x - (x - μ) Q^T Q,     μ the mean over ``reference_tokens``

    About the mean rather than the origin, so that the constant part of the input (the `=` embedding, the
    position), which carries no operand information but sets every neuron's offset, is kept."""
    grid = fourier.grids(model)
    Q = fourier.frequency_directions(grid[fourier.RESID_MID2], fourier.key_frequencies(model, grid=grid))
    site = PAPER.RESID_MID_2
    mu = fourier.activations_at(model, reference_tokens, (site,))[site].mean(0)

    def remove(act, hook):
        Q_, mu_ = Q.to(device=act.device, dtype=act.dtype), mu.to(device=act.device, dtype=act.dtype)
        return act - ((act - mu_) @ Q_.T) @ Q_

    return knockout(model, [Replace(Site(site, positions=POS_EQ), remove)])
