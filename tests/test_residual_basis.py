"""A change of basis of the residual stream, x -> x A, is a symmetry of a model without LayerNorm: the
embeddings and every writer (W_O, b_O, W_out, b_out) are multiplied by A, every reader (W_Q, W_K, W_V,
W_in, W_U) by A^-1 on its input side, and every logit is the same up to float rounding.

A rotation keeps every verdict, and so does a stretch of one span for `previous_token_head` and
`shared_residual`: their items in the residual's own coordinates (norms and angles the function does not
fix) are supporting (docs/reregistrations/shared_residual_basis_free_2026-12-07.md,
docs/reregistrations/previous_token_head_basis_free_2026-12-07.md). `fourier_neurons` keeps its verdict in
every basis below, and every value of its items: its placebo directions are drawn in the stream's metric on
the task (docs/reregistrations/fourier_placebo_task_metric_2026-12-07.md) and it reads the answer in the
unembedding's metric or the task's (docs/reregistrations/fourier_readout_basis_free_2026-12-08.md). The
same changes are symmetry mutants of the registry (``residual_*``, tests/test_mutants.py).
"""

from __future__ import annotations

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses import run_all
from assignadd.hypotheses.base import Context
from assignadd.interventions.mutants import random_invertible, random_rotation, residual_change_of_basis, span_stretch
from assignadd.random_streams import torch_generator

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)
N = 500


@pytest.fixture(scope="module")
def reference():
    model = load_checkpoint(assignadd.reference_checkpoint())
    task = Task()
    return model, task, {r.claim: r for r in run_all(Context(model, task, seed=0, n=N), _CLAIMS)}


_CLAIMS = ["previous_token_head", "shared_residual", "fourier_neurons"]


def _basis(model, task, which: str) -> torch.Tensor:
    if which == "rotation":
        return random_rotation(model.cfg.d_model, torch_generator(0, "test residual rotation"))
    if which == "invertible_condition_100":
        return random_invertible(model.cfg.d_model, torch_generator(0, "test residual invertible"), spread=100.0)
    v, W_E = task.vocab, model.embed.W_E.detach()
    rows = W_E[v.first_var : v.first_var + v.n_vars] if which.startswith("variables") else W_E[: v.modulus]
    return span_stretch(rows, 10.0)


def _check_same_function(model, mutated, task):
    tokens = task.pool("1var_train", 200, seed=1)[0]
    with torch.no_grad():
        a, b = model(tokens)[:, -1].log_softmax(-1), mutated(tokens)[:, -1].log_softmax(-1)
    assert float((a - b).abs().max()) < 1e-3
    assert torch.equal(a.argmax(-1), b.argmax(-1))


@pytest.mark.xdist_group("residual_basis_reference")
@needs_reference
@pytest.mark.parametrize(
    "claim, which",
    [
        ("previous_token_head", "rotation"),
        ("previous_token_head", "variables_stretched_10x"),
        ("previous_token_head", "numbers_stretched_10x"),
        ("previous_token_head", "invertible_condition_100"),
        ("shared_residual", "rotation"),
        ("shared_residual", "variables_stretched_10x"),
        ("shared_residual", "numbers_stretched_10x"),
        ("shared_residual", "invertible_condition_100"),
        ("fourier_neurons", "rotation"),
        ("fourier_neurons", "numbers_stretched_10x"),
        ("fourier_neurons", "invertible_condition_100"),
        ("fourier_neurons", "variables_stretched_10x"),
    ],
)
def test_residual_change_of_basis_keeps_verdicts(reference, claim, which):
    model, task, before = reference
    mutated = residual_change_of_basis(model, _basis(model, task, which))
    _check_same_function(model, mutated, task)
    after = run_all(Context(mutated, task, seed=0, n=N), [claim])[0]
    assert after.verdict == before[claim].verdict == "pass", after.reason
    if claim == "fourier_neurons":  # every item's value too: both read-out metrics are the stream's own
        values = {e.name: e.measurement.value for e in before[claim].evidence}
        assert {e.name: e.measurement.value for e in after.evidence} == pytest.approx(values, abs=1e-9)


def test_change_of_basis_keeps_the_function_and_its_original():
    from assignadd.model import AssignAddTransformer, ModelConfig

    model = AssignAddTransformer(seed=3)
    with torch.no_grad():  # biases nonzero, so the writers' biases must move with the basis too
        for name, p in model.named_parameters():
            if name.endswith(("b_O", "b_out", "b_V", "b_Q", "b_K", "b_in", "b_U")) and "blocks.0.mlp" not in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    A = span_stretch(torch.randn(5, model.cfg.d_model, generator=torch.Generator().manual_seed(2)), 7.0)
    mutated = residual_change_of_basis(model, A)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # a copy; the model as it was
    assert not torch.equal(mutated.embed.W_E, model.embed.W_E)
    _check_same_function(model, mutated, Task())
    with pytest.raises(ValueError, match="LayerNorm"):
        residual_change_of_basis(AssignAddTransformer(ModelConfig(layernorm=True), seed=3), A)
