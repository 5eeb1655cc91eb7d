"""The claims' own regression tests: each mechanistic claim fails where it should.

The claims passing on the bundled checkpoint are checked by the pytest plugin
(``pytest -m assignadd_claim --assignadd-checkpoint reference``, run by ``make test``); here, the
negative side: a re-initialised model, each mechanism knocked out of the reference, and the early
checkpoints of the shipped series. Pools are smaller than the default 2000 where the effect is large.
"""

from __future__ import annotations

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses import REGISTRY, Context, run_all
from assignadd.tests.knockouts import key_frequencies_removed, scrambled_identity_qk, uniform_value_attention
from assignadd.training.fast_forward import hooks_attached

MECHANISTIC = ["previous_token_head", "identity_qk", "shared_residual", "fourier_neurons"]

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


@pytest.fixture(scope="module")
def reference():
    return load_checkpoint(assignadd.reference_checkpoint())


@pytest.fixture(scope="module")
def task():
    return Task()


def verdicts(model, task, ids, n):
    return {r.claim: r for r in run_all(Context(model, task, n=n), ids)}


def test_registry_lists_the_seven_claims_in_report_order():
    assert list(REGISTRY) == [
        "previous_token_head",
        "identity_qk",
        "shared_residual",
        "fourier_neurons",
        "heldout_generalization",
        "restricted_slot_generalization",
        "whole_algorithm",
    ]


def test_mechanistic_claims_fail_on_reinitialised_model(task):
    model = assignadd.AssignAddTransformer(seed=123)
    results = verdicts(model, task, MECHANISTIC, n=300)
    assert {c: r.verdict for c, r in results.items()} == {c: "fail" for c in MECHANISTIC}


@needs_reference
def test_previous_token_head_fails_when_value_attention_is_uniform(reference, task):
    knocked = uniform_value_attention(reference)
    r = verdicts(knocked, task, ["previous_token_head"], n=500)["previous_token_head"]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert not items["value_attends_to_variable"].passed
    assert items["value_attends_to_variable"].measurement.value < 0.3
    # with no attention to t-1 left, there is no identity for its removal to take away
    assert not items["identity_needs_previous_token"].passed


@needs_reference
def test_constant_addition_survives_broken_previous_token_head(reference, task):
    """The paper: constants need no binding. 0-var held-out accuracy keeps its bar; 1-var collapses."""
    knocked = uniform_value_attention(reference)
    r = verdicts(knocked, task, ["heldout_generalization"], n=2000)["heldout_generalization"]
    items = {e.name: e for e in r.evidence}
    assert items["accuracy[0var_heldout_pair]"].passed
    assert items["accuracy[1var_heldout_pair]"].measurement.value < 0.5
    assert r.verdict == "fail"


@needs_reference
def test_identity_qk_fails_when_qk_variable_block_is_permuted(reference, task):
    knocked = scrambled_identity_qk(reference, seed=0)
    r = verdicts(knocked, task, ["identity_qk"], n=500)["identity_qk"]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert items["eq_attends_to_operand_values"].measurement.value < 0.5
    assert items["attention_follows_identity_swap"].measurement.value < 0.3
    assert items["answer_follows_identity_swap"].measurement.value < 0.3
    # the knock-out acts through hooks at value tokens; the weights themselves are unchanged
    assert items["identity_block_diagonal"].passed


@needs_reference
def test_knockouts_leave_the_reference_unchanged(reference, task):
    tokens, _ = task.pool("2var_train", 64)
    before = reference(tokens)
    uniform_value_attention(reference)(tokens)
    scrambled_identity_qk(reference)(tokens)
    assert torch.equal(reference(tokens), before)
    assert not hooks_attached(reference)


@pytest.mark.skipif(not assignadd.reference_series(), reason="the bundled checkpoint series is missing")
def test_binding_claims_fail_early_and_pass_at_the_end_of_the_series(task):
    series = {int(p.stem.split("_")[1]): p for p in assignadd.reference_series()}
    ids = ["previous_token_head", "identity_qk"]
    early = verdicts(load_checkpoint(series[2000]), task, ids, n=500)
    last = verdicts(load_checkpoint(series[max(series)]), task, ids, n=500)
    assert {c: r.verdict for c, r in early.items()} == {"previous_token_head": "fail", "identity_qk": "fail"}
    assert {c: r.verdict for c, r in last.items()} == {"previous_token_head": "pass", "identity_qk": "pass"}


def test_claim_results_are_deterministic(task):
    model = assignadd.AssignAddTransformer(seed=5)
    a = [r.to_dict() for r in run_all(Context(model, task, n=200, seed=3), ["previous_token_head", "identity_qk"])]
    b = [r.to_dict() for r in run_all(Context(model, task, n=200, seed=3), ["previous_token_head", "identity_qk"])]
    assert a == b


def test_adding_a_hypothesis_recipe_runs_as_written(capsys):
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parent.parent / "docs" / "adding_a_hypothesis.md"
    code = re.search(r"```python\n(.*?)```", page.read_text(), re.S).group(1)
    before = list(REGISTRY)
    exec(compile(code, str(page), "exec"), {})
    verdict, site, own, after = capsys.readouterr().out.splitlines()
    assert verdict.startswith("fail ")
    assert site == "blocks.1.hook_attn_out at `=`; read at the logits at `=`"
    assert (own, after) == ("fail", "pass")
    assert list(REGISTRY) == before


def test_a_malformed_declaration_is_refused_when_registered():
    """``register`` validates before anything is measured: each defect is one line naming the claim."""
    from dataclasses import replace

    from assignadd.hypotheses.base import Hypothesis, register
    from assignadd.hypotheses.declaration import DeclarationError, Kind

    good = REGISTRY["identity_qk"]
    causal = next(i for i in good.items if i.kind is Kind.CAUSAL and i.required)

    def claim(**changes):
        attrs = {"id": "malformed", "spec": "x", "statement": "x", "controls": dict(good.controls)}
        attrs["items"] = good.items
        return type("Malformed", (Hypothesis,), attrs | changes)

    cases = {
        "declared twice": claim(items=good.items + (causal,)),
        "no required causal item": claim(items=tuple(replace(i, required=False) for i in good.items)),
        "not described": claim(controls={"reinitialised": "x"}),
        "used by no item": claim(controls=dict(good.controls) | {"spare": "x"}),
        "layout lacks": claim(items=good.items + (replace(causal, name="elsewhere", site="$ATTN_OUT_9"),)),
        "unknown component": claim(owns="layer3"),
        "unknown role": claim(reads=("adder",)),
    }
    for words, cls in cases.items():
        with pytest.raises(DeclarationError, match=words):
            register(cls)
        assert "malformed" not in REGISTRY


@needs_reference
def test_fourier_neurons_fails_when_key_frequencies_are_projected_out_of_the_reference(reference, task):
    knocked = key_frequencies_removed(reference, task.pool("0var_train", 200, seed=9)[0])
    r = verdicts(knocked, task, ["fourier_neurons"], n=500)["fourier_neurons"]
    assert r.verdict == "fail"
    assert not {e.name: e for e in r.evidence}["key_frequencies_kept"].passed


@needs_reference
def test_shared_residual_fails_when_layer2_output_at_eq_is_scrambled_in_the_reference(reference, task):
    from assignadd.interventions import Replace, Site, knockout

    def scramble(act, hook):
        return act[torch.randperm(act.shape[0], generator=torch.Generator().manual_seed(0))]

    knocked = knockout(
        reference,
        [Replace(Site("blocks.1.hook_attn_out", positions=15), scramble)],
        probe_tokens=torch.zeros(4, 16, dtype=torch.long),
    )
    r = verdicts(knocked, task, ["shared_residual"], n=500)["shared_residual"]
    assert r.verdict == "fail"
    items = {e.name: e for e in r.evidence}
    assert not items["resid_mid_matches_constant_run"].passed
    assert not items["constant_difference_moves_variable_run"].passed


def test_ridge_probe_predicts_as_scikit_learns_ridge_classifier(reference, task):
    """The identity probe is written in torch (no scikit-learn import on the verify path); on the
    reference's own Layer-1 output at value tokens it must give scikit-learn's predictions exactly."""
    from sklearn.linear_model import RidgeClassifier

    from assignadd.data import value_positions
    from assignadd.hypotheses.measures.local import RidgeProbe
    from assignadd.interventions import capture
    from assignadd.model.hooks import ATTN_OUT_1

    tokens = task.pool("2var_train", 600, seed=3)[0]
    b, t = value_positions(tokens).nonzero(as_tuple=True)
    X, y = capture(reference, tokens, [ATTN_OUT_1])[ATTN_OUT_1][b, t].double(), tokens[b, t - 1]
    half = len(y) // 2
    ours = RidgeProbe(X[:half], y[:half]).predict(X[half:])
    theirs = RidgeClassifier(alpha=1.0).fit(X[:half].numpy(), y[:half].numpy()).predict(X[half:].numpy())
    assert torch.equal(ours, torch.from_numpy(theirs))
    assert 0.5 < float((ours == y[half:]).double().mean()) <= 1.0  # a probe that reads, not a constant
