"""Calibration of the claims (``assignadd-mutants --calibrate``): power on a claim's own breaks, false
alarms on breaks downstream of it, on symmetry mutants and on small-noise copies, and interval coverage."""

from __future__ import annotations

import json

import pytest
import torch

import assignadd
from assignadd import load_checkpoint
from assignadd.data import Task
from assignadd.hypotheses.calibration import NOISE_SCALE, _count, calibrate, noise_copy, render_calibration
from assignadd.reports.mutants_cli import main as mutants_main

needs_reference = pytest.mark.skipif(
    not assignadd.reference_checkpoint().exists(), reason="the bundled reference checkpoint is missing"
)


def test_count_separates_detections_false_alarms_and_inconclusive():
    cells = [("fail", "fail"), ("inconclusive", "fail"), ("pass", "fail"), ("fail", "pass"), ("pass", "pass")]
    assert _count(cells, "fail") == {"models": 3, "hits": 1, "inconclusive": 1, "rate": 1 / 3}
    assert _count(cells, "pass") == {"models": 2, "hits": 1, "inconclusive": 0, "rate": 0.5}
    assert _count([], "pass")["rate"] is None


@needs_reference
def test_noise_copy_moves_every_nonzero_tensor_by_its_scale_and_keeps_zeros():
    model = load_checkpoint(assignadd.reference_checkpoint())
    noisy = noise_copy(model, seed=0, index=0)
    for (name, p), (_, q) in zip(model.named_parameters(), noisy.named_parameters()):
        rms = p.double().pow(2).mean().sqrt()
        if rms == 0:  # Layer 1's frozen MLP stays exactly zero
            assert torch.equal(p, q), name
            continue
        rel = (q - p).double().pow(2).mean().sqrt() / rms
        assert 0.5 * NOISE_SCALE < rel < 2 * NOISE_SCALE, (name, float(rel))
    assert not torch.equal(noise_copy(model, 0, 0).embed.W_E, noise_copy(model, 0, 1).embed.W_E)  # copies differ
    assert torch.equal(noise_copy(model, 0, 1).embed.W_E, noise_copy(model, 0, 1).embed.W_E)  # and are seeded


@pytest.mark.slow
@needs_reference
def test_calibration_on_the_reference_counts_what_the_matrix_and_copies_show():
    model = load_checkpoint(assignadd.reference_checkpoint())
    doc = calibrate(
        [("reference", model)],
        lambda _: Task(),
        n=150,
        noise_copies=1,
        coverage_seeds=1,
        claims=["previous_token_head", "identity_qk"],
        mutants=["layer1_attention_flattened", "layer2_keys_rotated", "layer1_qk_gauge"],
    )
    ref = doc["checkpoints"]["reference"]
    assert ref["unbroken"] == {"previous_token_head": "pass", "identity_qk": "pass"}
    assert ref["noise_copies"][0]["answer_agreement"] >= 0.99  # a small-noise copy computes the same answers
    assert ref["noise_copies"][0]["verdicts"] == {"previous_token_head": "pass", "identity_qk": "pass"}
    by_claim = {t["claim"]: t for t in doc["claims"]}
    prev, qk = by_claim["previous_token_head"], by_claim["identity_qk"]
    # previous_token_head: its own break (flattened Layer-1 attention) is seen; the Layer-2 key rotation is
    # downstream, the QK gauge keeps the function and the noise copy nearly so: three models to keep passing.
    assert (prev["power"]["models"], prev["power"]["hits"]) == (1, 1)
    assert (prev["false_alarm"]["models"], prev["false_alarm"]["hits"]) == (3, 0)
    # identity_qk: its own break is the key rotation; the Layer-1 break is upstream, not judged.
    assert (qk["power"]["models"], qk["power"]["hits"]) == (1, 1)
    assert (qk["false_alarm"]["models"], qk["false_alarm"]["hits"]) == (2, 0)
    # the symmetry mutant is the same function: no verdict moved, no evidence value beyond float rounding
    sym = ref["symmetry"]["layer1_qk_gauge"]
    assert set(ref["symmetry"]) == {"layer1_qk_gauge"}
    assert sym["verdicts_changed"] == [] and sym["other_changes"] == [] and sym["largest_value_change"] < 1e-3
    assert ref["mutation_summary"]["wrong"] == [] and ref["mutation_summary"]["judged"] >= 5
    cov = ref["coverage"]["previous_token_head"]
    assert cov["runs"] >= 3 and 0 <= cov["covered"] <= cov["runs"]
    assert all(0 <= t["truth"] <= 1 for t in cov["items"].values())
    table = render_calibration(doc, markdown=True)
    assert "| previous_token_head | 1/1 = 1.00 | 0 | 0/3 = 0.00 | 0 |" in table
    assert "- reference: " in table and "1 symmetry mutants: verdicts changed none" in table
    json.dumps(doc)  # JSON-able as it stands


@pytest.mark.parametrize(
    "argv, message",
    [
        (["a.pt", "b.pt"], "only taken with --calibrate"),
        (["--calibrate", "--html", "x.html"], "--html is not available"),
        (["--calibrate", "--noise-copies", "-1"], "--noise-copies"),
        (["--calibrate", "missing.pt"], "missing.pt"),
    ],
)
def test_calibrate_flags_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert mutants_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_the_shipped_table_is_the_shipped_measurement():
    """docs/calibration.md shows the table that docs/calibration_results/calibration.json renders to."""
    from pathlib import Path

    from assignadd.fileio import sha256_file

    docs = Path(assignadd.__file__).resolve().parent / "docs"
    doc = json.loads((docs / "calibration_results" / "calibration.json").read_text(encoding="utf-8"))
    table = render_calibration(doc, markdown=True)
    assert table == (docs / "calibration_results" / "calibration.md").read_text(encoding="utf-8")
    page = (docs / "calibration.md").read_text(encoding="utf-8")
    assert all(line in page for line in table.splitlines() if line.startswith("| "))
    assert doc["schema"] == "assignadd.calibration/1" and doc["n"] == 500
    # the reference and two seeds of the paper's configuration, each named by its hash
    assert list(doc["checkpoints"]) == ["reference.pt", "seed0.pt", "seed1.pt"]
    assert doc["sha256"]["reference.pt"] == sha256_file(assignadd.reference_checkpoint())
    # every claim passes each unbroken checkpoint, so every break and every keep-passing model is counted
    assert all(v == "pass" for c in doc["checkpoints"].values() for v in c["unbroken"].values())
    # the symmetry mutants: the same function, the same verdicts on all three
    for c in doc["checkpoints"].values():
        assert len(c["symmetry"]) == 11
        assert all(s["verdicts_changed"] == [] and s["other_changes"] == [] for s in c["symmetry"].values())


@needs_reference
def test_calibrate_cli_names_each_file_by_its_hash(tmp_path, capsys):
    from assignadd.fileio import sha256_file

    ref = assignadd.reference_checkpoint()
    out = tmp_path / "c.json"
    argv = [str(ref), "--calibrate", "--only", "previous_token_head", "--mutants", "layer1_qk_gauge"]
    argv += ["--n", "100", "--noise-copies", "0", "--coverage-seeds", "1", "--quiet", "--json", str(out)]
    assert mutants_main(argv) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["sha256"] == {str(ref): sha256_file(ref)}
    assert doc["checkpoints"][str(ref)]["symmetry"]["layer1_qk_gauge"]["verdicts_changed"] == []
    assert "1 symmetry mutants: verdicts changed none" in capsys.readouterr().out


def test_symmetry_changes_sees_a_moved_verdict_a_moved_value_and_a_value_lost():
    from types import SimpleNamespace as NS

    from assignadd.hypotheses.mutation import symmetry_changes

    def result(verdict, value, control):
        m = NS(value=value)
        return NS(claim="c", verdict=verdict, evidence=[NS(name="i", measurement=m, controls={"k": NS(value=control)})])

    unbroken = [result("pass", 0.95, 0.1)]
    same, moved, lost = (
        [result("pass", 0.95, 0.1)],
        [result("fail", 0.75, 0.1)],
        [result("pass", 0.95, float("nan"))],
    )
    names = ["layer1_qk_gauge", "layer2_qk_gauge", "layer2_ov_gauge", "layer1_attention_flattened"]
    matrix = {
        "mutants": names,
        "unbroken": {"c": "pass"},
        "results": {"(unbroken)": unbroken, names[0]: same, names[1]: moved, names[2]: lost, names[3]: moved},
    }
    got = symmetry_changes(matrix)
    assert set(got) == set(names[:3])  # break mutants are not symmetries: not compared
    assert got[names[0]] == {"verdicts_changed": [], "largest_value_change": 0.0, "at": None, "other_changes": []}
    assert got[names[1]]["verdicts_changed"] == ["c"] and got[names[1]]["at"] == "c.i"
    assert abs(got[names[1]]["largest_value_change"] - 0.2) < 1e-12
    assert got[names[2]]["other_changes"] == ["c.i.k"] and got[names[2]]["verdicts_changed"] == []


def test_the_shipped_seed_2_table_is_its_measurement():
    """The held-out seed's table (docs/calibration.md, "Seed 2") renders from its JSON, and the one wrong
    cell the page reports is the one the JSON holds."""
    from pathlib import Path

    docs = Path(assignadd.__file__).resolve().parent / "docs"
    doc = json.loads((docs / "calibration_results" / "calibration_seed2.json").read_text(encoding="utf-8"))
    table = render_calibration(doc, markdown=True)
    assert table == (docs / "calibration_results" / "calibration_seed2.md").read_text(encoding="utf-8")
    assert list(doc["checkpoints"]) == ["seed2.pt"] and doc["n"] == 500
    summary = doc["checkpoints"]["seed2.pt"]["mutation_summary"]
    assert (summary["judged"], summary["right"]) == (202, 201)
    assert "201/202" in (docs / "calibration.md").read_text(encoding="utf-8")
