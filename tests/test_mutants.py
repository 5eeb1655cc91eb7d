"""Mutation testing: a verdict must be about one mechanism (SPEC §6).

Each mutant changes one component and keeps every other weight bit-identical. On the bundled
reference, every judged cell of the claim x mutant matrix must come out as the pattern predicts: for
a break mutant the broken component's claim fails, every claim upstream of it passes, behaviour
claims fail; for a symmetry mutant (the same function, other weights) every claim's verdict and
deciding values are the unbroken checkpoint's.
"""

from __future__ import annotations

import copy

import pytest
import torch

import assignadd
from assignadd import Task, load_checkpoint
from assignadd.hypotheses.mutation import (
    build_mutant,
    evidence_values,
    expected,
    matrix_to_dict,
    mutation_matrix,
    render_matrix,
    symmetry_changes,
)
from assignadd.interventions.mutants import COMPONENTS, MUTANTS, RESIDUAL_STREAM, changed_parameters
from assignadd.model import AssignAddTransformer
from assignadd.tests.recodings import CHECKED_IN_THE_BREAK_MATRIX, RECODINGS, assert_recoding_localized

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)

# The parameters each component owns: a mutant may change these and nothing else.
# (A symmetry mutant of a layer's OV changes W_O, of its QK the key bias, of the MLP W_out: these belong
# to the component whose function the pair computes.)
OWNED = {
    "layer1_previous_token": {
        "blocks.0.attn.W_Q",
        "blocks.0.attn.b_Q",
        "blocks.0.attn.W_K",
        "blocks.0.attn.b_K",
        "blocks.0.attn.W_V",
        "blocks.0.attn.b_V",
        "blocks.0.attn.W_O",
    },
    "layer2_identity_qk": {"blocks.1.attn.W_Q", "blocks.1.attn.b_Q", "blocks.1.attn.W_K", "blocks.1.attn.b_K"},
    "layer2_ov": {"blocks.1.attn.W_V", "blocks.1.attn.b_V", "blocks.1.attn.W_O"},
    "layer2_mlp": {"blocks.1.mlp.W_in", "blocks.1.mlp.b_in", "blocks.1.mlp.W_out"},
    "unembedding": {"unembed.W_U", "unembed.b_U"},
    # a change of basis: the embeddings, every writer (W_O, b_O, W_out, b_out) and every reader's input side
    "residual_stream": {"embed.W_E", "pos_embed.W_pos", "unembed.W_U"}
    | {f"blocks.{i}.attn.{w}" for i in (0, 1) for w in ("W_Q", "W_K", "W_V", "W_O", "b_O")}
    | {"blocks.1.mlp.W_in", "blocks.1.mlp.W_out", "blocks.1.mlp.b_out"},
}
BREAKS = [n for n, m in MUTANTS.items() if m.kind == "break"]
SYMMETRIES = [n for n, m in MUTANTS.items() if m.kind == "symmetry"]
# The changes of basis of the residual stream: the same function, yet the items read in the stream's own
# coordinates (supporting ones) move with it, so they keep verdicts and required values, not every value.
BASES = [n for n in SYMMETRIES if MUTANTS[n].component == RESIDUAL_STREAM]


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_mutant_changes_only_its_own_component(name):
    model = AssignAddTransformer(seed=3)
    if name == "mlp_key_frequencies_removed":  # a random model has no key frequencies: refused, not a no-op
        with pytest.raises(ValueError, match="no key frequencies"):
            build_mutant(name, model, seed=0)
        with pytest.raises(ValueError, match="needs directions"):  # the measurement comes from the caller
            MUTANTS[name](model, seed=0)
        return
    mutated = build_mutant(name, model, seed=0)
    changed = set(changed_parameters(model, mutated))
    assert changed, f"{name} changed nothing"
    assert changed <= OWNED[MUTANTS[name].component], changed
    assert torch.equal(model.blocks[0].attn.W_Q, AssignAddTransformer(seed=3).blocks[0].attn.W_Q)  # original intact


def test_mutants_import_nothing_from_the_claims():
    """Imports point down: interventions/mutants.py names components, never claims or their measures."""
    import ast

    import assignadd.interventions.mutants as mutants_module

    tree = ast.parse(Path(mutants_module.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and not [m for m in imported if "hypotheses" in m], imported


def test_mutants_are_deterministic_given_a_seed():
    model = AssignAddTransformer(seed=3)
    a, b = MUTANTS["layer2_keys_rotated"](model, 1), MUTANTS["layer2_keys_rotated"](model, 1)
    c = MUTANTS["layer2_keys_rotated"](model, 2)
    assert torch.equal(a.blocks[1].attn.W_K, b.blocks[1].attn.W_K)
    assert not torch.equal(a.blocks[1].attn.W_K, c.blocks[1].attn.W_K)


def test_expected_pattern_follows_the_circuit_order():
    m = MUTANTS["layer2_values_rotated"]
    assert [expected(c, m) for c in ("previous_token_head", "identity_qk", "shared_residual", "fourier_neurons")] == [
        "pass",
        "pass",
        "fail",
        "not judged",
    ]
    assert expected("heldout_generalization", m) == "fail"
    assert expected("heldout_generalization", m, unbroken="fail") == "not judged"
    assert {MUTANTS[n].component for n in MUTANTS} == {*COMPONENTS, RESIDUAL_STREAM}
    assert {MUTANTS[n].component for n in SYMMETRIES} == {*COMPONENTS, RESIDUAL_STREAM}  # each has a symmetry
    assert expected("previous_token_head", MUTANTS["residual_invertible"], "pass") == "pass"
    s = MUTANTS["layer2_qk_gauge"]  # a symmetry keeps every verdict, failing ones included
    assert [expected("identity_qk", s, v) for v in ("pass", "fail", "inconclusive")] == ["pass", "fail", "inconclusive"]


@needs_reference
@pytest.mark.parametrize("name", ["layer2_ov_rank4", "layer2_ov_rank8"])
def test_an_ov2_rank_cut_fails_shared_residual_on_what_layer2_hands_on(name):
    """OV_2 cut to rank 4 or 8 keeps its strongest number directions (``ov2_transmits_numbers`` rises),
    but passes only r directions of the operands' embeddings: the read-out item fails it, the upstream
    claims pass, and an MLP break leaves the read-out where the reference has it."""
    from assignadd.hypotheses import Context, run_all
    from assignadd.hypotheses.shared_residual import READOUT

    model = load_checkpoint(assignadd.reference_checkpoint())
    items = {}
    for label, m in (("reference", model), ("mutant", build_mutant(name, model, seed=0))):
        results = {
            r.claim: r
            for r in run_all(Context(m, Task(), n=200), only=["previous_token_head", "identity_qk", "shared_residual"])
        }
        items[label] = {e.name: e for e in results["shared_residual"].evidence}
        if label == "mutant":
            assert [results[c].verdict for c in ("previous_token_head", "identity_qk", "shared_residual")] == [
                "pass",
                "pass",
                "fail",
            ]
    read = "attn_out_2_carries_operand_values"
    assert items["mutant"][read].measurement.high < READOUT.value < items["reference"][read].measurement.low
    assert (
        items["mutant"]["ov2_transmits_numbers"].measurement.value
        > items["reference"]["ov2_transmits_numbers"].measurement.value
    )
    [downstream] = [
        r
        for r in run_all(
            Context(build_mutant("mlp_input_rotated", model, seed=0), Task(), n=200), only=["shared_residual"]
        )
    ]
    got = {e.name: e.measurement.value for e in downstream.evidence}[read]
    assert got == pytest.approx(items["reference"][read].measurement.value, abs=1e-9)


# The break matrix on the reference in three parts, each a test of its own, so that pytest-xdist can run
# them side by side (the whole matrix is about 3 minutes of one core). Each part runs the unbroken
# reference again, since that run decides which of its cells are judged. The assertions are those of the
# whole matrix, each made in the part that holds its mutant; what spans the parts is counted below from
# the expected pattern.
MATRIX_PARTS = 3
SEEN_AT_INTERFACE = {
    ("previous_token_head", "layer1_output_noised"),
    ("previous_token_head", "layer1_values_rotated"),
    ("shared_residual", "layer2_output_recoded"),
    ("shared_residual", "layer2_value_bias_shifted"),
    ("fourier_neurons", "mlp_output_rotated"),
}


def _expected_cells(mutants) -> list[str]:
    """The expected verdict of every cell of ``mutants`` when every claim passes the unbroken checkpoint."""
    from assignadd.hypotheses import REGISTRY

    return [expected(c, MUTANTS[m]) for m in mutants for c in REGISTRY]


def test_the_break_matrix_judges_125_cells_and_expects_passes_upstream():
    """What the parts below add up to: 125 judged cells over the 23 break mutants when every claim passes
    the unbroken reference, and at least 12 of them upstream claims expected to pass. The recodings whose
    interface checks only the matrix asserts are breaks its own claim does not fail (tests/recodings.py)."""
    assert len(BREAKS) == 23
    assert CHECKED_IN_THE_BREAK_MATRIX <= {m for _, m in SEEN_AT_INTERFACE} & {n for n, _ in RECODINGS}
    assert sorted(m for part in range(MATRIX_PARTS) for m in BREAKS[part::MATRIX_PARTS]) == sorted(BREAKS)
    cells = _expected_cells(BREAKS)
    assert sum(1 for e in cells if e != "not judged") == 125
    assert sum(1 for e in cells if e == "pass") >= 12


@needs_reference
@pytest.mark.slow
@pytest.mark.parametrize("part", range(MATRIX_PARTS))
def test_every_judged_cell_of_the_mutant_matrix_is_right_on_the_reference(part):
    mutants = BREAKS[part::MATRIX_PARTS]
    model = load_checkpoint(assignadd.reference_checkpoint())
    # Only the judged cells are run (``judged_only``): the cells downstream of a break are never judged.
    matrix = mutation_matrix(model, Task(), seed=0, n=500, mutants=mutants, judged_only=True)
    doc = matrix_to_dict(matrix)
    assert doc["summary"]["wrong"] == [], render_matrix(doc)
    assert all(c["right"] is not None for c in doc["cells"])  # nothing was run that is not judged
    # every claim passes the unbroken reference, so this part judges the cells the pattern judges (125 in all)
    assert set(doc["unbroken"].values()) == {"pass"}
    assert doc["summary"]["judged"] == sum(1 for e in _expected_cells(mutants) if e != "not judged")
    # Five breaks recode an interface: the own claim does not fail, and the broken interface names it
    # (hypotheses/interfaces.py); the matrix counts that as seen, and says so in the cell.
    seen_at_interface = {(c["claim"], c["mutant"]) for c in doc["cells"] if c["verdict"] != "fail" and c["interface"]}
    assert {(c, m) for c, m in SEEN_AT_INTERFACE if m in mutants} <= seen_at_interface
    intact = {"ov1_to_layer2": "intact", "ov2_to_mlp": "intact", "mlp_to_unembedding": "intact"}
    assert doc["interfaces"]["(unbroken)"] == intact
    for recoded_layer1 in {"layer1_output_noised", "layer1_values_rotated"} & set(mutants):
        assert doc["interfaces"][recoded_layer1] == {
            "ov1_to_layer2": "interface-broken",
            "ov2_to_mlp": "not a recoding",
            "mlp_to_unembedding": "not a recoding",
        }
    # The recodings among the breaks: the interface recoded is named, and localized (tests/recodings.py)
    for name, where in RECODINGS:
        if name in CHECKED_IN_THE_BREAK_MATRIX and name in mutants:
            assert_recoding_localized(matrix["interfaces"][name], where)
    # A break its own claim fails needs no interface fit, and gets none
    assert "mlp_neurons_permuted" not in doc["interfaces"]
    # the matrix is not trivially "everything fails": upstream claims pass on downstream breaks
    passes = [c for c in doc["cells"] if c["expected"] == "pass"]
    assert len(passes) == sum(1 for e in _expected_cells(mutants) if e == "pass")
    assert all(c["verdict"] == "pass" for c in passes)


# ----- symmetry mutants: the same function, so the same verdicts and deciding values ----------------
# The per-component claims read weights and activations; the behaviour claims read only answers, which
# the logits test below fixes. n = 200: a claim's values on a symmetry mutant must equal the unbroken
# model's at any n, and 200 keeps eleven mutants x four claims within a few minutes on two cores.
SYMMETRY_N = 200
COMPONENT_CLAIMS = ("previous_token_head", "identity_qk", "shared_residual", "fourier_neurons")
# A value may move by float rounding (a probe fitted on activations equal to ~1e-5, a ratio of weight
# norms to ~1e-7); a moved example in a rate over ~100 moves it by >= 0.005.
SYMMETRY_TOLERANCE = 1e-3


@needs_reference
def test_symmetry_mutants_keep_the_answers_log_probabilities():
    """Each symmetry mutant gives the same answer log-probabilities at `=` as the reference (to float32
    rounding) on 3,000 task sequences, and the same answer everywhere: it is the same function."""
    model = load_checkpoint(assignadd.reference_checkpoint())
    ctx = Context(model, Task(), n=1000)
    tokens = torch.cat([ctx.pool(p)[0] for p in ("0var_train", "1var_train", "2var_train")])
    with torch.no_grad():
        base = torch.log_softmax(model(tokens)[:, -1].double(), -1)
        for name in SYMMETRIES:
            mutated = build_mutant(name, model, seed=0)
            assert changed_parameters(model, mutated), f"{name} changed nothing"
            got = torch.log_softmax(mutated(tokens)[:, -1].double(), -1)
            assert float((got - base).abs().max()) < 1e-3, name
            assert torch.equal(got.argmax(-1), base.argmax(-1)), name


@pytest.fixture(scope="module")
def symmetry_results():
    model = load_checkpoint(assignadd.reference_checkpoint())
    doc = mutation_matrix(model, Task(), seed=0, n=SYMMETRY_N, mutants=SYMMETRIES, claims=COMPONENT_CLAIMS)
    return doc


@pytest.mark.slow
@pytest.mark.xdist_group("mutants_symmetry")
@needs_reference
def test_every_claim_keeps_its_verdict_on_every_symmetry_mutant(symmetry_results):
    doc = matrix_to_dict(symmetry_results)
    assert doc["summary"]["wrong"] == [], render_matrix(doc)
    # the same function: every interface stays intact
    assert {v for checks in doc["interfaces"].values() for v in checks.values()} == {"intact"}
    assert doc["summary"]["judged"] == len(SYMMETRIES) * len(COMPONENT_CLAIMS)


@pytest.mark.slow
@pytest.mark.xdist_group("mutants_symmetry")
@needs_reference
def test_every_deciding_value_is_unchanged_on_every_symmetry_mutant(symmetry_results):
    """Every evidence value of every component claim, controls included, equals the unbroken model's; on a
    change of basis of the residual stream, every verdict, and every required item's value but the three
    still read in the stream's own coordinates (``BASIS_DEPENDENT``, docs/mutation_results/README.md)."""
    changes = symmetry_changes(symmetry_results)
    assert set(changes) == set(SYMMETRIES)
    moved = [
        f"{name}: {c['at']} moved {c['largest_value_change']:.3g}; verdicts {c['verdicts_changed']}; {c['other_changes']}"
        for name, c in changes.items()
        if name not in BASES
        and (c["largest_value_change"] > SYMMETRY_TOLERANCE or c["verdicts_changed"] or c["other_changes"])
    ]
    assert not moved, "\n".join(moved)
    for name in BASES:
        assert changes[name]["compared"] == "required items"
        assert not changes[name]["verdicts_changed"] and not changes[name]["other_changes"], (name, changes[name])
        assert set(_required_moves(symmetry_results, name)) <= BASIS_DEPENDENT, name
    # the comparison sees a change: the unbroken results against a mutant's with one value moved
    unbroken = symmetry_results["results"]["(unbroken)"]
    nudged = copy.deepcopy(unbroken)
    first = nudged[0].evidence[0].measurement
    first.value = (first.value or 0.0) + 0.5
    fake = {**symmetry_results, "mutants": [SYMMETRIES[0]], "results": {"(unbroken)": unbroken, SYMMETRIES[0]: nudged}}
    assert symmetry_changes(fake)[SYMMETRIES[0]]["largest_value_change"] == pytest.approx(0.5)


# The required items whose values a change of basis of the residual stream still moves (their verdicts
# stay): a ridge probe with a Euclidean penalty, an R² with the error's Euclidean norm, a ratio of Euclidean
# norms of residual changes. Issue 39; the strict expected failure below passes when they are fixed.
BASIS_DEPENDENT = {
    "previous_token_head.identity_needs_previous_token",
    "shared_residual.attn_out_2_carries_operand_values",
    "shared_residual.value_route_shared",
}


def _required_moves(matrix: dict, name: str) -> dict:
    """{claim.item: (unbroken, mutant)} for the required items whose values moved by more than the tolerance."""
    from assignadd.hypotheses.mutation import evidence_values

    base = evidence_values(matrix["results"]["(unbroken)"], required_only=True)
    got = evidence_values(matrix["results"][name], required_only=True)
    return {
        k: (v, got[k])
        for k, v in base.items()
        if isinstance(v, float) and isinstance(got[k], float) and abs(got[k] - v) > SYMMETRY_TOLERANCE
    }


@pytest.mark.slow
@pytest.mark.xdist_group("mutants_symmetry")
@needs_reference
@pytest.mark.xfail(strict=True, reason="three required items still read the residual stream's own coordinates")
def test_every_required_value_is_unchanged_on_every_change_of_basis(symmetry_results):
    moved = {name: _required_moves(symmetry_results, name) for name in BASES}
    assert not any(moved.values()), moved


def _weight_readings(model) -> dict:
    """What the component claims read off weights: the OV gains, the identity-QK interaction's rows and
    margins, and the key frequencies."""
    from assignadd.hypotheses.measures import fourier, local
    from assignadd.hypotheses.measures.circuits import identity_qk_interaction

    M = identity_qk_interaction(model).double()
    return {
        "ov1": local.ov1_variable_transmission(model),
        "ov2": local.ov2_number_transmission(model),
        "identity_rows": M.argmax(dim=1).tolist(),
        "identity_diagonal": M.diagonal().tolist(),
        "key_frequencies": fourier.key_frequencies(model),
    }


@pytest.mark.parametrize("step", [20000, 28000])
def test_weight_readings_are_invariant_on_two_more_trained_checkpoints(step):
    """Steps 20,000 and 28,000 of the shipped series (the same seed as the reference: no other seed's
    checkpoint is in the repository): every weight reading of the claims is the same on each symmetry
    mutant. (The claims' activation-level items on these checkpoints: docs/mutation_results/README.md.)"""
    path = assignadd.reference_checkpoint().parent / "series" / f"step_{step:06d}.pt"
    if not path.exists():
        pytest.skip(f"{path.name} is missing")
    model = load_checkpoint(path)
    base = _weight_readings(model)
    assert base["key_frequencies"] and base["ov1"] > 2 and base["ov2"] > 2  # a trained model: something to keep
    for name in [n for n in SYMMETRIES if n not in BASES]:  # the OV gains are norms in the stream's own basis
        got = _weight_readings(build_mutant(name, model, seed=0))
        assert got["identity_rows"] == base["identity_rows"] and got["key_frequencies"] == base["key_frequencies"], name
        for k in ("ov1", "ov2"):
            assert got[k] == pytest.approx(base[k], rel=1e-5), (name, k)
        assert got["identity_diagonal"] == pytest.approx(base["identity_diagonal"], rel=1e-3, abs=1e-3), name


# ----- the decision rule: controls must act, intervals that straddle are inconclusive ----------------
from assignadd.hypotheses.base import Evidence, Measurement, Threshold, decide  # noqa: E402

BAR = Threshold(0.8, ">=", "test bar")


def causal(m, controls=None):
    return Evidence("x", "x", "causal", BAR, m, controls or {})


def test_a_control_with_no_data_makes_the_claim_error_never_a_pass():
    verdict, reason = decide([causal(Measurement(0.95, 0.9, 0.99, 100), {"c": Measurement(None, None, None, 0)})])
    assert verdict == "error" and "c on x had no data" in reason


def test_a_control_that_changed_nothing_makes_the_claim_error():
    idle = Measurement(0.1, 0.05, 0.15, 100, acted=0.0)
    verdict, reason = decide([causal(Measurement(0.95, 0.9, 0.99, 100), {"c": idle})])
    assert verdict == "error" and "changed nothing" in reason
    acted = Measurement(0.1, 0.05, 0.15, 100, acted=0.3)
    assert decide([causal(Measurement(0.95, 0.9, 0.99, 100), {"c": acted})])[0] == "pass"


def test_an_interval_straddling_its_bar_is_inconclusive_with_a_sample_estimate():
    verdict, reason = decide([causal(Measurement(0.82, 0.75, 0.88, 200))])
    assert verdict == "inconclusive" and "samples" in reason
    assert decide([causal(Measurement(0.7, 0.6, 0.78, 200))])[0] == "fail"
    # a control straddling the bar cannot be counted as failed either
    assert (
        decide([causal(Measurement(0.95, 0.9, 0.99, 100), {"c": Measurement(0.8, 0.7, 0.9, 100)})])[0] == "inconclusive"
    )


# ----- every control acts on the reference ---------------------------------------------------------------
from assignadd.hypotheses import Context, run_all  # noqa: E402
from assignadd.hypotheses.base import ACTED_MIN  # noqa: E402
from pathlib import Path  # noqa: E402
import json  # noqa: E402

GOLDEN_N = 500
GOLDEN = Path(__file__).resolve().parent / "golden" / "reference_n500.json"
# A rate over 500 examples moves by 0.002 per flipped example: 0.01 lets a few examples differ between
# machines (float summation order) and still catches a refactor that moves a number.
GOLDEN_TOLERANCE = 0.01


golden_numbers = evidence_values  # {claim.item[.control]: value} and each claim's verdict


@pytest.fixture(scope="module")
def reference_results():
    model = load_checkpoint(assignadd.reference_checkpoint())
    return run_all(Context(model, Task(), n=GOLDEN_N))


@pytest.mark.slow
@pytest.mark.xdist_group("mutants_golden")
@needs_reference
def test_every_control_of_every_required_item_acts_on_the_reference_and_fails_there(reference_results):
    results = reference_results
    seen = 0
    for r in results:
        for e in r.evidence:
            if not e.required:
                continue
            for name, m in e.controls.items():
                seen += 1
                assert m.n, f"{r.claim}.{e.name} control {name} had no data"
                if name != "reinitialised":  # every other control is an edit of the model under test
                    assert m.acted is not None and m.acted > ACTED_MIN, f"{r.claim}.{e.name} control {name}"
                assert e.control_status(name) == "fail", f"{r.claim}.{e.name} passes on its control {name}"
    assert seen >= 25


@pytest.mark.slow
@pytest.mark.xdist_group("mutants_golden")
@needs_reference
def test_golden_numbers_of_the_reference_are_unchanged(reference_results):
    """Every evidence value of the bundled reference (n = 500, seed 0), recorded once by
    ``python tools/golden.py`` and compared at a tolerance: a refactor that moves a number is seen.
    Regenerate only for a change that is meant to move numbers, and say so in the commit."""
    want = json.loads(GOLDEN.read_text())
    got = golden_numbers(reference_results)
    assert set(got) == set(want), f"items added or removed: {sorted(set(got) ^ set(want))}"
    moved = [
        f"{k}: {want[k]} -> {got[k]}"
        for k in want
        if isinstance(want[k], str)
        and got[k] != want[k]
        or isinstance(want[k], float)
        and (got[k] is None or abs(got[k] - want[k]) > GOLDEN_TOLERANCE)
        or want[k] is None
        and got[k] is not None
    ]
    assert not moved, "\n".join(moved)


def test_matrix_renders_as_text_markdown_and_an_html_page_with_a_figure():
    from assignadd.hypotheses.mutation import Cell
    from assignadd.reports.mutation_page import matrix_html

    cells = [
        Cell("previous_token_head", "layer2_keys_rotated", "pass", "pass", "ok"),
        Cell("identity_qk", "layer2_keys_rotated", "pass", "fail", "<script>x</script>"),
        Cell("shared_residual", "layer2_keys_rotated", "fail", "not judged", ""),
    ]
    doc = matrix_to_dict(
        {
            "mutants": ["layer2_keys_rotated"],
            "cells": cells,
            "claims": ["previous_token_head", "identity_qk", "shared_residual"],
            "changed": {"layer2_keys_rotated": ["blocks.1.attn.W_K"]},
        }
    )
    assert doc["summary"]["judged"] == 2 and doc["summary"]["right"] == 1
    text = render_matrix(doc)
    assert "pass ✗" in text and "fail ·" in text and "1/2 judged cells" in text
    assert "| layer2_keys_rotated |" in render_matrix(doc, markdown=True)
    page = matrix_html(doc, "<x>.pt")
    assert "data:image/png;base64," in page and "<script>" not in page and "&lt;x&gt;.pt" in page
    assert "judged_only" not in doc and "not run" not in text  # a full matrix's bytes are as they were


def test_a_judged_only_matrix_shows_the_cells_not_run_and_says_why():
    """``judged_only`` leaves out the cells downstream of a break: the JSON says so, the table shows a dash
    and its legend, the page NOT RUN; the summary counts the judged cells as before."""
    from assignadd.hypotheses.mutation import Cell
    from assignadd.reports.mutation_page import matrix_html

    doc = matrix_to_dict(
        {
            "mutants": ["layer2_keys_rotated"],
            "cells": [Cell("identity_qk", "layer2_keys_rotated", "fail", "fail", "ok")],
            "claims": ["identity_qk", "shared_residual"],
            "changed": {"layer2_keys_rotated": ["blocks.1.attn.W_K"]},
            "unbroken": {"identity_qk": "pass", "shared_residual": "pass"},
            "judged_only": True,
        }
    )
    assert doc["judged_only"] is True and doc["summary"]["judged"] == doc["summary"]["right"] == 1
    row = render_matrix(doc).splitlines()[3].split()
    assert row == ["layer2_keys_rotated", "fail", "✓", "—"]
    assert "— not run (--judged-only)" in render_matrix(doc)
    assert "| layer2_keys_rotated | fail ✓ | — |" in render_matrix(doc, markdown=True)
    assert "NOT RUN" in matrix_html(doc, "x.pt")


@pytest.mark.slow
def test_a_claim_failing_on_the_unbroken_checkpoint_is_shown_not_judged():
    """A break cannot be seen in a claim that already fails: its cells are not judged, and the table
    says why (a re-initialised model fails every claim)."""
    from assignadd.model import AssignAddTransformer

    doc = matrix_to_dict(
        mutation_matrix(
            AssignAddTransformer(seed=1),
            Task(),
            seed=0,
            n=100,
            mutants=["mlp_input_rotated"],
            claims=["heldout_generalization"],
        )
    )
    assert doc["unbroken"] == {"heldout_generalization": "fail"}
    assert [c["expected"] for c in doc["cells"]] == ["not judged"] and doc["summary"]["judged"] == 0
    assert doc["summary"]["not_judged_failing_unbroken"] == ["heldout_generalization"]
    table = render_matrix(doc)
    assert table.splitlines()[2].split()[:2] == ["(unbroken)", "fail"]
    assert "not judged: heldout_generalization" in table


@pytest.mark.slow
def test_mutants_command_exits_1_when_nothing_could_be_judged(tmp_path, capsys):
    from assignadd.model import AssignAddTransformer, save_checkpoint
    from assignadd.reports.mutants_cli import main

    path = tmp_path / "step_000000.pt"
    save_checkpoint(AssignAddTransformer(seed=1), path, step=0)
    code = main(
        [str(path), "--mutants", "mlp_input_rotated", "--only", "heldout_generalization", "--n", "20", "--quiet"]
    )
    out = capsys.readouterr().out
    assert code == 1 and "0/0 judged cells as expected; not judged: heldout_generalization" in out


@needs_reference
def test_mutants_cli_judged_only_runs_the_judged_cells_and_exits_on_them(tmp_path):
    """``assignadd-mutants --judged-only``: Layer 1's queries rotated fail its claim; identity_qk,
    downstream, is not run; the exit status is the matrix's."""
    from assignadd.reports.mutants_cli import main

    out = tmp_path / "m.json"
    argv = ["--mutants", "layer1_queries_rotated", "--only", "previous_token_head,identity_qk", "--n", "50"]
    assert main([*argv, "--judged-only", "--quiet", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["judged_only"] is True and doc["unbroken"] == {"previous_token_head": "pass", "identity_qk": "pass"}
    assert [(c["claim"], c["verdict"], c["right"]) for c in doc["cells"]] == [("previous_token_head", "fail", True)]


def test_a_change_of_basis_is_a_symmetry_only_without_layernorm(tmp_path, capsys):
    """With LayerNorm the residual stream's basis is not free: the change-of-basis mutants are left out of
    the default list, refused by name in one line (exit 2), and never built."""
    from assignadd.model import AssignAddTransformer, ModelConfig, save_checkpoint
    from assignadd.reports.mutants_cli import main

    plain, normed = AssignAddTransformer(seed=3), AssignAddTransformer(ModelConfig(layernorm=True), seed=3)
    assert BASES and all(MUTANTS[n].applies(plain) is None for n in MUTANTS)
    assert [n for n in MUTANTS if MUTANTS[n].applies(normed)] == BASES
    with pytest.raises(ValueError, match="residual_invertible: .*only without LayerNorm"):
        mutation_matrix(normed, Task(), n=20, mutants=["residual_invertible"], claims=["identity_qk"])
    path = tmp_path / "normed.pt"
    save_checkpoint(normed, path, step=0)
    assert main([str(path), "--mutants", "residual_invertible", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "residual_invertible cannot be made of" in err and "LayerNorm" in err
