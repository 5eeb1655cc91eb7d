"""Fourier structure of the addition module (SPEC §4.4): the Layer-2 MLP read on the operand grid.

The grid is every input ``PAD×12 + n m =`` for the N² operand pairs (n, m), row-major (index
n·N + m). On it, an activation at `=` is a function A(n, m) with one value per unit (neuron or
residual dimension). With ω_k = 2πk/N, the *single-frequency basis* of frequency k (k = 1..⌊N/2⌋)
is the four grid functions {cos ω_k n, sin ω_k n, cos ω_k m, sin ω_k m}; for odd N they are mutually
orthogonal over the grid, orthogonal across frequencies and to the constant, each with squared
norm N²/2. So, for a unit's centred activation a = A − mean(A):

    power_k(unit)  = Σ_{b in basis_k} <a, b>² / <b, b>              (variance carried by frequency k)
    FVE_k(unit)    = power_k(unit) / ||a||²                          (fraction of variance explained)
    share_k        = Σ_units power_k / Σ_k Σ_units power_k           (the spectrum over units)

A neuron of the grokked-addition form cos(ω_k n + α) + cos(ω_k m + β) has FVE_k = 1 for its k.
Everything here is a plain function of a model (no verdicts); the one a report's figure needs
(a neuron's fitted form) is at the end.
"""

from __future__ import annotations

import math

import torch

from ...data import operand_sources
from ...data.tokens import POS_EQ, POS_LHS, POS_PLUS, POS_RHS, SEQ_LEN, VOCAB, Vocab
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng

# The keys of ``grids``: the adding MLP's pre-activation and input, named as the paper's layout names
# them (``blocks.1.mlp.hook_pre``, ``blocks.1.hook_resid_mid``) whichever layer the MLP sits in. Every
# function below reads the MLP of the ``components`` it is given.
MLP2_PRE, RESID_MID2 = PAPER.MLP_PRE_2, PAPER.RESID_MID_2

# A unit whose grid standard deviation is below this fraction of what its input could give it
# (||W_in[:, u]|| times the RMS norm of the MLP input on the grid) is "dead": its pre-activation does
# not vary with the operands beyond float rounding (a knocked-out input, a structural zero). FVE is
# scale-free, so without this floor rounding noise would look like structure.
DEAD_FRACTION = 1e-4


def grid_tokens(vocab: Vocab = VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """``PAD×12 + n m =`` for all N² pairs, row-major in (n, m): (tokens [N², 16], labels [N²])."""
    N = vocab.modulus
    n, m = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    n, m = n.flatten(), m.flatten()
    tokens = torch.full((N * N, SEQ_LEN), vocab.pad, dtype=torch.long)
    tokens[:, POS_PLUS], tokens[:, POS_LHS], tokens[:, POS_RHS], tokens[:, POS_EQ] = vocab.plus, n, m, vocab.eq
    return tokens, (n + m) % N


@torch.no_grad()
def activations_at(
    model: AssignAddTransformer, tokens: torch.Tensor, hooks, pos: int = POS_EQ
) -> dict[str, torch.Tensor]:
    """{hook: activation at position ``pos`` (B, d) float64} from one forward, stopped after the last of
    ``hooks`` fires (``interventions.capture``). A model from ``knockout`` applies its own (permanent)
    hooks on the way."""
    from ...interventions import capture

    return {h: a.double() for h, a in capture(model, tokens, hooks, pos=pos).items()}


def grids(
    model: AssignAddTransformer, vocab: Vocab | None = None, *, components: Components = PAPER
) -> dict[str, torch.Tensor]:
    """Both grids a Fourier analysis needs, from one forward: {MLP2_PRE: (N, N, d_mlp), RESID_MID2:
    (N, N, d_model)}, A(n, m) at `=`, float64."""
    vocab = vocab or model.vocab  # the model's own vocabulary (its modulus and variables)
    tokens, _ = grid_tokens(vocab)
    N = vocab.modulus
    c = components
    acts = activations_at(model, tokens, (c.RESID_MID_2, c.MLP_PRE_2))
    return {MLP2_PRE: acts[c.MLP_PRE_2].reshape(N, N, -1), RESID_MID2: acts[c.RESID_MID_2].reshape(N, N, -1)}


def single_frequency_basis(modulus: int) -> torch.Tensor:
    """The grid functions of each frequency: (K, 4, N, N), K = ⌊N/2⌋, in the order
    (cos ω_k n, sin ω_k n, cos ω_k m, sin ω_k m); float64."""
    N = modulus
    k = torch.arange(1, N // 2 + 1, dtype=torch.float64)[:, None]  # (K, 1)
    x = torch.arange(N, dtype=torch.float64)[None, :]
    c, s = torch.cos(2 * math.pi * k * x / N), torch.sin(2 * math.pi * k * x / N)  # (K, N)
    ones = torch.ones(N, dtype=torch.float64)
    along_n = lambda f: f[:, :, None] * ones[None, None, :]  # noqa: E731  (K, N, N), varies with n
    along_m = lambda f: ones[None, :, None] * f[:, None, :]  # noqa: E731
    return torch.stack([along_n(c), along_n(s), along_m(c), along_m(s)], dim=1)


def frequency_coefficients(grid: torch.Tensor) -> torch.Tensor:
    """Least-squares coefficients of each centred unit on each basis function:
    C[k, j, unit] = <a_unit, b_kj> / <b_kj, b_kj>. grid (N, N, d) -> (K, 4, d)."""
    N = grid.shape[0]
    a = grid - grid.mean(dim=(0, 1), keepdim=True)
    B = single_frequency_basis(N)  # (K, 4, N, N)
    return torch.einsum("kjnm,nmd->kjd", B, a) / (N * N / 2)


def mlp_input_scale(
    model: AssignAddTransformer, resid_grid: torch.Tensor, *, components: Components = PAPER
) -> torch.Tensor:
    """Per Layer-2 neuron u: ||W_in[:, u]|| x RMS_n,m ||resid_mid_2(n, m)||, the size of pre-activation
    its input could produce. (d_mlp,)."""
    rms = float(resid_grid.pow(2).sum(-1).mean().sqrt())
    return model.blocks[components.mlp_layer].mlp.W_in.detach().double().norm(dim=0) * rms


def neuron_fve(grid: torch.Tensor, scale: torch.Tensor | None = None) -> dict:
    """Per live unit (grid standard deviation above DEAD_FRACTION x ``scale``, per unit; default: the mean
    unit standard deviation): the best single frequency and the fraction of its grid variance it explains.

    Returns {"best_k" (L,) 1-based, "fve" (L,), "units" (L,) indices of live units, "power" [K, d],
    "total" [d], "live" bool [d]}.
    """
    N = grid.shape[0]
    power = (frequency_coefficients(grid) ** 2).sum(dim=1) * (N * N / 2)  # (K, d): power_k = Σ_j C² <b, b>
    total = ((grid - grid.mean(dim=(0, 1), keepdim=True)) ** 2).sum(dim=(0, 1))  # (d,): ||a||²
    std = (total / (N * N)).sqrt()
    live = (std > DEAD_FRACTION * (std.mean() if scale is None else scale)) & (std > 0)
    fve_all = power[:, live] / total[live]  # (K, L)
    out = {"power": power, "total": total, "live": live}
    if fve_all.shape[1] == 0:
        empty = torch.zeros(0, dtype=torch.float64)
        return {"best_k": empty.long(), "fve": empty, "units": empty.long(), **out}
    fve, best = fve_all.max(dim=0)
    return {"best_k": best + 1, "fve": fve, "units": live.nonzero().flatten(), **out}


def frequency_share(power: torch.Tensor) -> torch.Tensor:
    """share_k = Σ_units power_k / Σ_k Σ_units power_k: the spectrum of single-frequency power (K,)."""
    s = power.sum(dim=1)
    return s / s.sum() if s.sum() > 0 else torch.zeros_like(s)


# The key-frequency rule (fixed before looking at any trained checkpoint): a frequency is *key* when
# it carries at least KEY_SHARE_FACTOR times the share it would have if the single-frequency power of
# the Layer-2 MLP pre-activations were spread evenly over the ⌊N/2⌋ frequencies (1/29 for N = 59). Its
# nulls, and why 2: docs/claims/fourier_neurons.md.
KEY_SHARE_FACTOR = 2.0
# Each neuron's power counts in output units, power_k(u) x ||W_out[u]||² (``key_frequency_share``), so a
# positive rescaling of a ReLU neuron cannot move the key set (re-registered: docs/claims/fourier_neurons.md).


def key_frequency_share(model: AssignAddTransformer, r: dict, *, components: Components = PAPER) -> torch.Tensor:
    """The spectrum the key-frequency rule reads (K,): ``frequency_share`` of the live neurons' power
    (``neuron_fve``'s result ``r``), each neuron's column times ||W_out[u]||², the scale at which its
    activation reaches the residual stream: multiplying W_in[:, u], b_in[u] by c > 0 and dividing W_out[u]
    by c (the same function, relu being positively homogeneous) leaves the product unchanged."""
    out_norms = model.blocks[components.mlp_layer].mlp.W_out.detach().double().norm(dim=1)  # (d_mlp,)
    weighted = r["power"] * out_norms[None, :] ** 2
    return frequency_share(weighted[:, r["live"]])


def key_frequencies(
    model: AssignAddTransformer, vocab: Vocab | None = None, grid: dict | None = None, *, components: Components = PAPER
) -> list[int]:
    """The model's key frequencies (1-based, ascending) by the rule above, from its own grid (``grids``),
    over its live Layer-2 neurons."""
    vocab = vocab or model.vocab  # the model's own vocabulary (its modulus and variables)
    grid = grids(model, vocab, components=components) if grid is None else grid
    r = neuron_fve(grid[MLP2_PRE], mlp_input_scale(model, grid[RESID_MID2], components=components))
    share = key_frequency_share(model, r, components=components)
    K = share.shape[0]
    return [int(k) + 1 for k in (share >= KEY_SHARE_FACTOR / K).nonzero().flatten().tolist()]


def frequency_directions(grid: torch.Tensor, freqs: list[int]) -> torch.Tensor:
    """The residual (or neuron) directions that carry the given frequencies on the grid: the 4 coefficient
    vectors C[k, j] of each k, stacked and orthonormalised (SVD; directions with negligible weight
    dropped). (r, d) float64, r <= 4·len(freqs); (0, d) if none."""
    d = grid.shape[-1]
    if not freqs:
        return torch.zeros(0, d, dtype=torch.float64)
    C = frequency_coefficients(grid)[torch.tensor(freqs) - 1].reshape(-1, d)  # (4|F|, d)
    U, S, Vh = torch.linalg.svd(C, full_matrices=False)
    # A direction counts if its coefficient is not rounding noise relative to the grid's own scale
    # (a frequency the activations do not carry at all contributes no direction).
    scale = float((grid - grid.mean(dim=(0, 1), keepdim=True)).pow(2).mean().sqrt())
    return Vh[S > 1e-6 * max(scale, 1e-30)]


def non_key_frequencies(key: list[int], count: int, modulus: int, seed: int) -> list[int]:
    """``count`` frequencies drawn (seeded) from the non-key ones: the placebo of the same size."""
    pool = [k for k in all_frequencies(modulus) if k not in set(key)]
    if count > len(pool):
        raise ValueError(f"cannot draw {count} non-key frequencies: only {len(pool)} are not key")
    rng = numpy_rng(seed, "placebo frequencies")
    return sorted(int(k) for k in rng.choice(pool, size=count, replace=False))


def frequency_component(grid: torch.Tensor, freqs: list[int], n: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """φ_F(n, m) = Σ_{k in F} Σ_j C[k, j] b_kj(n, m): the part of the grid activation that frequencies F
    carry, evaluated at each sequence's operands. (B, d) float64; zeros if F is empty."""
    B, d = len(n), grid.shape[-1]
    if not freqs:
        return torch.zeros(B, d, dtype=torch.float64)
    idx = torch.tensor(freqs) - 1
    C = frequency_coefficients(grid)[idx]  # (|F|, 4, d)
    basis = single_frequency_basis(grid.shape[0])[idx][:, :, n, m]  # (|F|, 4, B)
    return torch.einsum("fjd,fjb->bd", C, basis)


def all_frequencies(modulus: int) -> list[int]:
    """1, ..., ⌊N/2⌋: every frequency of the operand grid."""
    return list(range(1, modulus // 2 + 1))


def operand_content_scale(deviation: torch.Tensor, phi_all: torch.Tensor) -> float:
    """β = <x - ḡ, φ_all> / <φ_all, φ_all> over the sequences: the least-squares scale of the operand content
    that sequences carry at `=` relative to the grid's. ``deviation``: x - ḡ (B, d), each sequence's
    activation about the grid's mean ḡ, the centre φ is measured from; ``phi_all``: φ over every frequency
    at the same operands (B, d). 1.0 when the grid carries no operand content.

    Why (re-registered 2026-12-01; before, β = 1): the grid puts the operands after twelve PADs, the pools
    after assignments, and `=`'s attention to the operands is diluted differently there; with β = 1 the
    edits left (β - 1) φ_K in place (docs/claims/fourier_neurons.md). β is fitted on clean activations
    only, over all frequencies (never on an edit's outcome or on K)."""
    den = float((phi_all * phi_all).sum())
    return float((deviation * phi_all).sum()) / den if den > 0 else 1.0


def unembedding_input(model: AssignAddTransformer, x: torch.Tensor, *, components: Components = PAPER) -> torch.Tensor:
    """What the unembedding reads at `=` (``blocks.1.hook_resid_post``) for a Layer-2 MLP input ``x`` at `=`
    (B, d): x + MLP(x), float64. The MLP is position-wise, so this is the forward's own value at that
    position (to float rounding); it is computed with the model's own MLP module (its hook points fire, so
    a knock-out there acts). A model whose Layer 2 has no MLP reads x itself. The adding MLP is the
    ``components``' one; a layer after it is not run (a known limit where it is not the last)."""
    block = model.blocks[components.mlp_layer]
    if not block.has_mlp:
        return x.double()
    param = block.mlp.W_in
    with torch.no_grad():
        out = block.mlp(x[:, None, :].to(device=param.device, dtype=param.dtype))[:, 0]
    return x.double() + out.double().to(x.device)


def answer_centroids(
    model: AssignAddTransformer, grid: dict, vocab: Vocab | None = None, *, components: Components = PAPER
) -> torch.Tensor:
    """The model's own answer directions where the unembedding reads them, without the unembedding: for
    each sum s, the mean of ``unembedding_input`` over the grid's N cells (n, m) with n + m = s mod N.
    (N, d) float64. ``grid``: the model's ``grids``."""
    vocab = vocab or model.vocab  # the model's own vocabulary (its modulus and variables)
    N = vocab.modulus
    x = grid[RESID_MID2].reshape(N * N, -1)
    post = unembedding_input(model, x, components=components)
    _, sums = grid_tokens(vocab)
    totals = torch.zeros(N, post.shape[1], dtype=torch.float64, device=post.device)
    return totals.index_add_(0, sums.to(post.device), post) / N


def nearest_answer(post: torch.Tensor, centroids: torch.Tensor, metric: torch.Tensor) -> torch.Tensor:
    """The answer whose centroid (``centroids`` (N, d), ``answer_centroids``) is nearest each row of ``post``
    (B, d) once both are mapped by ``metric`` (d, k): Euclidean in those k coordinates. (B,) long."""
    return torch.cdist(post.double() @ metric, centroids @ metric).argmin(-1)


# Directions of the residual's second moment below this fraction of its largest are not directions the
# task uses (float rounding of exact zeros, e.g. a hand-built model's unused dimensions).
TASK_SUPPORT = 1e-10


def task_metric(task_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(whiten (d, r), unwhiten (r, d)), float64: the residual stream's metric on the task, from its second
    moment over ``task_rows`` (N, d) on the r directions it uses there (eigenvalues above ``TASK_SUPPORT``
    of the largest). x @ whiten are x's coordinates in that metric, and @ unwhiten maps them back. A change
    of basis of the stream (x -> x A, the rows too) turns the whitened coordinates by a rotation."""
    X = task_rows.double()
    e, V = torch.linalg.eigh(X.T @ X / len(X))
    used = e > TASK_SUPPORT * float(e.max().clamp(min=1e-300))
    return V[:, used] * e[used].rsqrt(), (V[:, used] * e[used].sqrt()).T


def random_directions_part(deviation: torch.Tensor, task_rows: torch.Tensor, k: int, seed: int) -> torch.Tensor:
    """The part of each ``deviation`` (B, d) along k random directions of the residual stream, drawn
    isotropically in the stream's own metric on the task and taken by that metric's orthogonal projection:
    the stream is whitened by its second moment over ``task_rows`` (N, d), on the directions it uses there
    (``TASK_SUPPORT``); k directions are drawn among those (``random_subspace``, stream "placebo
    directions"); the part is mapped back. (B, d) float64.

    ``task_rows``: what the function reads up to the MLP, on the claim's own sequences: the MLP layer's
    input stream at every position (its attention reads them all) and the MLP's input at `=`.

    Why the task's metric (re-registered 2026-12-07, docs/claims/fourier_neurons.md; before, the directions
    were isotropic in the residual's own coordinates): the stream written in another basis (x -> x A,
    readers times A^-1) is the same function, and its whitened coordinates are the same up to a rotation,
    which leaves an isotropic draw's distribution as it was. Every position, not `=` alone: what varies at
    `=` may be no more than the key frequencies (a hand-built model), and a placebo drawn there would remove
    them all. The layer's input stream, not its own output at every position: what the last layer computes
    at positions no one reads is not part of the function (a Layer-2 query change there is a symmetry)."""
    whiten, unwhiten = task_metric(task_rows)
    from ...interventions import random_subspace

    Q = random_subspace(whiten.shape[1], min(k, whiten.shape[1]), seed, label="placebo directions")
    return (deviation.double() @ whiten @ Q.T @ Q) @ unwhiten


def key_frequency_edits(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    *,
    seed: int,
    grid: dict | None = None,
    components: Components = PAPER,
) -> dict:
    """Restricted / excluded / placebo edits of the Layer-2 MLP input (``blocks.1.hook_resid_mid`` at `=`),
    in the frequency domain of the operands, as grokking's restricted and excluded loss, each read where
    the next component (the unembedding) reads the MLP's output.

    The key frequencies K come from the model's own grid (``key_frequencies``); φ_F(n, m) is the part of
    the grid's resid_mid that frequencies F carry (``frequency_component``), evaluated at each
    sequence's operands (n, m); μ is the pool's mean resid_mid at `=`; β is the scale of the operand
    content in these sequences relative to the grid (``operand_content_scale``). Per sequence, with x
    its clean MLP input at `=`, x' the edited one, is the answer read from ``unembedding_input(x')`` by
    the model's own ``answer_centroids`` (below) the right one:
        clean     : x' = x
        kept      : x' = μ + β φ_K(n, m)      (restricted: nothing but the key frequencies' content)
        excluded  : x' = x - β φ_K(n, m)      (excluded: the key frequencies' content removed)
        placebo   : x' = x - β φ_P(n, m)      (|K| non-key frequencies P, drawn with ``seed``, removed)
        placebo_kept : x' = μ + β φ_P(n, m)   (only those non-key frequencies kept)
        random_removed : x' = x - (x - μ) P      (P: the projection on as many random directions as the
                                                  key frequencies span, in the site's metric on the task,
                                                  ``random_directions_part``; ``norm_random``: the size
                                                  of what it removed)
    The answer is read there by the nearest centroid in two metrics, and counts as read where either
    finds the right one (``nearest_answer``, re-registered 2026-12-08, docs/claims/fourier_neurons.md):
        unembedding : the logits W_U maps the point and the centroids to, each centred over the answers
                      (W_U's columns less their mean: a constant added to every answer's logit cancels)
        task        : the residual stream's metric on the task (``task_metric`` of the rows the placebo
                      directions are drawn in: the MLP layer's input stream at every position, and x)
    Both are the same in every basis of the residual stream (x -> x A, readers times A^-1), so no
    change of basis moves the answer read. The first is where the next component reads; the second does
    not read W_U, so a break of the unembedding alone (its input rotated, or the answer directions
    projected out of it) cannot decide a claim about the MLP. Neither whitens what the MLP writes, which
    would read the answer through a broken MLP (a permuted one). The argmax of W_U itself is returned as
    ``through_unembedding`` {arm: accuracy}, and each metric's accuracy as ``by_metric`` {arm: {metric:
    accuracy}}, as supporting evidence.

    Returns those six bool (B,) tensors and {"key", "placebo_frequencies", "scale", "norm_key",
    "norm_placebo", "through_unembedding", "by_metric"} (the norms: the mean size of φ_K and φ_P, to show
    how much each edit moves the input). ``grid``: the model's ``grids`` if already computed.
    """
    vocab = model.vocab  # the model's own vocabulary (its modulus and variables)
    from ...interventions import capture

    grid = grids(model, vocab, components=components) if grid is None else grid
    key = key_frequencies(model, vocab, grid, components=components)
    placebo = non_key_frequencies(key, len(key), vocab.modulus, seed)
    resid_grid = grid[RESID_MID2]
    src = operand_sources(tokens, vocab)
    if (src < 0).any():
        raise ValueError("key_frequency_edits: a sequence uses an unassigned variable")
    rows = torch.arange(len(tokens))
    n, m = tokens[rows, src[:, 0]], tokens[rows, src[:, 1]]
    # One clean forward (stopped at the MLP input) gives x, μ, the scale β and the metric of the placebo.
    stream = f"blocks.{components.mlp_layer}.hook_resid_pre"
    acts = capture(model, tokens, [stream, components.RESID_MID_2])
    x = acts[components.RESID_MID_2][:, POS_EQ].double()
    mu = x.mean(0)
    grid_mean = resid_grid.double().mean(dim=(0, 1))
    beta = operand_content_scale(x - grid_mean, frequency_component(resid_grid, all_frequencies(vocab.modulus), n, m))
    phi_key = beta * frequency_component(resid_grid, key, n, m)
    phi_placebo = beta * frequency_component(resid_grid, placebo, n, m)
    centroids = answer_centroids(model, grid, vocab, components=components)
    W_U, b_U = model.unembed.W_U.detach().double(), model.unembed.b_U.detach().double()

    # A placebo that acts on any model: as many random directions as the key frequencies occupy, removed
    # about μ. (Not drawn orthogonal to them: a model with nothing outside its key frequencies, such as
    # a hand-built one, has no content there, and a placebo that changes nothing is no control.)
    rank = max(int(frequency_directions(resid_grid, key).shape[0]), 1)
    task_rows = torch.cat([acts[stream].reshape(-1, x.shape[-1]), x])
    inside = random_directions_part(x - mu, task_rows, rank, seed)
    metrics = {"unembedding": W_U - W_U.mean(1, keepdim=True), "task": task_metric(task_rows)[0]}

    edited = {
        "clean": x,
        "kept": (mu + phi_key).expand_as(x),
        "excluded": x - phi_key,
        "placebo": x - phi_placebo,
        "placebo_kept": (mu + phi_placebo).expand_as(x),
        "random_removed": x - inside,
    }
    out, through_unembedding, by_metric = {}, {}, {}
    for arm, x_new in edited.items():
        post = unembedding_input(model, x_new, components=components)
        read = {name: nearest_answer(post, centroids, M) == labels for name, M in metrics.items()}
        out[arm] = read["unembedding"] | read["task"]
        by_metric[arm] = {name: float(ok.double().mean()) for name, ok in read.items()}
        through_unembedding[arm] = float(((post @ W_U + b_U).argmax(-1) == labels).double().mean())
    return {
        **out,
        "by_metric": by_metric,
        "norm_random": float(inside.norm(dim=-1).mean()),
        "key": key,
        "placebo_frequencies": placebo,
        "scale": beta,
        "norm_key": float(phi_key.norm(dim=-1).mean()),
        "norm_placebo": float(phi_placebo.norm(dim=-1).mean()),
        "through_unembedding": through_unembedding,
    }


def _spectrum(W: torch.Tensor, dim: int) -> torch.Tensor:
    """The Fourier spectrum of a 2-d ``W`` along ``dim`` (of size N, centred along it): the share of its
    variance at each frequency k = 1..⌊N/2⌋ (K,)."""
    W = W.detach().double()
    W = W - W.mean(dim, keepdim=True)
    F = torch.fft.rfft(W, dim=dim).narrow(dim, 1, W.shape[dim] // 2)
    p = (F.abs() ** 2).sum(1 - dim)
    return p / p.sum() if p.sum() > 0 else p


def embedding_spectrum(model: AssignAddTransformer) -> torch.Tensor:
    """``_spectrum`` of the number embeddings W_E[0:N] over the numbers."""
    return _spectrum(model.embed.W_E[: model.vocab.modulus], dim=0)


def logit_spectrum(model: AssignAddTransformer, *, components: Components = PAPER) -> torch.Tensor:
    """``_spectrum`` of W_logit = W_out W_U of Layer 2 (what each neuron writes to each answer logit,
    (d_mlp, N)) over the answer axis."""
    return _spectrum(model.blocks[components.mlp_layer].mlp.W_out @ model.unembed.W_U, dim=1)


# ----- for figures -------------------------------------------------------------------------------


def fitted_cos_form(grid_one: torch.Tensor, k: int) -> dict:
    """The best fit of a^n,m by mean + r_n cos(ω_k n + α) + r_m cos(ω_k m + β) (the paper's form), from
    the least-squares coefficients: returns {"k", "mean", "amp_n", "phase_n", "amp_m", "phase_m",
    "fitted" (N, N), "fve"}."""
    N = grid_one.shape[0]
    g = grid_one.double()[:, :, None]
    c = frequency_coefficients(g)[k - 1, :, 0]  # (4,)
    # a cos x + b sin x = r cos(x + φ) with r = hypot(a, b), φ = atan2(-b, a)
    amp_n, phase_n = math.hypot(c[0], c[1]), math.atan2(-float(c[1]), float(c[0]))
    amp_m, phase_m = math.hypot(c[2], c[3]), math.atan2(-float(c[3]), float(c[2]))
    B = single_frequency_basis(N)[k - 1]  # (4, N, N)
    mean = float(g.mean())
    fitted = mean + torch.einsum("j,jnm->nm", c, B)
    total = float(((g[:, :, 0] - mean) ** 2).sum())
    fve = float(((fitted - mean) ** 2).sum() / total) if total > 0 else float("nan")
    return {
        "k": k,
        "mean": mean,
        "amp_n": amp_n,
        "phase_n": phase_n,
        "amp_m": amp_m,
        "phase_m": phase_m,
        "fitted": fitted,
        "fve": fve,
    }
