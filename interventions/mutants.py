"""Component mutants: copies of a trained model with one component's weights changed.

Mutation testing for interpretability claims. A mutant changes the weights of exactly one component
and keeps every other weight bit-identical. There are two kinds.

*Break* mutants (``kind="break"``) break the component: its input space rotated, its attention flattened, a direction
projected out, its neurons shuffled. The circuit runs, upstream to downstream (SPEC §6):

    Layer-1 previous-token head  ->  Layer-2 identity QK  ->  Layer-2 OV into the shared residual
    ->  Layer-2 MLP Fourier features  ->  answer

so a break mutant predicts a verdict pattern (for mutants that break a component's *input* side or its attention; a
rotation of a writer's *output* space breaks the interface to its reader, which only the reader's claim can see, so such
mutants are not in this list): the claim about the broken component fails; every claim about a component upstream of it
passes (nothing it reads has changed); claims downstream are shown but not judged (they read a broken input); behaviour
claims fail when the mutant breaks behaviour.

*Symmetry* mutants (``kind="symmetry"``) change the weights and not the function: the answers' log-probabilities at `=`
are the same to float rounding, on every input of the task. A claim about what a component computes must come out the
same on them, verdict and deciding values, so every item has to read a property of the function (attention patterns,
what is read where, answers) or of weights in a basis the function fixes (OV and QK products on the inputs a layer can
see, neuron statistics that ReLU's positive rescaling leaves alone). The symmetries used, each exact:

    QK gauge       W_Q -> W_Q A, b_Q -> b_Q A, W_K -> W_K A^-T, b_K -> b_K A^-T: q k^T unchanged
    OV gauge       W_V -> W_V B, b_V -> b_V B, W_O -> B^-1 W_O: v W_O unchanged
    softmax shift  b_K -> b_K + δ: every score of query i moves by q_i·δ/sqrt(d_head), the same for
                   every key, which softmax cannot see
    unseen inputs  Layer 1 reads only W_E[t] + W_pos[p]: anything added to W_Q, W_K, W_V along the
                   directions orthogonal to those rows is multiplied by zero
    query at `=`   Layer 2's query matters for the answer only at `=`, whose residual lies in the span
                   of W_E[=] + W_pos[15] + the OV_1 biases and the OV_1 images of W_E[t] + W_pos[p];
                   W_Q of Layer 2 may gain anything orthogonal to it (other positions' attention
                   changes; no answer reads it)
    neuron scale   relu(c z) / c = relu(z) for c > 0: W_in[:, j], b_in[j] times c, W_out[j] over c
    neuron order   W_in's columns, b_in and W_out's rows permuted together
    class shift    the same vector added to every column of W_U (and a constant to b_U): every logit
                   moves by the same amount, so the answer's log-probability is unchanged
    basis          without LayerNorm, the residual stream written as x A (A invertible): W_E, W_pos and
                   every writer times A, every reader times A^-1 on its input side (a random A of
                   condition <= 100; the variables' or the numbers' span scaled x10 or x0.1). Items in
                   the stream's own coordinates (norms, angles) are not fixed by it: a claim's verdict and
                   its required items' values are (``hypotheses.mutation.symmetry_changes``)

Every mutant is a pure function ``(model, seed) -> model``; random choices (rotations, permutations) come from the
stream ``random_streams.torch_generator(seed, mutant name)``. A mutant names the component whose weights it changes and
nothing about the claims: which claim owns which component, and so the expected verdicts, is ``hypotheses.mutation``'s.
A mutant that needs a measurement of the model (the key-frequency directions of the MLP input) takes it from the caller
as a keyword (``Mutant.needs``; ``hypotheses.mutation.build_mutant`` supplies it).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Callable

import torch

from ..model.components import PAPER, Components
from ..random_streams import torch_generator

# The circuit's components in order, upstream first (SPEC §6).
COMPONENTS = ("layer1_previous_token", "layer2_identity_qk", "layer2_ov", "layer2_mlp", "unembedding")
# Not a component: what every component reads and writes. Its symmetry mutants (a change of basis)
# exist only without LayerNorm (``Mutant.applies``).
RESIDUAL_STREAM = "residual_stream"


# ``random_streams.torch_generator(seed, label)``, under the name the modules that import it from here use.
generator = torch_generator


def random_rotation(d: int, gen: torch.Generator) -> torch.Tensor:
    """A Haar-random orthogonal matrix (d, d): QR of a Gaussian matrix with the signs fixed."""
    a = torch.randn(d, d, generator=gen, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    return (q * torch.sign(torch.diagonal(r))).float()


@dataclass(frozen=True)
class Mutant:
    """One change of one component. ``mutant(model, seed, **given)`` returns a new model; ``given``
    holds what ``needs`` names (measurements of the model the caller makes)."""

    name: str
    component: str
    description: str
    build: Callable  # (model, generator, components, **given): changes the model in place
    kind: str = "break"  # "break": the component is broken; "symmetry": the function is unchanged
    needs: tuple[str, ...] = ()

    def applies(self, model) -> str | None:
        """Why this mutant cannot be made of ``model`` (None: it can): a change of basis of the residual
        stream is a symmetry only without LayerNorm."""
        if self.component == RESIDUAL_STREAM and model.cfg.layernorm:
            return "a change of basis of the residual stream is a symmetry only without LayerNorm"
        return None

    def __call__(self, model, seed: int = 0, *, components: Components = PAPER, **given):
        """A changed copy of ``model``, the change made to the component at ``components`` (Layer 1 is
        the previous-token head's layer and head, Layer 2 the fetching role's heads, the MLP the adding
        one)."""
        missing = [k for k in self.needs if k not in given]
        if missing:
            raise ValueError(
                f"{self.name} needs {', '.join(missing)} from the caller "
                "(hypotheses.mutation.build_mutant measures and passes them)"
            )
        mutated, gen = copy.deepcopy(model), generator(seed, self.name)
        with torch.no_grad():
            for at in _each_head(self.component, components):
                self.build(mutated, gen, at, **{k: given[k] for k in self.needs})
        return mutated


def _each_head(component: str, c: Components) -> list[Components]:
    """Where a mutant of ``component`` acts: at ``c``, or, for Layer 2's QK or OV when the fetching role is
    several heads (``Components.fetch_also``), at each of them in turn (one random stream, in the role's
    order), since the role is what the component's claim reads."""
    if component in ("layer2_identity_qk", "layer2_ov") and c.fetch_also:
        return [replace(c, fetch_head=h, fetch_also=()) for h in c.fetch_heads]
    return [c]


def _rotated(name: str, component: str, layer: int | None, param: str, whose: str, note: str = "") -> Mutant:
    """The d_model space of weight ``param`` rotated by a random orthogonal matrix: the input space of a
    head's weight (``"attn.W_K"``: W_K[h] (d_model, d_head)) at the paper's Layer ``layer`` (0, 1), of the
    adding MLP's ``"mlp.W_in"`` (``layer`` None) or of ``"unembed.W_U"`` (d_model, d_out); the output space
    of ``"mlp.W_out"`` (d_mlp, d_model), so every neuron writes what it did, at the same strength, into
    directions the unembedding does not read as before. Described as ``whose`` weight rotated, then ``note``."""
    weight = param.rsplit(".", 1)[-1]
    space = "output" if weight == "W_out" else "input"

    def build(model, gen, c):
        if param.startswith("unembed."):
            W = model.get_parameter(param)
        elif param.startswith("mlp."):
            W = model.get_parameter(f"blocks.{c.mlp_layer}.{param}")
        else:
            W = _head_weight(model, c, layer, param.removeprefix("attn."))  # (1, d_model, d_head)
        R = random_rotation(model.cfg.d_model, gen)
        if space == "output":
            W.copy_(W @ R)
        else:
            W.copy_(R @ W if W.dim() == 2 else torch.einsum("ij,hjk->hik", R, W))

    return Mutant(name, component, f"{whose} {weight} {space} space rotated by a random orthogonal matrix{note}", build)


def _scale_scores(layer: int, factor: float) -> Callable:
    """W_Q and b_Q of the head at the paper's Layer ``layer`` (0, 1) times ``factor``, so every attention
    score is too; 0 flattens its attention (uniform over the causal keys)."""

    def build(model, gen, c):
        for name in ("W_Q", "b_Q"):
            _head_weight(model, c, layer, name).mul_(factor)

    return build


def _span_out_of_input(layer: int, name: str, rows: Callable[..., torch.Tensor]) -> Callable:
    """Project the span of ``rows(model)`` (k, d_model) out of the input space of weight ``name`` ("W_V",
    ...) of the head at the paper's Layer ``layer`` (0, 1): whatever the weight reads, it no longer reads
    anything in that span. The variables' embeddings out of Layer 1's W_V: the head still attends as
    before, but whatever it copies carries no variable identity. The positional embeddings out of Layer
    2's W_K: `=` can no longer find the operand slots by position, while the rest of what the keys read
    stays. The number embeddings out of Layer 2's W_V: `=` still attends where it did, but what it moves
    carries no number."""

    def build(model, gen, c):
        param = _head_weight(model, c, layer, name)  # (1, d_model, d_head)
        q, _ = torch.linalg.qr(rows(model).double().T)  # (d_model, k) orthonormal basis of the span
        P = (torch.eye(q.shape[0], dtype=torch.float64) - q @ q.T).float()
        param.copy_(torch.einsum("ij,hjk->hik", P, param))

    return build


def _head_weight(model, c: Components, layer: int, name: str) -> torch.Tensor:
    """Weight ``name`` ("W_Q", ...) of the head at the paper's Layer ``layer`` (0, 1) at ``c`` (the
    previous-token head or the fetching head): a (1, ...) view."""
    at, h = (c.prev_layer, c.prev_head) if layer == 0 else (c.fetch_layer, c.fetch_head)
    return getattr(model.blocks[at].attn, name)[h : h + 1]


def _ov1_noised(model, gen, c):
    """Layer 1's W_V and W_O each gain Gaussian noise of 3x their own RMS: the head attends as before, and
    what it writes at each value token is the variable's identity in a garbled code Layer 2 was not
    trained on (a linear probe still decodes it)."""
    for w in (_head_weight(model, c, 0, "W_V"), _head_weight(model, c, 0, "W_O")):
        w.add_(3 * w.pow(2).mean().sqrt() * torch.randn(w.shape, generator=gen))


def _ov2_rank_cut(rank: int) -> Mutant:
    """Layer 2's OV product W_V W_O cut to its top ``rank`` singular directions: W_O -> W_O P, P the
    projection (d_model, d_model) onto the top ``rank`` right singular vectors of W_V W_O. Then
    W_V W_O P = U_r S_r V_r^T; the value bias b_V W_O P is cut the same way. Layer 2 still writes
    its strongest directions, and only ``rank`` of them."""

    def build(model, gen, c):
        W_V, W_O = _head_weight(model, c, 1, "W_V")[0], _head_weight(model, c, 1, "W_O")[0]
        _, _, Vh = torch.linalg.svd((W_V @ W_O).double(), full_matrices=False)
        P = Vh[:rank].T @ Vh[:rank]
        W_O.copy_((W_O.double() @ P).float())

    description = f"Layer 2's OV product W_V W_O cut to its top {rank} singular directions (W_O projected)"
    return Mutant(f"layer2_ov_rank{rank}", "layer2_ov", description, build)


def _ov2_output_recoded(model, gen, c):
    """Layer 2's W_O (d_head, d_model) replaced by U' S V'^T: its singular values kept, both singular bases Haar-random.
    Layer 2 still writes every value it reads, at the same strengths, in a basis the MLP was not trained on."""
    W_O = _head_weight(model, c, 1, "W_O")[0]  # (d_head, d_model)
    S = torch.linalg.svdvals(W_O.double())
    U, V = random_rotation(W_O.shape[0], gen).double(), random_rotation(W_O.shape[1], gen).double()
    W_O.copy_((U[:, : len(S)] @ torch.diag(S) @ V[: len(S)]).float())


def _value_bias_shifted(model, gen, c):
    """Layer 2's value bias b_V += δ, δ Gaussian with 3x W_V's mean column norm per coordinate: attention
    weights sum to 1, so Layer 2's output moves by the same δ W_O at every position, a constant offset
    the MLP reads."""
    W_V, b_V = _head_weight(model, c, 1, "W_V")[0], _head_weight(model, c, 1, "b_V")[0]
    scale = 3 * W_V.norm(dim=0).mean()
    b_V.add_(torch.randn(b_V.shape[-1], generator=gen) * scale)


def _permute_neurons(outputs: bool):
    """The Layer-2 neurons shuffled: W_in's columns and b_in permuted; with ``outputs`` W_out's rows
    too, which is a symmetry (the same function), without them a break (inputs feed other outputs)."""

    def build(model, gen, c):
        mlp = model.blocks[c.mlp_layer].mlp
        perm = torch.randperm(mlp.W_in.shape[1], generator=gen)
        mlp.W_in.copy_(mlp.W_in[:, perm])
        mlp.b_in.copy_(mlp.b_in[perm])
        if outputs:
            mlp.W_out.copy_(mlp.W_out[perm])

    return build


def _key_frequencies_out_of_mlp(model, gen, c, directions):
    """Project the directions the operand grid's key frequencies occupy at the MLP input out of W_in:
    the MLP can no longer read the Fourier features it uses. ``directions`` (k, d_model), orthonormal
    rows, come from the caller (the key-frequency rule is a measurement, ``hypotheses.measures.fourier``)."""
    if len(directions) == 0:
        raise ValueError("mlp_key_frequencies_removed: the model has no key frequencies, so there is nothing to remove")
    directions = directions.double()
    P = (torch.eye(model.cfg.d_model, dtype=torch.float64) - directions.T @ directions).float()
    mlp = model.blocks[c.mlp_layer].mlp
    mlp.W_in.copy_(P @ mlp.W_in)


# ----- symmetry mutants: the weights change, the function does not ------------------------------------


def random_invertible(d: int, gen: torch.Generator, spread: float = 4.0) -> torch.Tensor:
    """A random well-conditioned invertible matrix (d, d), float64: R1 diag(s) R2 with R1, R2 Haar-random
    rotations and s log-uniform in [1/sqrt(spread), sqrt(spread)] (condition number <= ``spread``), so
    the change of basis is far from orthogonal yet float32 keeps the product to rounding."""
    s = torch.exp((torch.rand(d, generator=gen, dtype=torch.float64) - 0.5) * torch.log(torch.tensor(spread)))
    return random_rotation(d, gen).double() @ torch.diag(s) @ random_rotation(d, gen).double()


@torch.no_grad()
def residual_change_of_basis(model, A: torch.Tensor):
    """A copy of ``model`` whose residual stream is written in the basis x A (A (d_model, d_model)
    invertible): W_E, W_pos and every writer (W_O, b_O, W_out, b_out) times A, every reader (W_Q, W_K,
    W_V, W_in, W_U) times A^-1 on its input side. Without LayerNorm the function is the same, up to float
    rounding. The symmetry mutants ``residual_*`` of ``MUTANTS`` are such changes."""
    m = copy.deepcopy(model)
    _change_basis(m, A)
    return m


def _change_basis(m, A: torch.Tensor) -> None:
    """``residual_change_of_basis`` in place."""
    if m.cfg.layernorm:
        raise ValueError("a change of basis of the residual stream is a symmetry only without LayerNorm")
    A = A.double()
    A_inv = torch.linalg.inv(A)
    writers, readers = [m.embed.W_E, m.pos_embed.W_pos], [m.unembed.W_U]
    for block in m.blocks:
        writers += [block.attn.W_O, block.attn.b_O]
        readers += [block.attn.W_Q, block.attn.W_K, block.attn.W_V]
        if block.has_mlp:
            writers += [block.mlp.W_out, block.mlp.b_out]
            readers.append(block.mlp.W_in)
    for p in writers:  # the output (d_model) side: the last axis
        p.copy_((p.double() @ A).float())
    for p in readers:  # the input (d_model) side: the second-to-last axis
        p.copy_((A_inv @ p.double()).float())


def _residual_basis(span: str | None, factor: float = 1.0, spread: float = 100.0):
    """A change of basis of the residual stream: ``span`` None, a random invertible matrix of condition at
    most ``spread`` (``random_invertible``); "variables" or "numbers", that span of W_E (less its mean)
    stretched by ``factor`` (``span_stretch``), the rest kept."""

    def build(model, gen, c):
        d = model.cfg.d_model
        if span is None:
            A = random_invertible(d, gen, spread=spread)
        else:
            W_E, first = model.embed.W_E.detach(), model.cfg.first_var
            rows = W_E[first : first + model.cfg.n_vars] if span == "variables" else W_E[: model.cfg.d_vocab_out]
            A = span_stretch(rows, factor)
        _change_basis(model, A)

    return build


def span_stretch(rows: torch.Tensor, factor: float) -> torch.Tensor:
    """A = I + (factor - 1) P (d, d) float64, P the projection onto the span of ``rows`` (k, d) less their
    mean: directions in that span scaled by ``factor``, the rest kept."""
    inside = span_basis(rows - rows.mean(0))[0]
    return torch.eye(rows.shape[1], dtype=torch.float64) + (factor - 1.0) * inside.T @ inside


def span_basis(rows: torch.Tensor, rel_tol: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor]:
    """(inside (r, d), outside (d - r, d)): orthonormal rows spanning the span of ``rows`` (k, d) and its
    orthogonal complement, float64. Singular values below ``rel_tol`` x the largest are float32 rounding
    of rows that are exact combinations of others (the reference's Layer-1 inputs: 0.23 then 2e-7)."""
    # Vh is (d, d) either way when k >= d; a tall matrix's full U (k, k), never read, costs ten times the rest.
    U, S, Vh = torch.linalg.svd(rows.detach().double(), full_matrices=rows.shape[0] < rows.shape[1])
    rank = int((S > rel_tol * S.max()).sum())
    return Vh[:rank], Vh[rank:]


def layer1_inputs(model) -> torch.Tensor:
    """Every vector Layer 1 can read: W_E[t] + W_pos[p] for every token t and position p
    (d_vocab * n_ctx, d_model); there is nothing before Layer 1 to add anything else. (For a
    previous-token head found in a later layer, the layers before it are taken to add nothing: a known
    limit of the weight-space items there.)"""
    return (model.embed.W_E[:, None, :] + model.pos_embed.W_pos[None, :, :]).reshape(-1, model.cfg.d_model)


def _layer1_ov(model, components: Components = PAPER) -> tuple[list[torch.Tensor], torch.Tensor]:
    """([OV_1 of each head of the previous-token head's layer (d_model, d_model)], the bias
    sum_h b_V^h W_O^h + b_O^1 (d_model,)). Each head writes its own convex combination of its OV images,
    so a layer of several heads writes in the span of all of them, not of their sum."""
    a = model.blocks[components.prev_layer].attn
    ovs = [torch.einsum("hdk,hke->de", a.W_V[h : h + 1], a.W_O[h : h + 1]) for h in range(a.W_V.shape[0])]
    return ovs, torch.einsum("hk,hke->e", a.b_V, a.W_O) + a.b_O


def layer2_inputs(model, components: Components = PAPER) -> torch.Tensor:
    """Rows spanning every residual Layer 2 can read, at any position: Layer 1's inputs, their OV_1
    images through each of Layer 1's heads (each writes a convex combination of its images) and Layer 1's
    bias. (1 + (1 + H_1) d_vocab n_ctx, d_model). With ``components``: what the fetching layer reads,
    taking the layers between the previous-token head's and it to add nothing (exact for a layer that
    writes nothing, W_O = 0 and no MLP)."""
    ovs, bias = _layer1_ov(model, components)
    x = layer1_inputs(model)
    return torch.cat([bias[None], x, *(x @ ov for ov in ovs)])


def layer2_query_inputs_at_eq(model, components: Components = PAPER) -> torch.Tensor:
    """Rows spanning every residual Layer 2's query can read at `=` (position n_ctx - 1): W_E[=] +
    W_pos[15] + the bias of ``_layer1_ov`` plus, per Layer-1 head, a convex combination of the OV_1 images
    of Layer 1's inputs (its attention weights sum to 1). (1 + H_1 d_vocab n_ctx, d_model); the span holds
    every such residual."""
    ovs, bias = _layer1_ov(model, components)
    base = model.embed.W_E[model.vocab.eq] + model.pos_embed.W_pos[-1] + bias
    x = layer1_inputs(model)
    return torch.cat([base[None], *(x @ ov for ov in ovs)])


def _gain_unseen(layer: int, names: tuple[str, ...], inputs: Callable[..., torch.Tensor]) -> Callable:
    """Each weight ``names`` (H, d_model, d_head) of the head at the paper's Layer ``layer`` (0, 1) += P G, G
    Gaussian, with 10x the weight's Frobenius norm; P the projection onto the input directions orthogonal
    to every row of ``inputs(model, components)``, directions its input never has. Layer 1's W_Q, W_K, W_V
    against every W_E[t] + W_pos[p] (128 - 89 = 39 directions in the reference); Layer 2's W_Q against
    everything the residual at `=` can hold (``layer2_query_inputs_at_eq``)."""

    def build(model, gen, c):
        outside = span_basis(inputs(model, c))[1]
        P = outside.T @ outside
        for name in names:
            param = _head_weight(model, c, layer, name)
            G = torch.randn(param.shape, generator=gen, dtype=torch.float64)
            add = torch.einsum("ij,hjk->hik", P, G)
            param.add_((add * 10.0 * param.double().norm() / add.norm()).float())

    return build


def _qk_gauge(name: str, component: str, layer: int) -> Mutant:
    """The QK gauge of the head at the paper's Layer ``layer`` (0, 1)."""

    def build(model, gen, c):
        W_Q, b_Q, W_K, b_K = (_head_weight(model, c, layer, n) for n in ("W_Q", "b_Q", "W_K", "b_K"))
        A = random_invertible(W_Q.shape[-1], gen)
        A_inv_T = torch.linalg.inv(A).T
        for w, M in ((W_Q, A), (b_Q, A), (W_K, A_inv_T), (b_K, A_inv_T)):
            w.copy_((w.double() @ M).float())

    description = "W_Q -> W_Q A, W_K -> W_K A^-T (and the biases), A random invertible (condition <= 4)"
    return Mutant(name, component, f"Layer {layer + 1}: {description}", build)


def _ov_gauge(name: str, component: str, layer: int) -> Mutant:
    """The OV gauge of the head at the paper's Layer ``layer`` (0, 1)."""

    def build(model, gen, c):
        W_V, b_V, W_O = (_head_weight(model, c, layer, n) for n in ("W_V", "b_V", "W_O"))
        B = random_invertible(W_V.shape[-1], gen)
        W_V.copy_((W_V.double() @ B).float())
        b_V.copy_((b_V.double() @ B).float())
        W_O.copy_((torch.linalg.inv(B) @ W_O.double()).float())

    description = "W_V -> W_V B, b_V -> b_V B, W_O -> B^-1 W_O, B random invertible (condition <= 4)"
    return Mutant(name, component, f"Layer {layer + 1}: {description}", build)


def _softmax_shift(name: str, component: str, layer: int) -> Mutant:
    """b_K += δ with |δ| 3x the largest key-weight column norm: each query's scores all move by q·δ."""

    def build(model, gen, c):
        W_K, b_K = _head_weight(model, c, layer, "W_K"), _head_weight(model, c, layer, "b_K")
        delta = torch.randn(b_K.shape, generator=gen, dtype=torch.float64)
        scale = 3.0 * float(W_K.double().norm(dim=-2).max())
        b_K.add_((delta / delta.norm() * scale).float())

    description = f"Layer {layer + 1}: b_K += δ, a constant added to every score of a query row"
    return Mutant(name, component, description, build)


def _mlp_neurons_rescaled(model, gen, c):
    """Every Layer-2 neuron j rescaled by c_j, log-uniform in [1/10, 10]; the neuron with the largest
    ||W_in[:, j]|| ||W_out[j]|| by 10: W_in[:, j], b_in[j] times c_j, W_out[j] over c_j."""
    mlp = model.blocks[c.mlp_layer].mlp
    d = mlp.W_in.shape[1]
    c = torch.exp((torch.rand(d, generator=gen, dtype=torch.float64) * 2 - 1) * torch.log(torch.tensor(10.0)))
    c[int((mlp.W_in.double().norm(dim=0) * mlp.W_out.double().norm(dim=1)).argmax())] = 10.0
    mlp.W_in.copy_((mlp.W_in.double() * c).float())
    mlp.b_in.copy_((mlp.b_in.double() * c).float())
    mlp.W_out.copy_((mlp.W_out.double() / c[:, None]).float())


def _unembedding_class_shift(model, gen, c):
    """The same vector u added to every column of W_U and a constant to b_U: each logit moves by x·u + b,
    equally for all answers. |u| is the largest column norm of W_U."""
    U = model.unembed.W_U
    u = torch.randn(U.shape[0], generator=gen, dtype=torch.float64)
    u = u / u.norm() * float(U.double().norm(dim=0).max())
    U.add_(u.float()[:, None])
    model.unembed.b_U.add_(float(torch.randn(1, generator=gen)))


SYMMETRY_MUTANTS = [
    replace(m, kind="symmetry")
    for m in [
        Mutant(
            "layer1_unseen_inputs",
            "layer1_previous_token",
            "Layer 1's W_Q, W_K, W_V each gain 10x their norm along input directions no W_E[t] + W_pos[p] has",
            _gain_unseen(0, ("W_Q", "W_K", "W_V"), lambda m, c: layer1_inputs(m)),
        ),
        _qk_gauge("layer1_qk_gauge", "layer1_previous_token", 0),
        _ov_gauge("layer1_ov_gauge", "layer1_previous_token", 0),
        _softmax_shift("layer1_softmax_shift", "layer1_previous_token", 0),
        _qk_gauge("layer2_qk_gauge", "layer2_identity_qk", 1),
        Mutant(
            "layer2_query_unseen_at_eq",
            "layer2_identity_qk",
            "Layer 2's W_Q gains 10x its norm along input directions the residual at `=` never has",
            _gain_unseen(1, ("W_Q",), layer2_query_inputs_at_eq),
        ),
        _softmax_shift("layer2_softmax_shift", "layer2_identity_qk", 1),
        _ov_gauge("layer2_ov_gauge", "layer2_ov", 1),
        Mutant(
            "mlp_neurons_rescaled",
            "layer2_mlp",
            "each Layer-2 neuron's input times c and output over c, c in [1/10, 10]; the largest neuron x10",
            _mlp_neurons_rescaled,
        ),
        Mutant(
            "mlp_neurons_reordered",
            "layer2_mlp",
            "the Layer-2 neurons permuted, input and output weights together",
            _permute_neurons(outputs=True),
        ),
        Mutant(
            "unembedding_class_shift",
            "unembedding",
            "the same vector added to every column of W_U, a constant to b_U: every logit moves equally",
            _unembedding_class_shift,
        ),
        Mutant(
            "residual_invertible",
            RESIDUAL_STREAM,
            "the residual stream written in a random basis of condition <= 100: writers times A, readers times A^-1",
            _residual_basis(None),
        ),
        *[
            Mutant(
                f"residual_{span}_{label}",
                RESIDUAL_STREAM,
                f"the residual stream with the {span}' embedding span scaled x{factor:g}: writers times A, "
                "readers times A^-1",
                _residual_basis(span, factor),
            )
            for span in ("variables", "numbers")
            for factor, label in ((10.0, "stretched"), (0.1, "shrunk"))
        ],
    ]
]


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in [
        Mutant(
            "layer1_attention_flattened",
            "layer1_previous_token",
            "Layer 1's W_Q zeroed: every query attends uniformly over its causal keys",
            _scale_scores(0, 0.0),
        ),
        _rotated("layer1_keys_rotated", "layer1_previous_token", 0, "attn.W_K", "Layer 1's"),
        _rotated("layer1_values_rotated", "layer1_previous_token", 0, "attn.W_V", "Layer 1's"),
        _rotated("layer1_queries_rotated", "layer1_previous_token", 0, "attn.W_Q", "Layer 1's"),
        Mutant(
            "ov1_identity_removed",
            "layer1_previous_token",
            "the variables' embedding span projected out of Layer 1's W_V input",
            _span_out_of_input(0, "W_V", lambda m: m.embed.W_E[m.cfg.first_var : m.cfg.first_var + m.cfg.n_vars]),
        ),
        Mutant(
            "layer1_output_noised",
            "layer1_previous_token",
            "Layer 1's W_V and W_O each given Gaussian noise of 3x their RMS: it attends as before and writes "
            "a garbled code",
            _ov1_noised,
        ),
        _rotated("layer2_keys_rotated", "layer2_identity_qk", 1, "attn.W_K", "Layer 2's"),
        _rotated("layer2_queries_rotated", "layer2_identity_qk", 1, "attn.W_Q", "Layer 2's"),
        Mutant(
            "layer2_attention_flattened",
            "layer2_identity_qk",
            "Layer 2's W_Q zeroed: `=` attends uniformly over all 16 positions",
            _scale_scores(1, 0.0),
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
            _span_out_of_input(1, "W_K", lambda m: m.pos_embed.W_pos),
        ),
        Mutant(
            "layer2_numbers_out_of_values",
            "layer2_ov",
            "the number embeddings' span projected out of Layer 2's W_V input",
            _span_out_of_input(1, "W_V", lambda m: m.embed.W_E[: m.cfg.d_vocab_out]),
        ),
        _rotated("layer2_values_rotated", "layer2_ov", 1, "attn.W_V", "Layer 2's"),
        _ov2_rank_cut(4),
        _ov2_rank_cut(8),
        Mutant(
            "layer2_output_recoded",
            "layer2_ov",
            "Layer 2's W_O replaced by a random matrix of the same singular values (both bases Haar-random)",
            _ov2_output_recoded,
        ),
        Mutant(
            "layer2_value_bias_shifted",
            "layer2_ov",
            "Layer 2's value bias shifted (3x W_V's mean column norm per coordinate): a constant offset at `=`",
            _value_bias_shifted,
        ),
        _rotated("mlp_input_rotated", "layer2_mlp", None, "mlp.W_in", "the Layer-2 MLP's"),
        Mutant(
            "mlp_neurons_permuted",
            "layer2_mlp",
            "the Layer-2 MLP's input weights shuffled across neurons (W_out kept)",
            _permute_neurons(outputs=False),
        ),
        Mutant(
            "mlp_key_frequencies_removed",
            "layer2_mlp",
            "the key-frequency directions of the MLP input projected out of W_in",
            _key_frequencies_out_of_mlp,
            needs=("directions",),
        ),
        _rotated("mlp_output_rotated", "layer2_mlp", None, "mlp.W_out", "the Layer-2 MLP's"),
        _rotated(
            "unembedding_input_rotated",
            "unembedding",
            None,
            "unembed.W_U",
            "the unembedding's",
            " (no claim owns it: every component claim is upstream)",
        ),
    ]
    + SYMMETRY_MUTANTS
}


def changed_parameters(model, mutated) -> list[str]:
    """Names of the parameters that differ (bitwise) between ``model`` and ``mutated``."""
    a, b = dict(model.named_parameters()), dict(mutated.named_parameters())
    return [n for n in a if not torch.equal(a[n], b[n])]
