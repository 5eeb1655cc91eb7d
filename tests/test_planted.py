"""Hypotheses on planted models: hand-set weights where each claim is true or false by
construction (``tests/planted.py``), so a verdict can be checked against the known answer.

* ``planted_solver``: the paper's mechanism, exactly, with a lookup-table MLP. §4.1, §4.2 and §4.5
  must pass; §4.4 (Fourier neurons) must fail, as nothing in it is periodic.
* ``planted_no_previous_token``: value tokens attend to themselves in Layer 1. §4.1 must fail, and
  0-var answers must survive (constants need no binding).
* ``planted_permuted_identity_qk``: Layer 2's identity block maps variable i to pi(i). §4.2 must fail;
  Layer 1's routing (measured directly) and 0-var answers must survive.

Pools of 300 (``Context(n=300)``): the planted models are exact, so small pools decide cleanly.
"""

from __future__ import annotations

import pytest
import torch

from assignadd.data import POOL_NAMES, Task
from assignadd.hypotheses import REGISTRY, Context
from assignadd.hypotheses.measures.circuits import (
    last_position_correct,
    layer1_eq_to_operand_slots,
    positional_prev_token_rows,
    prev_token_attention,
)
from assignadd.tests.planted import (
    planted_no_previous_token,
    planted_permuted_identity_qk,
    planted_solver,
)

# The tests share the planted contexts and their claim results (module fixtures): one pytest-xdist worker.
pytestmark = pytest.mark.xdist_group("planted")

POOL_SIZE = 300
MODELS = {
    "solver": planted_solver,
    "no_previous_token": planted_no_previous_token,
    "permuted_identity_qk": planted_permuted_identity_qk,
}


@pytest.fixture(scope="module")
def contexts(paper_task: Task) -> dict[str, Context]:
    """One context per planted model, sharing the solver context's pools."""
    pools: dict = {}
    base = Context(MODELS["solver"](), paper_task, n=POOL_SIZE, pools=pools)

    def context(model):  # a control is read at the solver's components, not searched again
        return Context(model, paper_task, n=POOL_SIZE, pools=pools).pin(base.located)

    return {name: base if name == "solver" else context(build().eval()) for name, build in MODELS.items()}


@pytest.fixture(scope="module")
def verdict(contexts):
    """``verdict(model_name, claim_id)`` -> ClaimResult, each run once per module."""
    results = {}

    def get(model: str, claim: str):
        if claim not in REGISTRY:
            pytest.skip(f"hypothesis {claim!r} is not registered")
        if (model, claim) not in results:
            results[model, claim] = REGISTRY[claim]().run(contexts[model])
        return results[model, claim]

    return get


def accuracy(ctx: Context, pool: str) -> float:
    tokens, labels = ctx.pool(pool)
    with torch.no_grad():
        return float(last_position_correct(ctx.model, tokens, labels).double().mean())


def evidence(result, name: str):
    found = [e for e in result.evidence if e.name == name]
    assert found, f"{result.claim} has no evidence item {name!r}; items: {[e.name for e in result.evidence]}"
    return found[0]


def failed_items(result) -> set[str]:
    return {e.name for e in result.evidence if e.required and not e.passed}


# ----- the solver: the mechanism, true by construction ---------------------------------------------


@pytest.mark.parametrize("pool", POOL_NAMES)
def test_planted_solver_answers_every_pool(contexts, pool):
    assert accuracy(contexts["solver"], pool) >= 0.99


def test_planted_solver_adds_every_heldout_pair_as_constants(contexts, paper_task):
    tokens, labels = paper_task.exhaustive_0var_heldout()
    with torch.no_grad():
        assert bool(last_position_correct(contexts["solver"].model, tokens, labels).all())


@pytest.mark.parametrize(
    "claim",
    [
        "previous_token_head",
        "identity_qk",
        "shared_residual",
        "heldout_generalization",
        "restricted_slot_generalization",
        "whole_algorithm",
    ],
)
def test_claim_passes_on_planted_solver(verdict, claim):
    result = verdict("solver", claim)
    assert result.verdict == "pass", result.reason


def test_previous_token_head_passes_on_planted_solver_with_every_item(verdict):
    """Optional items too: the planted Layer 1 is positional, and OV_1 writes the identity one-hot."""
    result = verdict("solver", "previous_token_head")
    assert all(e.passed for e in result.evidence), [e.name for e in result.evidence if not e.passed]


def test_identity_qk_block_is_diagonal_on_planted_solver(verdict):
    item = evidence(verdict("solver", "identity_qk"), "identity_block_diagonal")
    assert item.measurement.value == 1.0


def test_fourier_neurons_fails_on_planted_lookup_mlp(verdict):
    """The Layer-2 MLP is a table, one neuron per unordered pair, on one-hot numbers: no neuron is
    explained by one frequency, so the observational item fails whatever the causal ones say."""
    result = verdict("solver", "fourier_neurons")
    assert result.verdict == "fail", result.reason
    assert "single_frequency_neurons" in failed_items(result)


# ----- no previous-token head: §4.1 false by construction -------------------------------------------


def test_previous_token_head_fails_when_value_tokens_attend_to_themselves(verdict):
    result = verdict("no_previous_token", "previous_token_head")
    assert result.verdict == "fail", result.reason
    failed = failed_items(result)
    assert "value_attends_to_variable" in failed
    # nothing left to destroy: the binding is already gone
    assert "identity_needs_previous_token" in failed


def test_eq_still_attends_to_operand_slots_without_previous_token_head(verdict):
    """The variant changes value-token rows only; `=`'s Layer-1 row is the solver's."""
    assert evidence(verdict("no_previous_token", "previous_token_head"), "eq_attends_to_operand_slots").passed


def test_constant_answers_survive_without_previous_token_head(contexts, verdict):
    ctx = contexts["no_previous_token"]
    assert accuracy(ctx, "0var_train") >= 0.99 and accuracy(ctx, "0var_heldout_pair") >= 0.99
    assert evidence(verdict("no_previous_token", "previous_token_head"), "ablation_spares_constants").passed


def test_variable_answers_collapse_without_previous_token_head(contexts):
    for pool in ("1var_train", "2var_train"):
        assert accuracy(contexts["no_previous_token"], pool) <= 0.2, pool


# ----- permuted identity block: §4.2 false by construction ------------------------------------------


def test_identity_qk_fails_when_planted_qk_block_is_permuted(verdict):
    result = verdict("permuted_identity_qk", "identity_qk")
    assert result.verdict == "fail", result.reason
    assert failed_items(result) >= {"eq_attends_to_operand_values", "attention_follows_identity_swap"}
    assert not evidence(result, "identity_block_diagonal").passed  # supporting since 2026-12-04; fails too


def test_identity_qk_block_has_no_diagonal_row_when_permuted(verdict):
    item = evidence(verdict("permuted_identity_qk", "identity_qk"), "identity_block_diagonal")
    assert item.measurement.value == 0.0


def test_layer1_routing_survives_a_permuted_qk_block(contexts):
    """Layer 1 is the solver's: value tokens still attend to their variable and `=` to the operand
    slots. (Measured directly: §4.1's causal item cannot pass here, as with routing broken there is no
    variable accuracy for its ablation to destroy.)"""
    ctx = contexts["permuted_identity_qk"]
    tokens = torch.cat([ctx.pool("1var_train")[0], ctx.pool("2var_train")[0]])
    on_previous, _ = prev_token_attention(ctx.model, tokens)
    assert bool(on_previous.all())
    assert bool(layer1_eq_to_operand_slots(ctx.model, tokens).all())
    assert bool(positional_prev_token_rows(ctx.model).all())


def test_constant_answers_survive_a_permuted_qk_block(contexts):
    ctx = contexts["permuted_identity_qk"]
    assert accuracy(ctx, "0var_train") >= 0.99 and accuracy(ctx, "0var_heldout_pair") >= 0.99
    assert accuracy(ctx, "2var_train") <= 0.2
