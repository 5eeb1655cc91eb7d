"""Interfaces between components (hypotheses/interfaces.py): a recoding on either side of an interface
is reported as interface-broken, naming both claims; a break inside a component is not; an unbroken model
is intact and fits nothing."""

from __future__ import annotations

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses import Context, run_all
from assignadd.hypotheses.interfaces import (
    BAR,
    POOLS,
    TRAINED,
    _fit_pool,
    _pool,
    broken_naming,
    check,
    check_all,
    declared,
)
from assignadd.hypotheses.mutation import build_mutant
from assignadd.interventions.mutants import changed_parameters
from assignadd.reports import render
from assignadd.tests.mlp_breaks import frequency_outputs_exchanged
from assignadd.tests.recodings import CHECKED_IN_THE_BREAK_MATRIX, RECODINGS, assert_recoding_localized

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


@pytest.fixture(scope="module")
def reference():
    return load_checkpoint(assignadd.reference_checkpoint())


def verdicts(model, n=400) -> dict:
    checks = check_all(Context(model, Task(), seed=0, n=n))
    return {c["interface"]: c for c in checks}


@needs_reference
def test_the_reference_is_intact_at_every_interface_and_fits_nothing(reference):
    got = verdicts(reference)
    assert {k: c["verdict"] for k, c in got.items()} == {
        "ov1_to_layer2": "intact",
        "ov2_to_mlp": "intact",
        "mlp_to_unembedding": "intact",
    }
    assert all(c["recoded"] is None and c["plain"]["ci"][0] >= BAR.value for c in got.values())


SLOW_RECODINGS = {"layer2_keys_rotated", "layer2_queries_rotated"}  # over 10 s each
# Layer 1's values rotated (an exact recoding of what it writes, found with the fit's 300 iterations) is
# checked the same way, in the same pattern, by the reference's break matrix (tests/test_mutants.py), as
# are the recodings in CHECKED_IN_THE_BREAK_MATRIX.


@needs_reference
@pytest.mark.parametrize(
    "name, where",
    [
        pytest.param(n, w, marks=[pytest.mark.slow] if n in SLOW_RECODINGS else [])
        for n, w in RECODINGS
        if n not in CHECKED_IN_THE_BREAK_MATRIX
    ],
)
def test_a_recoding_breaks_its_interface_and_no_other(reference, name, where):
    """The interface recoded is broken; those after it are not a recoding; those before it are upstream of
    the break (``assert_recoding_localized``)."""
    assert_recoding_localized(check_all(Context(build_mutant(name, reference, seed=0), Task(), seed=0, n=400)), where)


@pytest.mark.slow
@needs_reference
@pytest.mark.parametrize(
    "name", ["layer1_keys_rotated", "mlp_neurons_permuted", "layer2_values_rotated", "layer2_ov_rank8"]
)
def test_a_break_inside_a_component_is_not_a_recoding(reference, name):
    """What the broken component writes is no affine function of what it wrote. (Layer 1's value input
    rotated is one: Layer 1's OV is injective on what it reads, so its output is recoded, not lost.)"""
    got = verdicts(build_mutant(name, reference, seed=0))
    assert {c["verdict"] for c in got.values()} == {"not a recoding"}
    assert all(c["recoded"]["ci"][1] < BAR.value for c in got.values())


@needs_reference
def test_only_the_asked_interfaces_are_returned_and_localized_over_all(reference):
    """``check_all(ctx, claims)`` keeps the interfaces naming those claims; the localization is over all
    of them, in the model's order (``declared()``)."""
    from assignadd.model.components import PAPER

    assert [i.name for i in declared()] == ["ov1_to_layer2", "ov2_to_mlp", "mlp_to_unembedding"]
    assert [i.hook(PAPER) for i in declared()] == [
        "blocks.0.hook_attn_out",
        "blocks.1.hook_attn_out",
        "blocks.1.hook_mlp_out",
    ]
    mutated = build_mutant("layer2_value_bias_shifted", reference, seed=0)
    [only] = check_all(Context(mutated, Task(), seed=0, n=400), claims=["previous_token_head"])
    assert only["interface"] == "ov1_to_layer2" and only["verdict"] == "upstream of the break"
    assert only["hook"] == "blocks.0.hook_attn_out at every position"


def test_the_report_shows_a_broken_interface_in_every_form():
    plain = {"value": 0.02, "ci": [0.01, 0.03], "n": 1500, "extra": {}}
    recoded = {"value": 0.95, "ci": [0.93, 0.96], "n": 600, "extra": {}}
    interfaces = [
        {
            "interface": "ov2_to_mlp",
            "writer": "shared_residual",
            "reader": "fourier_neurons",
            "reads": "the Layer-2 MLP",
            "hook": "blocks.1.hook_attn_out at `=`",
            "verdict": "interface-broken",
            "plain": plain,
            "recoded": recoded,
            "bar": 0.9,
            "reason": "the two sides disagree",
        }
    ]
    common = dict(
        checkpoint={"path": "x.pt", "sha256": "0" * 64, "format": "assignadd.checkpoint/1", "step": 1, "size_bytes": 1},
        model_config={},
        task={"f": 0.7},
        task_source="checkpoint",
        seed=0,
        n=10,
        device="cpu",
        only=None,
        claims=[],
        tool_version="t",
    )
    report = render.build_report(**common, interfaces=interfaces)
    assert report["summary"]["interfaces_broken"] == ["ov2_to_mlp"]
    assert "interface ov2_to_mlp (shared_residual -> fourier_neurons): interface-broken" in render.terminal_table(
        report
    )
    assert "interface broken: ov2_to_mlp" in render.summary_line(report)
    assert "| ov2_to_mlp (shared_residual -> fourier_neurons) | interface-broken | 0.02" in render.markdown(report)
    assert "interface-broken" in render.html_page(report)
    # without interface checks (another layout) the document has neither field
    bare = render.build_report(**common)
    assert "interfaces" not in bare and "interfaces_broken" not in bare["summary"]


@needs_reference
def test_the_fit_draws_its_own_sequences_apart_from_the_scored_pool(reference):
    """The recoding is fitted on ``fit_per_pool`` sequences of each training pool drawn for the fit alone
    (docs/reregistrations/interface_fit_draw_2026-12-05.md): none of the scored rows, the same draw for the
    same seed, another for another interface."""
    ctx = Context(reference, Task(), seed=0, n=400)
    scored = {tuple(t) for t in _pool(ctx)[0].tolist()}
    draws = {}
    for interface in declared():
        tokens, labels = _fit_pool(ctx, interface)
        assert tokens.shape[0] == labels.shape[0] == interface.fit_per_pool * len(POOLS)
        assert torch.equal(tokens, _fit_pool(ctx, interface)[0])
        rows = [tuple(t) for t in tokens.tolist()]
        assert sum(r in scored for r in rows) < 0.01 * len(rows)  # a repeat is a coincidence of two draws
        draws[interface.name] = tokens
    assert not torch.equal(draws["ov1_to_layer2"], draws["mlp_to_unembedding"])


@needs_reference
def test_layer1s_recoding_runs_the_models_own_forward_from_layer1_on(reference):
    """The fit at Layer 1's output recomputes the answers from that layer's block input plus its recoded
    output, hook-free; with A = I and c = 0 that is the model's own hooked forward, to float rounding, and
    a recoding there reaches the answers."""
    from assignadd.hypotheses.interfaces import _activations, _logits_from_layer1

    ctx = Context(reference, Task(), seed=0, n=200)
    tokens, _ = _pool(ctx)
    layer = ctx.components.prev_layer
    with torch.no_grad():
        acts = _activations(reference, tokens[1000:1600], ctx.components)  # 1-var sequences: they need Layer 1
        same = _logits_from_layer1(reference, layer, acts["layer1_in"] + acts["layer1_out"])
        assert float((same - acts["answers"]).abs().max()) < 1e-3
        assert torch.equal(same.argmax(-1), acts["answers"].argmax(-1))
        flattened = _logits_from_layer1(reference, layer, acts["layer1_in"] + acts["layer1_out"].mean((0, 1)))
        assert (flattened.argmax(-1) != acts["answers"].argmax(-1)).float().mean() > 0.3


@needs_reference
def test_a_recoding_that_leaves_the_answers_above_the_bar_is_named_when_a_fit_restores_them(reference):
    """Two key frequencies' neurons exchange what they write (``tests/mlp_breaks.py``): the training answers
    stay above 0.9, below a trained model's 0.98, and a recoding at the MLP's output restores them. The
    MLP's claim reads its output on its own grid and passes; the interface names it."""
    mutated = frequency_outputs_exchanged(reference, 22, 6)
    assert changed_parameters(reference, mutated) == ["blocks.1.mlp.W_out"]
    got = verdicts(mutated)
    last = got["mlp_to_unembedding"]
    assert BAR.value <= last["plain"]["ci"][0] and last["plain"]["value"] < TRAINED.value  # intact before 2026-12-07
    assert last["verdict"] == "interface-broken" and last["recoded"]["ci"][0] > last["plain"]["ci"][1]
    assert got["ov2_to_mlp"]["verdict"] == got["ov1_to_layer2"]["verdict"] == "upstream of the break"
    assert broken_naming(list(got.values()), "fourier_neurons") == "mlp_to_unembedding"
    assert run_all(Context(mutated, Task(), seed=0, n=400), ["fourier_neurons"])[0].verdict == "pass"


def test_a_partly_trained_checkpoint_is_fitted_and_stays_intact():
    """Step 6,000 of the shipped series answers its training pools below 0.98: the interface at the MLP's
    output is fitted, and no recoding there does better than the model as it is (the other two behave
    alike: ``python tools/interface_trained_bar.py``)."""
    [last] = [i for i in declared() if i.name == "mlp_to_unembedding"]
    c = check(Context(load_checkpoint(assignadd.reference_series()[12]), Task(), seed=0, n=400), last)
    assert BAR.value <= c["plain"]["ci"][0] and c["plain"]["value"] < TRAINED.value
    assert c["recoded"] is not None and c["recoded"]["ci"][0] <= c["plain"]["ci"][1]
    assert c["verdict"] == "intact"


@pytest.mark.slow
@needs_reference
def test_a_constant_shift_of_layer1s_output_is_localized_at_layer1s_interface(reference):
    """Layer 1's b_O plus a constant (``tests/output_breaks.py``): the shift reaches Layer 2's output at `=`
    through the residual stream, where a recoding with an offset restores the answers too (0.93), but an
    offset at Layer 1's output undoes it exactly (0.999), significantly more: the break is Layer 1's, and
    the later interface is downstream of it. ``previous_token_head`` passes (its items read attention
    patterns and centred probes, which a constant leaves as they were); the interface names it."""
    from .output_breaks import layer1_output_shifted

    got = verdicts(layer1_output_shifted(reference))
    assert got["ov1_to_layer2"]["verdict"] == "interface-broken"
    assert got["ov1_to_layer2"]["recoded"]["ci"][0] > got["ov2_to_mlp"]["recoded"]["ci"][1] >= BAR.value
    assert got["ov2_to_mlp"]["verdict"] == "downstream of the break" and "ov1_to_layer2" in got["ov2_to_mlp"]["reason"]
    checks = list(got.values())
    assert broken_naming(checks, "previous_token_head") == "ov1_to_layer2"
    assert broken_naming(checks, "fourier_neurons") is None  # ov2_to_mlp's writer and reader are not named


@pytest.mark.slow
@needs_reference
def test_where_two_interfaces_restore_the_answers_alike_the_later_is_the_break(reference):
    """Layer 2's value bias shifted: a recoding at Layer 1's output makes up for it (0.993), one at Layer 2's
    output restores it at least as well (0.999): the break is Layer 2's, and Layer 1's interface upstream."""
    got = verdicts(build_mutant("layer2_value_bias_shifted", reference, seed=0))
    assert got["ov1_to_layer2"]["recoded"]["ci"][0] >= BAR.value  # it does restore them ...
    assert got["ov1_to_layer2"]["verdict"] == "upstream of the break"  # ... but not significantly more
    assert got["ov2_to_mlp"]["verdict"] == "interface-broken"
