"""SPEC §4.3, the shared-residual claim, as specifications: a planted model where it is true by
construction, the re-initialised model, the mechanism knocked out (Layer-2 OV scrambled; the MLP
input at `=` mean-ablated), the constant rewrite itself, determinism."""

from __future__ import annotations

import copy

import pytest
import torch

import assignadd
from assignadd import load_checkpoint

from assignadd.data import Task
from assignadd.data.tokens import POS_LHS, POS_RHS
from assignadd.hypotheses import Context
from assignadd.hypotheses.measures import residual
from assignadd.hypotheses.shared_residual import SharedResidual
from assignadd.interventions import Mean, Replace, Site, knockout
from assignadd.model import AssignAddTransformer

from .test_fourier_neurons import planted_model

TEST_N = 200
needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


@pytest.fixture(scope="module")
def task():
    return Task()


def verdict(model, task, seed=0):
    return SharedResidual().run(Context(model, task, seed=seed, n=TEST_N))


def by_name(result):
    return {e.name: e for e in result.evidence}


@pytest.fixture(scope="module")
def planted_result(task):
    return verdict(planted_model(True), task)


def test_constant_rewrite_replaces_variables_by_their_values(task):
    tokens, labels = task.pool("2var_train", 50, seed=3)
    const = residual.constant_rewrite(tokens)
    assert (const[:, :12] == tokens[:, :12]).all()
    assert (const[:, [POS_LHS, POS_RHS]] < 59).all()
    assert torch.equal((const[:, POS_LHS] + const[:, POS_RHS]) % 59, labels)
    other, sums = residual.other_values_rewrite(tokens, seed=0)
    assert (sums != labels).all() and (other[:, :12] == tokens[:, :12]).all()


@pytest.mark.xdist_group("shared_residual_planted")
def test_shared_residual_passes_on_planted_routing_model(planted_result):
    assert planted_result.verdict == "pass", planted_result.reason
    items = by_name(planted_result)
    assert items["resid_mid_matches_constant_run"].measurement.value > 0.95
    assert items["ov2_mlp2_accuracy"].measurement.value > 0.99
    assert items["constant_difference_moves_variable_run"].measurement.value > 0.95


@pytest.mark.xdist_group("shared_residual_planted")
def test_shared_residual_fails_on_every_control_of_the_planted_model(planted_result):
    for e in planted_result.evidence:
        for control in e.controls:
            assert not e.control_passed(control), (e.name, control, e.controls[control])


def test_shared_residual_fails_on_reinitialised_model(task):
    result = verdict(AssignAddTransformer(seed=123), task)
    assert result.verdict == "fail"
    assert not any(e.passed for e in result.evidence if e.required)


def test_shared_residual_fails_when_layer2_ov_scrambled(task):
    """Layer 2's output at `=` replaced by that of a shuffled batch: the operands no longer reach the MLP."""
    model = planted_model(True)

    def scramble(act, hook):
        return act[torch.randperm(act.shape[0], generator=torch.Generator().manual_seed(0))]

    ablated = knockout(
        model,
        [Replace(Site("blocks.1.hook_attn_out", positions=15), scramble)],
        probe_tokens=torch.zeros(4, 16, dtype=torch.long),
    )
    result = verdict(ablated, task)
    assert result.verdict == "fail"
    assert not by_name(result)["constant_difference_moves_variable_run"].passed


def test_shared_residual_fails_when_resid_mid_at_eq_mean_ablated(task):
    model = planted_model(True)
    reference = task.pool("2var_train", 100, seed=9)[0]
    ablated = knockout(model, [Mean(Site("blocks.1.hook_resid_mid", positions=15), reference)])
    result = verdict(ablated, task)
    # What Layer 2 writes is intact (attn_out_2 still carries the operands), and the MLP input no longer
    # responds to anything: the route item's control patches in another number and changes nothing, which
    # is an error, never a point for the claim. The cosine (supporting since 2026-12-07) sees nothing left.
    assert result.verdict == "error" and "other_number on value_route_shared changed nothing" in result.reason
    items = by_name(result)
    assert not items["resid_mid_matches_constant_run"].passed
    assert items["constant_difference_moves_variable_run"].measurement.value < 0.1


@pytest.mark.xdist_group("shared_residual_planted")
def test_shared_residual_is_deterministic_given_the_context_seed(task, planted_result):
    assert verdict(planted_model(True), task).to_dict() == planted_result.to_dict()


def _values_gained_where_layer2_reads_little(model, task, directions: int = 32, gain: float = 30.0):
    """The reference with Layer 2's W_V multiplied, on its input side, by ``gain`` along the ``directions``
    directions of its input (blocks.1.hook_resid_pre, 0-, 1- and 2-var training sequences, every
    position) with the least second moment: a near no-op, since the task barely uses them."""
    tokens = torch.cat([task.pool(p, 500, seed=7)[0] for p in ("0var_train", "1var_train", "2var_train")])
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "blocks.1.hook_resid_pre")
    x = cache["blocks.1.hook_resid_pre"].reshape(-1, model.cfg.d_model).double()
    least = torch.linalg.eigh(x.T @ x / len(x)).eigenvectors[:, :directions]
    mutated = copy.deepcopy(model)
    with torch.no_grad():
        W_V = mutated.blocks[1].attn.W_V
        W_V.copy_(
            ((torch.eye(model.cfg.d_model, dtype=torch.float64) + (gain - 1) * least @ least.T) @ W_V.double()).float()
        )
    return mutated


@needs_reference
def test_a_near_no_op_on_layer2_values_keeps_the_claim_where_the_euclidean_gain_does_not(task):
    """The re-registration's own instance (docs/reregistrations/shared_residual_basis_free_2026-12-07.md):
    answers kept, the weight-space gain ov2_transmits_numbers (supporting) below its bar of 2, the claim
    decided by what the MLP receives, and passed."""
    model = load_checkpoint(assignadd.reference_checkpoint())
    mutated = _values_gained_where_layer2_reads_little(model, task)
    tokens = torch.cat(
        [task.pool(p, 500, seed=3)[0] for p in ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair")]
    )
    with torch.no_grad():
        same = (model(tokens)[:, -1].argmax(-1) == mutated(tokens)[:, -1].argmax(-1)).double().mean()
    assert same >= 0.99
    result = SharedResidual().run(Context(mutated, task, seed=0, n=500))
    items = by_name(result)
    assert items["ov2_transmits_numbers"].measurement.value < 2.0 and not items["ov2_transmits_numbers"].required
    assert result.verdict == "pass", result.reason


@needs_reference
def test_a_working_layer2_ov_from_an_earlier_checkpoint_keeps_the_claim(task):
    """Layer 2's W_V, b_V, W_O, b_O from step 7,000 of the shipped run put into the final model: the answers
    stay (>= 0.98 held out), and the claim passes on what the MLP receives, where the cosine (supporting
    since docs/reregistrations/shared_residual_basis_free_2026-12-07.md) reads the geometry the adder does
    not need and straddles its bar."""
    model = load_checkpoint(assignadd.reference_checkpoint())
    early = load_checkpoint(assignadd.reference_checkpoint().parent / "series" / "step_007000.pt")
    mutated = copy.deepcopy(model)
    with torch.no_grad():
        for name in ("W_V", "b_V", "W_O", "b_O"):
            getattr(mutated.blocks[1].attn, name).copy_(getattr(early.blocks[1].attn, name))
    pools = [task.pool(p, 500, seed=3) for p in ("0var_heldout_pair", "1var_heldout_pair", "2var_heldout_pair")]
    tokens, labels = torch.cat([p[0] for p in pools]), torch.cat([p[1] for p in pools])
    with torch.no_grad():
        assert (mutated(tokens)[:, -1].argmax(-1) == labels).double().mean() >= 0.98
    result = SharedResidual().run(Context(mutated, task, seed=0, n=500))
    assert by_name(result)["resid_mid_matches_constant_run"].status != "pass"
    assert result.verdict == "pass", result.reason


def test_an_output_that_carries_no_number_reads_nothing_and_fails_rather_than_erring(task):
    """Layer 2's values with the numbers projected out of a hand-built solver: what Layer 2 writes at `=`
    is the same for every sequence, so the read-out's fit has nothing to invert; it reads nothing (score
    0), and the claim fails on it instead of erring."""
    from assignadd.hypotheses.mutation import build_mutant
    from assignadd.tests.planted import planted_solver

    model = build_mutant("layer2_numbers_out_of_values", planted_solver(), 0)
    tokens = torch.cat([task.pool(name, 200, seed=0)[0] for name in ("0var_train", "1var_train")])
    r = residual.operand_value_readout(model, tokens, seed=0)
    assert float(r["score"].mean()) == pytest.approx(0.0, abs=0.05)
    result = SharedResidual().run(Context(model, task, seed=0, n=200))
    assert result.verdict == "fail" and "attn_out_2_carries_operand_values" in result.reason
