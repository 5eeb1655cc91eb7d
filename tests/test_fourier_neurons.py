"""SPEC §4.4, the Fourier-neurons claim, as specifications: planted models where it is true or false by
construction, the re-initialised model, the key frequencies knocked out, determinism."""

from __future__ import annotations

import copy

import math

import pytest

import torch

import assignadd
from assignadd.data import Task
from assignadd.data.tokens import VOCAB
from assignadd.hypotheses import Context
from assignadd.hypotheses.fourier_neurons import FourierNeurons
from assignadd.hypotheses.measures import fourier
from assignadd.interventions import Project, Site, knockout
from assignadd.model import AssignAddTransformer

PLANTED_FREQUENCIES = (3, 11, 17, 25)
N = VOCAB.modulus
# Residual dimensions of the planted model.
FEAT, VAR_ID, POS, COPIED_ID, NUM_FLAG, VAR_FLAG, SLOT_FLAG, EQ_FLAG, ANSWER = 0, 8, 20, 36, 50, 51, 100, 101, 64


def planted_model(fourier_features: bool = True, seed: int = 0) -> AssignAddTransformer:
    """A hand-set model that adds mod 59 through an MLP whose input at `=` is 0.5 (f(n) + f(m)).

    ``fourier_features``: f(n) = A [cos ω_k n, sin ω_k n] for the 4 planted k, and each neuron reads one
    k: pre = cos(ω_k n + α) + cos(ω_k m + α), the claimed form. Otherwise f(n) is a random vector per
    number and neurons read random directions (the claim false by construction). The readout W_out is
    the least-squares fit of [cos ω_k s, sin ω_k s] (s = n + m) on the grid; W_U turns those into
    logits Σ_k cos(ω_k (s - c)).
    Routing: Layer 1 copies each variable's identity into its value token (previous-token head) and
    the identities of the operand variables into `=`; Layer 2's `=` query then attends to the value
    tokens of its operand variables, or to the operand slots holding constants, and copies their
    features. So the MLP input at `=` is the same for constants and variables up to Layer 1's
    identity part, which the MLP does not read: the shared-residual claim is true by construction.
    """
    gen = torch.Generator().manual_seed(seed)
    m = AssignAddTransformer(seed=seed)
    for p in m.parameters():
        p.requires_grad_(False)
        p.zero_()
    V, first_var, K = VOCAB.n_vars, VOCAB.first_var, len(PLANTED_FREQUENCIES)
    A = 4.0
    nums = torch.arange(N, dtype=torch.float64)
    if fourier_features:
        f = torch.stack([g(2 * math.pi * k * nums / N) for k in PLANTED_FREQUENCIES for g in (torch.cos, torch.sin)], 1)
    else:
        f = torch.randn(N, 2 * K, generator=gen, dtype=torch.float64)
        f = f / f.norm(dim=1, keepdim=True) * math.sqrt(K)
    W_E, W_pos = m.embed.W_E, m.pos_embed.W_pos
    W_E[:N, FEAT : FEAT + 2 * K] = (A * f).float()
    W_E[:N, NUM_FLAG] = 1.0
    W_E[first_var : first_var + V, VAR_ID : VAR_ID + V] = torch.eye(V)
    W_E[first_var : first_var + V, VAR_FLAG] = 1.0
    W_pos[:, POS : POS + 16] = torch.eye(16)
    W_pos[13:15, SLOT_FLAG] = 1.0
    W_pos[15, EQ_FLAG] = 1.0
    s = math.sqrt(60.0 * math.sqrt(128))  # a score of 60 where a query meets its key: softmax is hard
    a1, a2 = m.blocks[0].attn, m.blocks[1].attn
    # Layer 1: query t (head dim t) finds key t-1; 13 and 14 look at `+` (12); `=` looks at 13 and 14.
    for t in range(16):
        a1.W_Q[0, POS + t, t] = s
        for key in {13: [12], 14: [12], 15: [13, 14]}.get(t, [t - 1] if t else [0]):
            a1.W_K[0, POS + key, t] = s
    a1.W_V[0, VAR_ID : VAR_ID + V, :V] = torch.eye(V)
    a1.W_O[0, :V, COPIED_ID : COPIED_ID + V] = torch.eye(V)
    # Layer 2 at `=`: identity match (0.5 per operand variable) scores 60, a slot holding a number 60,
    # a slot holding a variable 60 - 120 (+ 60 if it copied an identity, which 13/14 do not), `=` itself -120.
    a2.W_Q[0, COPIED_ID : COPIED_ID + V, :V] = torch.eye(V) * s * 2
    a2.W_K[0, COPIED_ID : COPIED_ID + V, :V] = torch.eye(V) * s
    a2.W_Q[0, EQ_FLAG, V] = s
    a2.W_K[0, SLOT_FLAG, V] = s
    a2.W_K[0, VAR_FLAG, V] = -2 * s
    a2.W_K[0, EQ_FLAG, V] = -2 * s  # `=` carries both identities too: it must not find itself
    a2.W_V[0, FEAT : FEAT + 2 * K, : 2 * K] = torch.eye(2 * K)
    a2.W_O[0, : 2 * K, FEAT : FEAT + 2 * K] = torch.eye(2 * K)
    # Layer-2 MLP: 512 neurons on the features; pre = cos(ω_k n + α) + cos(ω_k m + α) when Fourier.
    mlp = m.blocks[1].mlp
    d_mlp = mlp.W_in.shape[1]
    if fourier_features:
        alpha = torch.rand(d_mlp, generator=gen, dtype=torch.float64) * 2 * math.pi
        which = torch.arange(d_mlp) % K
        W_in = torch.zeros(2 * K, d_mlp, dtype=torch.float64)
        W_in[2 * which, torch.arange(d_mlp)] = torch.cos(alpha) * 2 / A
        W_in[2 * which + 1, torch.arange(d_mlp)] = -torch.sin(alpha) * 2 / A
    else:
        W_in = torch.randn(2 * K, d_mlp, generator=gen, dtype=torch.float64) / A
    mlp.W_in[FEAT : FEAT + 2 * K] = W_in.float()
    # Readout fitted on the grid: post(n, m) W -> [cos ω_k s, sin ω_k s].
    n, mm = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    n, mm = n.flatten(), mm.flatten()
    post = torch.relu((0.5 * A * (f[n] + f[mm])) @ W_in)
    ks = torch.tensor(PLANTED_FREQUENCIES, dtype=torch.float64)
    ssum = ((n + mm) % N).double()
    target = torch.stack([g(2 * math.pi * k * ssum / N) for k in ks for g in (torch.cos, torch.sin)], 1)
    # Ridge, not plain least squares: post has a large near-null space (ReLU of 4 frequencies), where an
    # unregularised solution is huge and not reproducible across BLAS thread counts.
    gram = post.T @ post
    W = torch.linalg.solve(
        gram + 1e-3 * gram.diagonal().mean() * torch.eye(d_mlp, dtype=torch.float64), post.T @ target
    )  # (d_mlp, 2K)
    mlp.W_out[:, ANSWER : ANSWER + 2 * K] = W.float()
    c = torch.arange(N, dtype=torch.float64)
    m.unembed.W_U[ANSWER : ANSWER + 2 * K] = torch.stack(
        [g(2 * math.pi * k * c / N) for k in ks for g in (torch.cos, torch.sin)], 0
    ).float()
    return m.eval()


TEST_N = 200


@pytest.fixture(scope="module")
def task():
    return Task()


def verdict(model, task, seed=0):
    return FourierNeurons().run(Context(model, task, seed=seed, n=TEST_N))


@pytest.fixture(scope="module")
def planted_result(task):
    return verdict(planted_model(True), task)


def by_name(result):
    return {e.name: e for e in result.evidence}


def test_key_frequencies_of_planted_model_are_its_planted_frequencies():
    assert fourier.key_frequencies(planted_model(True)) == list(PLANTED_FREQUENCIES)
    assert fourier.key_frequencies(planted_model(False)) == []


def test_fitted_cos_form_recovers_a_planted_neuron():
    model = planted_model(True)
    neuron = 5  # reads frequency PLANTED_FREQUENCIES[5 % 4]
    fit = fourier.fitted_cos_form(fourier.grids(model)[fourier.MLP2_PRE][:, :, neuron], PLANTED_FREQUENCIES[neuron % 4])
    assert fit["fve"] > 0.999
    assert fit["amp_n"] == pytest.approx(1.0, abs=1e-4) and fit["amp_m"] == pytest.approx(1.0, abs=1e-4)
    assert fit["phase_n"] == pytest.approx(fit["phase_m"], abs=1e-4)


@pytest.mark.xdist_group("fourier_neurons_planted")
def test_fourier_neurons_passes_on_planted_fourier_model(planted_result):
    assert planted_result.verdict == "pass", planted_result.reason
    items = by_name(planted_result)
    assert items["single_frequency_neurons"].measurement.value == 1.0
    assert items["single_frequency_neurons"].measurement.extra["key_frequencies"] == list(PLANTED_FREQUENCIES)
    assert items["key_frequencies_kept"].measurement.value >= 0.95
    assert items["key_frequencies_excluded"].measurement.extra["edited_accuracy"] <= 0.1
    assert items["key_frequencies_vs_placebo"].measurement.extra["placebo_accuracy"] >= 0.95


@pytest.mark.xdist_group("fourier_neurons_planted")
def test_fourier_neurons_fails_on_every_control_of_the_planted_model(planted_result):
    for e in planted_result.evidence:
        for control in e.controls:
            assert not e.control_passed(control), (e.name, control, e.controls[control])


def test_fourier_neurons_fails_on_planted_random_feature_model(task):
    result = verdict(planted_model(False), task)
    assert result.verdict == "fail"
    items = by_name(result)
    assert not items["single_frequency_neurons"].passed
    assert items["single_frequency_neurons"].measurement.value < 0.05
    assert items["single_frequency_neurons"].measurement.extra["key_frequencies"] == []


def test_fourier_neurons_fails_on_reinitialised_model(task):
    result = verdict(AssignAddTransformer(seed=123), task)
    assert result.verdict == "fail"
    assert not any(e.passed for e in result.evidence)


def test_fourier_neurons_fails_when_key_frequencies_projected_out(task):
    model = planted_model(True)
    directions = fourier.frequency_directions(fourier.grids(model)[fourier.RESID_MID2], list(PLANTED_FREQUENCIES))
    ablated = knockout(model, [Project(Site(fourier.RESID_MID2, positions=15), directions, mode="remove")])
    result = verdict(ablated, task)
    assert result.verdict == "fail"
    items = by_name(result)
    assert items["single_frequency_neurons"].measurement.extra["key_frequencies"] == []
    assert not items["key_frequencies_kept"].passed


@pytest.mark.xdist_group("fourier_neurons_planted")
def test_fourier_neurons_is_deterministic_given_the_context_seed(task, planted_result):
    again = verdict(planted_model(True), task)
    assert again.to_dict() == planted_result.to_dict()


def test_report_figures_show_the_claims_own_key_frequencies(task):
    """The spectrum figure is drawn from the claim's analysis: its key set is the claim's, on the planted
    model (known frequencies) and on a re-initialised one (none)."""
    from assignadd.hypotheses.measures.fourier import key_frequencies
    from assignadd.reports.figures import fourier_figures

    for model in (planted_model(True), AssignAddTransformer(seed=3)):
        spectrum = [f for f in fourier_figures(model, task) if f.key == "fourier_spectrum"][0]
        keys = ", ".join(str(k) for k in key_frequencies(model)) or "none"
        assert f"(dashed; k = {keys})" in str(spectrum.caption)


def test_operand_content_scale_is_the_least_squares_scale():
    phi = torch.randn(50, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert fourier.operand_content_scale(0.8 * phi, phi) == pytest.approx(0.8, abs=1e-12)
    noise = torch.randn(50, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    noise -= (noise * phi).sum() / (phi * phi).sum() * phi  # orthogonal to phi: no effect on the scale
    assert fourier.operand_content_scale(1.3 * phi + noise, phi) == pytest.approx(1.3, abs=1e-12)
    assert fourier.operand_content_scale(noise, torch.zeros_like(phi)) == 1.0  # no operand content: no rescaling


def test_scale_of_a_planted_model_is_one():
    tokens, labels = Task().pool("0var_train", 200, seed=1)
    e = fourier.key_frequency_edits(planted_model(True), tokens, labels, seed=0)
    assert e["scale"] == pytest.approx(1.0, abs=1e-6)


def test_placebo_directions_are_a_projection_in_the_tasks_metric_that_a_change_of_basis_carries_along():
    """The placebo removes (x - μ) P: P a rank-k projection, orthogonal in the metric of the task's second
    moment, acting only on the directions the task uses; written in another basis (rows and deviations
    times A), the whitened draw is the same up to a rotation, so the size of what it removes in the task's
    metric keeps its distribution (here: the mean over many seeds, within a few percent)."""
    gen = torch.Generator().manual_seed(0)
    d, used, k = 20, 12, 3
    basis = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))[0][:, :used]
    rows = (torch.randn(4000, used, generator=gen, dtype=torch.float64) * torch.logspace(0, 2, used)) @ basis.T
    dev = rows[:300]
    part = fourier.random_directions_part(dev, rows, k, seed=0)
    again = fourier.random_directions_part(part, rows, k, seed=0)
    assert torch.allclose(again, part, atol=1e-9)  # a projection
    assert torch.linalg.matrix_rank(part) == k
    S_plus = torch.linalg.pinv(rows.T @ rows / len(rows), hermitian=True, rtol=1e-10)
    assert float((part @ S_plus * (dev - part)).sum(-1).abs().max()) < 1e-8  # orthogonal in the task's metric
    outside = torch.randn(5, d, generator=gen, dtype=torch.float64)
    outside = outside - outside @ basis @ basis.T  # a direction the task never uses is left as it is
    assert float(fourier.random_directions_part(outside, rows, k, seed=0).abs().max()) < 1e-9

    A = torch.randn(d, d, generator=gen, dtype=torch.float64)  # an ill-conditioned change of basis

    def removed(rows, dev, seeds=range(200)):
        S_plus = torch.linalg.pinv(rows.T @ rows / len(rows), hermitian=True, rtol=1e-10)
        sizes = [
            (p @ S_plus * p).sum(-1).mean() for p in (fourier.random_directions_part(dev, rows, k, s) for s in seeds)
        ]
        return float(torch.stack(sizes).mean())

    assert removed(rows @ A, dev @ A) == pytest.approx(removed(rows, dev), rel=0.05)


@pytest.mark.parametrize("step", [2500, 10000])
def test_steps_where_the_pools_operand_content_is_smaller_than_the_grids_pass(task, step):
    """The two shipped checkpoints at which the claim used to flip (docs/claims/fourier_neurons.md, "Re-registrations"):
    there the pools carry the operands at 0.8 of the grid's scale, and removing φ_K unscaled left a fifth
    of the answers readable. With the scale fitted, removing the key frequencies takes the answer away."""
    from pathlib import Path

    from assignadd.model import load_checkpoint

    path = Path(__file__).resolve().parent.parent / "checkpoints" / "series" / f"step_{step:06d}.pt"
    model = load_checkpoint(path)
    tokens, labels = task.pool("0var_train", 400, seed=3)
    e = fourier.key_frequency_edits(model, tokens, labels, seed=0)
    assert 0.75 < e["scale"] < 0.85
    assert float(e["clean"].double().mean()) > 0.95
    assert float(e["excluded"].double().mean()) < 0.15  # unscaled, about 0.2 survived
    assert float(e["placebo"].double().mean()) > 0.9
    result = FourierNeurons().run(Context(model, task, seed=0, n=600))
    assert result.verdict == "pass", result.reason


def answer_directions_cut(model):
    """W_U with the answer directions of the unembedding's input (the span of the grid's answer centroids
    about their mean) projected out of its input side: a break of the unembedding alone, the MLP untouched."""
    D = fourier.answer_centroids(model, fourier.grids(model))
    _, S, Vh = torch.linalg.svd(D - D.mean(0), full_matrices=False)
    P = Vh[S > 1e-6 * S[0]]
    cut = copy.deepcopy(model)
    with torch.no_grad():
        W = cut.unembed.W_U.double()
        cut.unembed.W_U.copy_((W - P.T @ (P @ W)).float())
    return cut


@pytest.mark.skipif(not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing")
@pytest.mark.parametrize("broken", ["unembedding_input_rotated", "answer_directions_cut"])
def test_a_break_of_the_unembedding_alone_cannot_take_the_answer_read_away(task, broken):
    """A break downstream of the MLP leaves the task metric's reading of every arm exactly as it was, and
    every arm reads at least that, while what W_U reads collapses; on the unbroken model the reading
    agrees with W_U. (With the answer directions cut, the unembedding's metric reads nothing: the task's
    metric is what keeps the claim about the MLP from being decided by W_U.)"""
    from assignadd.interventions.mutants import MUTANTS
    from assignadd.model import load_checkpoint

    model = load_checkpoint(assignadd.reference_checkpoint())
    mutated = MUTANTS[broken](model, 0) if broken in MUTANTS else answer_directions_cut(model)
    tokens, labels = task.pool("0var_heldout_pair", 300, seed=5)
    before = fourier.key_frequency_edits(model, tokens, labels, seed=0)
    after = fourier.key_frequency_edits(mutated, tokens, labels, seed=0)
    for arm in ("clean", "kept", "excluded", "placebo", "placebo_kept", "random_removed"):
        assert before["by_metric"][arm]["task"] == after["by_metric"][arm]["task"], arm
        assert float(after[arm].double().mean()) >= after["by_metric"][arm]["task"], arm
    assert before["through_unembedding"]["clean"] > 0.95 and after["through_unembedding"]["clean"] < 0.2
    assert float(before["clean"].double().mean()) > 0.95 and float(after["clean"].double().mean()) > 0.9
    assert float(after["kept"].double().mean()) > 0.9 and float(after["excluded"].double().mean()) < 0.15
    if broken == "answer_directions_cut":
        assert after["by_metric"]["clean"]["unembedding"] < 0.2
