"""`identity_qk` sees how much `=` fetches of each operand, not only which keys rank first
(docs/reregistrations/identity_qk_fetches_evenly_2026-12-07.md).

Breaks of Layer 2's scores that keep both operands' values as `=`'s two largest keys (an extra nat of
score for the LHS slot's keys; W_Q x3) hand the adder one operand at a fraction of the other's weight:
the held-out answers fall, and `identity_qk` must fail on `eq_attends_to_operand_values` while the ranking
alone still passes and the claim upstream (`previous_token_head`, whose weights are untouched) passes.
Softer attention that keeps the answers (W_Q x0.8) must pass.
"""

from __future__ import annotations

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses import run_all
from assignadd.hypotheses.base import Context
from assignadd.interventions.mutants import changed_parameters
from assignadd.tests.attention_breaks import keys_attract, queries_scaled

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)
N = 500


@pytest.fixture(scope="module")
def reference():
    return load_checkpoint(assignadd.reference_checkpoint()), Task()


def _fetch_item(result):
    [item] = [e for e in result.evidence if e.name == "eq_attends_to_operand_values"]
    return item


def _build_tokens(task) -> torch.Tensor:
    return torch.cat([task.pool(p, 300, seed=1)[0] for p in ("0var_train", "1var_train", "2var_train")])


@needs_reference
@pytest.mark.parametrize("break_", ["lhs_slot_keys", "sharper_scores"])
def test_an_uneven_fetch_fails_identity_qk_and_nothing_upstream(reference, break_):
    model, task = reference
    if break_ == "lhs_slot_keys":
        mutated = keys_attract(model, "the LHS slot (position 13)", 1.0, _build_tokens(task))
        assert changed_parameters(model, mutated) == ["blocks.1.attn.W_K"]
    else:
        mutated = queries_scaled(model, 3.0)
        assert changed_parameters(model, mutated) == ["blocks.1.attn.W_Q"]
    results = {r.claim: r for r in run_all(Context(mutated, task, seed=0, n=N), ["previous_token_head", "identity_qk"])}
    item = _fetch_item(results["identity_qk"])
    assert results["identity_qk"].verdict == "fail" and not item.passed
    assert item.measurement.high < 0.9
    assert item.measurement.extra["without_even_bar"] >= 0.9  # the two operands still rank first
    assert results["previous_token_head"].verdict == "pass", results["previous_token_head"].reason


@needs_reference
def test_softer_scores_that_keep_the_answers_pass(reference):
    model, task = reference
    mutated = queries_scaled(model, 0.8)
    tokens, targets = task.pool("1var_heldout_pair", 500, seed=0)
    with torch.no_grad():
        assert float((mutated(tokens)[:, -1].argmax(-1) == targets).double().mean()) >= 0.97
    result = run_all(Context(mutated, task, seed=0, n=N), ["identity_qk"])[0]
    assert result.verdict == "pass", result.reason
    assert _fetch_item(result).measurement.low >= 0.95


@needs_reference
def test_the_fetch_is_judged_on_the_kind_of_sequence_where_it_is_worst(reference):
    model, task = reference
    result = run_all(Context(model, task, seed=0, n=N), ["identity_qk"])[0]
    m = _fetch_item(result).measurement
    by_pool = m.extra["by_pool"]
    assert set(by_pool) == {"0var_train", "1var_train", "2var_train"}
    assert m.value == min(by_pool.values()) and by_pool[m.extra["worst_pool"]] == m.value
    assert m.n == N
