"""The Layer-2 MLP input at `=` for constant and variable operands (SPEC §4.3).

A 1- or 2-variable sequence x = (prefix, + LHS RHS =) has a *constant rewrite* c(x): the same
prefix, with each variable operand at positions 13/14 replaced by the value it is assigned. x and
c(x) ask for the same sum and differ only in how the operands arrive (through Layer 1's routing vs
directly). An *other-values rewrite* c'(x) has the same prefix and constant operands (n', m') with
another sum. The claim is that r(x) = resid_mid_2(x)[15], the Layer-2 MLP input at `=`, is nearly
r(c(x)): one addition module serves both.

Everything here is a plain function of a model and tokens; verdicts live in
``hypotheses/shared_residual.py``.
"""

from __future__ import annotations

import torch

from ...data import POS_EQ, operand_sources
from ...data.tokens import POS_LHS, POS_RHS, VOCAB, Vocab
from ...interventions import Replace, Site, run
from ...model import AssignAddTransformer
from ...model.components import PAPER, Components
from ...random_streams import numpy_rng
from .circuits import fetch_shares, operand_images
from .fourier import activations_at

# Every function reads the sites of the ``components`` it is given, the paper's by default.


def constant_rewrite(tokens: torch.Tensor, vocab: Vocab = VOCAB) -> torch.Tensor:
    """c(x): each variable operand replaced by its assigned value; constants and prefix unchanged.
    Raises if an operand variable has no assignment (not a valid sequence of the task)."""
    src = operand_sources(tokens, vocab)
    if (src < 0).any():
        bad = int((src < 0).any(dim=1).nonzero()[0])
        raise ValueError(f"constant_rewrite: sequence {bad} uses an unassigned variable")
    out = tokens.clone()
    rows = torch.arange(len(tokens))
    out[:, POS_LHS] = tokens[rows, src[:, 0]]
    out[:, POS_RHS] = tokens[rows, src[:, 1]]
    return out


def operand_values(tokens: torch.Tensor, vocab: Vocab = VOCAB) -> torch.Tensor:
    """(num1, num2) per sequence, read through the assignments: (B, 2)."""
    c = constant_rewrite(tokens, vocab)
    return c[:, [POS_LHS, POS_RHS]]


def other_values_rewrite(
    tokens: torch.Tensor, seed: int, vocab: Vocab = VOCAB, *, label: str = "other values rewrite"
) -> tuple[torch.Tensor, torch.Tensor]:
    """c'(x): the same prefix, constant operands (n', m') drawn uniformly among pairs whose sum differs
    from x's, from the stream ``(seed, label)`` (a caller that needs several rewrites names each).
    Returns (tokens, the new sums)."""
    N = vocab.modulus
    vals = operand_values(tokens, vocab)
    s = (vals[:, 0] + vals[:, 1]) % N
    rng = numpy_rng(seed, label)
    n2 = torch.from_numpy(rng.integers(0, N, size=len(tokens)))
    # m' = (s + shift - n') mod N with shift in 1..N-1 gives any other sum, uniformly.
    shift = torch.from_numpy(rng.integers(1, N, size=len(tokens)))
    m2 = (s + shift - n2) % N
    out = tokens.clone()
    out[:, POS_LHS], out[:, POS_RHS] = n2, m2
    return out, (n2 + m2) % N


def centred_cosine(x: torch.Tensor, y: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    """cos(x_i - μ, y_i - μ) per row: (B,). Centring removes what every `=` residual shares (the `=`
    embedding, position 15), which would make any two residuals look alike."""
    x, y = x - mean, y - mean
    return torch.nn.functional.cosine_similarity(x, y, dim=-1, eps=1e-12)


N_REFERENCE_REWRITES = 8


def matched_vs_mismatched(
    model: AssignAddTransformer, tokens: torch.Tensor, seed: int, basis: torch.Tensor, *, components: Components = PAPER
) -> dict:
    """Is r(x) the constant run's r(c(x)), beyond what the shared prefix gives?

    Each sequence's residuals are centred on its own prefix: μ_i = mean_j r(c'_j(x_i)) over
    ``N_REFERENCE_REWRITES`` other-values rewrites (same prefix, other sums). Then per sequence

        matched_i    = cos(r(x_i) - μ_i, r(c(x_i)) - μ_i)
        mismatched_i = cos(r(x_i) - μ_i, r(c'_0(x_i)) - μ_i)     (c'_0 not among the references)

    Centring on the prefix removes what any two runs with the same prefix share (the `=` embedding,
    position 15, the assignments Layer 2 reads), which makes even a re-initialised model's residuals
    look alike; what is left is the operand-dependent part, which the claim says is the same vector.
    ``basis`` (orthonormal rows): compare only the residuals' components in that subspace (the directions
    Layer 2 writes numbers into). Returns {"matched", "mismatched", "raw_matched"
    (uncentred cos(r(x), r(c(x))), the paper's number, in the same subspace)} (B,) each.
    """
    B = len(tokens)
    const = constant_rewrite(tokens, model.vocab)
    rewrites = [
        other_values_rewrite(tokens, seed, model.vocab, label=f"matched vs mismatched rewrite {j}")[0]
        for j in range(N_REFERENCE_REWRITES + 1)
    ]
    RESID_MID2 = components.RESID_MID_2
    r = activations_at(model, torch.cat([tokens, const, *rewrites]), [RESID_MID2])[RESID_MID2]
    r = r.reshape(N_REFERENCE_REWRITES + 3, B, -1)
    r = r @ basis.to(r.dtype).T  # compare only in these directions
    r_var, r_const, r_mis, refs = r[0], r[1], r[2], r[3:]
    mu = refs.mean(0)
    return {
        "matched": centred_cosine(r_var, r_const, mu),
        "mismatched": centred_cosine(r_var, r_mis, mu),
        "raw_matched": torch.nn.functional.cosine_similarity(r_var, r_const, dim=-1),
    }


def ov2_number_images(
    model: AssignAddTransformer, *, components: Components = PAPER, shares: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """OV_2 e_n = W_E[n] W_V W_O of the fetching head (Layer 2's) for every number n, as the left and as the
    right operand: (left, right), (N, d_model) float64 each, the same for a role of one head
    (``circuits.operand_images``; a role of several heads mixes them by ``shares``)."""
    left, right = operand_images(model, components=components, shares=shares)
    if left is right:
        ov = left.detach().double()
        return ov, ov
    return left.detach().double(), right.detach().double()


def ov2_additivity(
    model: AssignAddTransformer, tokens: torch.Tensor, seed: int, *, components: Components = PAPER
) -> dict:
    """Is Layer 2's attention output at `=` the sum of its operands' OV_2 images?

    Per sequence: cos(attn_out_2[15] - μ_a, s_i - μ_s) with s_i = OV_2 e_{n1} + OV_2 e_{n2} (matched)
    and the same with s_{π(i)} for a seeded permutation π (shuffled), μ the means over the pool.
    Returns {"matched", "shuffled", "difference"} (B,) each."""
    vals = operand_values(tokens, model.vocab)
    left, right = ov2_number_images(
        model, components=components, shares=fetch_shares(model, tokens, components=components)
    )
    s = left[vals[:, 0]] + right[vals[:, 1]]
    a = activations_at(model, tokens, [components.ATTN_OUT_2])[components.ATTN_OUT_2]
    perm = torch.from_numpy(numpy_rng(seed, "ov2 additivity shuffle").permutation(len(tokens)))
    mu_a, mu_s = a.mean(0), s.mean(0)
    matched = torch.nn.functional.cosine_similarity(a - mu_a, s - mu_s, dim=-1, eps=1e-12)
    shuffled = torch.nn.functional.cosine_similarity(a - mu_a, s[perm] - mu_s, dim=-1, eps=1e-12)
    return {"matched": matched, "shuffled": shuffled, "difference": matched - shuffled}


def constant_difference_interchange(
    model: AssignAddTransformer,
    tokens: torch.Tensor,
    seed: int,
    *,
    matched: bool = True,
    components: Components = PAPER,
) -> dict:
    """The causal test of a shared residual: move the variable run along a *constant-run* difference.

        r(x)[15]  <-  r(x)[15] + r(c'(x))[15] - r(c(x))[15]          (15: the `=` position)

    If r(x) ≈ r(c(x)) in the directions the Layer-2 MLP and unembedding read, the edited run is r(c'(x))
    and answers c'(x)'s sum; if the variable run used its own representation, subtracting the constant
    run's would not cancel it. Returns {"moved": bool (B,) argmax == c'(x)'s sum, "kept": bool (B,)
    argmax == x's sum}. The control ``matched=False`` subtracts the constant run of *another* sequence's
    values (a seeded permutation) instead of c(x), so nothing cancels x's own operands.
    """
    RESID_MID2 = components.RESID_MID_2
    N = model.cfg.d_vocab_out
    const = constant_rewrite(tokens, model.vocab)
    # one c'(x) for every arm (the claim, the mismatched constant run)
    other, other_sum = other_values_rewrite(tokens, seed, model.vocab, label="constant difference interchange rewrite")
    vals = operand_values(tokens, model.vocab)
    if not matched:
        perm = torch.from_numpy(numpy_rng(seed, "constant difference interchange mismatch").permutation(len(tokens)))
        const = const.clone()
        const[:, [POS_LHS, POS_RHS]] = vals[perm]
    r_const = activations_at(model, const, [RESID_MID2])[RESID_MID2]
    r_other = activations_at(model, other, [RESID_MID2])[RESID_MID2]
    delta = r_other - r_const  # (B, d)

    def add_delta(act, hook):
        return act + delta.to(act.dtype)[:, None, :]  # the Site keeps only `=`

    out = run(model, tokens, [Replace(Site(RESID_MID2, positions=POS_EQ), add_delta)], last_only=True)
    pred = out.last_logits.argmax(-1)
    return {"moved": pred == other_sum, "kept": pred == (vals[:, 0] + vals[:, 1]) % N}


# The read-out's data: this many sequences of each of 0var_train, 1var_train and 2var_train at least
# (more when the context's n is larger). A linear map from d_model = 128 dimensions to 59 targets is
# fitted on half of them; a few hundred examples would let it fit noise, so the size does not follow
# a small n down.
READOUT_POOL_MIN = 1000


def operand_value_readout(
    model: AssignAddTransformer, tokens: torch.Tensor, seed: int, ridge: float = 1e-6, *, components: Components = PAPER
) -> dict:
    """How much of the two operands' values, as the model embeds them, can be read linearly from what
    Layer 2's attention hands the MLP at `=`?

    Layer 2's OV is the component that copies the operands' values into the MLP input; a reader that
    is a linear map of that output can use at most what a linear read-out recovers. The target is
    what OV_2 receives about the numbers, the model's own number embeddings, so a model that embeds
    the numbers in a few Fourier directions only needs to pass those. The read-out does not use the
    MLP's weights, and attn_out_2 is computed before the MLP, so a broken MLP (downstream) cannot move
    it. A rank-r cut of OV_2 caps the score at the share of the target's variance in its top r
    principal directions.

    Target y_i = Ē[n1_i] + Ē[n2_i] (d_model,), Ē = W_E[0:N] centred over the numbers: symmetric in the
    operands, since Layer 2 adds the two values' images and nothing in a sum says which came first;
    n1, n2 read through the assignments (``operand_values``). Features a_i = attn_out_2(x_i)[15]
    (d_model,). A seeded half of the sequences fits W, b by least squares with a ridge ``ridge`` x the
    mean squared centred feature (closed form, float64); on the other half, per sequence,

        score_i = 1 - ||y_i - (a_i W + b)||² / s²,   s² = mean over the held-out half of ||y_j - ȳ_fit||²

    so the mean of score_i over the held-out half is the held-out R² (the share of the values'
    embedded variance the read-out explains). Returns {"score": (B_test,), "fit_size": int}."""
    N = model.cfg.d_vocab_out
    vals = operand_values(tokens, model.vocab)
    E = model.embed.W_E[:N].detach().double()
    E = E - E.mean(0)
    y = E[vals[:, 0]] + E[vals[:, 1]]  # (B, d_model)
    a = activations_at(model, tokens, [components.ATTN_OUT_2])[components.ATTN_OUT_2]  # (B, d_model) float64
    perm = torch.from_numpy(numpy_rng(seed, "operand value read-out split").permutation(len(tokens)))
    fit, held = perm[: len(tokens) // 2], perm[len(tokens) // 2 :]
    a_mean, y_mean = a[fit].mean(0), y[fit].mean(0)
    ac, yc = a[fit] - a_mean, y[fit] - y_mean
    lam = ridge * float(ac.pow(2).sum(-1).mean())  # scale-free: the same fit for a rescaled residual
    if lam == 0.0:  # the output does not vary over the fit half (it carries no number): nothing to read
        W = torch.zeros(a.shape[1], y.shape[1], dtype=torch.float64)
    else:
        W = torch.linalg.solve(ac.T @ ac + lam * torch.eye(a.shape[1], dtype=torch.float64), ac.T @ yc)  # (d, d)
    err = (y[held] - ((a[held] - a_mean) @ W + y_mean)).pow(2).sum(-1)
    spread = (y[held] - y_mean).pow(2).sum(-1).mean()
    return {"score": 1 - err / spread, "fit_size": int(len(fit))}
