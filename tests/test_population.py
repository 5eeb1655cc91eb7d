"""One verdict over many models (``reports.population``): per claim, in how many models it holds, an exact
interval on that share, and what decided each model where it did not."""

from __future__ import annotations

import json
import shutil

import pytest

from assignadd import reference_checkpoint
from assignadd.interventions.statistics import rate_ci
from assignadd.reports import population, verify_cli
from assignadd.reports.schema import errors


def _item(name, status, value, low, high, required=True):
    return {
        "name": name,
        "required": required,
        "status": status,
        "measurement": {"value": value, "ci": [low, high]},
        "threshold": {"value": 0.9, "direction": ">=", "bound": "lower"},
    }


def _report(path, verdicts: dict[str, str], seed=0, n=500):
    claims = []
    for cid, v in verdicts.items():
        items = [_item("decisive", "pass", 0.99, 0.97, 1.0), _item("supporting", "fail", 0.1, 0.0, 0.2, required=False)]
        if v != "pass":
            items[0] = _item(
                "decisive", "fail" if v == "fail" else "inconclusive", 0.85, 0.8, 0.95 if v != "fail" else 0.88
            )
        claims.append({"claim": cid, "spec": "§4.1", "verdict": v, "reason": f"{cid} {v}", "evidence": items})
    return {
        "schema": "assignadd.verify/1",
        "tool": {"name": "assignadd-verify", "version": "0.1.0"},
        "checkpoint": {"path": path, "sha256": "0" * 64},
        "seed": seed,
        "n": n,
        "only": None,
        "claims": claims,
        "summary": {"passed": sum(v == "pass" for v in verdicts.values()), "total": len(verdicts)},
    }


RUNS = {
    "runs/seed0/final.pt": {"a": "pass", "b": "fail"},
    "runs/seed1/final.pt": {"a": "pass", "b": "pass"},
    "runs/seed2/final.pt": {"a": "pass", "b": "inconclusive"},
}


def test_each_claim_counts_its_models_with_an_exact_interval_and_names_what_decided_the_others():
    doc = population.summarize([_report(p, v) for p, v in RUNS.items()])
    assert errors(doc) == []  # the shipped schema, named by the document itself
    assert [m["label"] for m in doc["models"]] == ["seed0", "seed1", "seed2"]
    a, b = doc["claims"]
    assert (a["holds"], a["models"], a["not_held"]) == (3, 3, [])
    assert a["ci"] == list(rate_ci([True, True, True])[1:])
    assert (b["holds"], b["share"]) == (1, pytest.approx(1 / 3))
    assert b["ci"] == list(rate_ci([False, True, False])[1:]) and b["ci"][0] < 1 / 3 < b["ci"][1]
    assert b["verdicts"] == {"pass": 1, "fail": 1, "inconclusive": 1, "error": 0}
    assert [(x["model"], x["verdict"], [i["item"] for i in x["items"]]) for x in b["not_held"]] == [
        ("seed0", "fail", ["decisive"]),  # the required item that did not pass; never the supporting one
        ("seed2", "inconclusive", ["decisive"]),
    ]
    assert doc["summary"] == {"models": 3, "claims_held_everywhere": ["a"], "all_passed": False}
    table = population.terminal_table(doc)
    assert "a      3 of 3" in table and "seed0: fail, seed2: inconclusive" in table
    assert "b on seed0 (fail): decisive 0.85 [0.8, 0.88] (fail, bar lower >= 0.9)" in table
    assert "1 of 2 claims hold in every model" in table
    files = population.population_files(doc)
    assert json.loads(files["population.json"]) == doc
    assert "| b | 1 of 3 |" in files["population.md"] and "<table" in files["population.html"]


def test_the_components_a_report_names_are_shown_per_model_and_a_paper_population_shows_none():
    """A model whose report names its components (a layout other than the paper's: here a fetching role of
    two heads) gets them in the document, a column of the models table and a line in the terminal; a
    population of the paper's layout alone gets none of them."""
    plain = population.summarize([_report(p, v) for p, v in RUNS.items()])
    assert all("components" not in m for m in plain["models"])
    assert "Components found" not in population.terminal_table(plain)
    assert "| components |" not in population.markdown(plain)
    role = {"score": 1.0, "runner_up": None, "runner_up_score": None, "candidates": 2, "silent_heads": 0}
    split = _report("runs/split/final.pt", {"a": "pass", "b": "pass"})
    split["components"] = {
        "previous_token_head": {**role, "found": "0.0", "how": "searched", "also": ["0.1"]},
        "fetching_head": {**role, "found": "1.0", "how": "searched", "also": ["1.1"]},
        "adding_mlp": {**role, "found": "1", "how": "searched"},
    }
    doc = population.summarize([_report(p, v) for p, v in RUNS.items()] + [split])
    assert errors(doc) == []
    by_label = {m["label"]: m for m in doc["models"]}
    assert by_label["split"]["components"] == {
        "previous_token_head": "0.0+0.1",
        "fetching_head": "1.0+1.1",
        "adding_mlp": "1",
    }
    assert "components" not in by_label["seed0"]
    line = "split: previous-token head 0.0+0.1, fetching head 1.0+1.1, adding MLP 1"
    assert "Components found:\n  " + line in population.terminal_table(doc)
    md = population.markdown(doc)
    assert "| components |" in md and "the paper's |" in md and "fetching head 1.0+1.1" in md


def test_models_run_differently_are_refused():
    reports = [_report("a.pt", {"a": "pass"}), _report("b.pt", {"a": "pass"}, n=1000)]
    with pytest.raises(ValueError, match="b.pt: run with n = 1000, the first model with 500"):
        population.summarize(reports)
    with pytest.raises(ValueError, match="other claims"):
        population.summarize([_report("a.pt", {"a": "pass"}), _report("b.pt", {"b": "pass"})])
    with pytest.raises(ValueError, match="no models"):
        population.summarize([])


def test_labels_are_the_paths_less_what_they_share():
    assert population.model_labels(["x/r1/final.pt", "x/r2/final.pt"]) == ["r1", "r2"]
    assert population.model_labels(["a/m.pt", "b/m.pt"]) == ["a/m.pt", "b/m.pt"]
    assert population.model_labels(["s/step_1.pt", "s/step_2.pt"]) == ["step_1.pt", "step_2.pt"]


needs_series = pytest.mark.skipif(
    not (reference_checkpoint().parent / "series" / "step_012000.pt").exists(), reason="the shipped series is missing"
)


@needs_series
def test_verify_over_a_folder_of_runs_prints_the_table_and_writes_each_models_report(tmp_path, capsys):
    series = reference_checkpoint().parent / "series"
    for name, step in (("early", "step_005000.pt"), ("late", "step_040000.pt")):
        (tmp_path / "runs" / name).mkdir(parents=True)
        shutil.copy(series / step, tmp_path / "runs" / name / "final.pt")
    argv = [str(tmp_path / "runs"), "--only", "heldout_generalization", "--n", "100", "--quiet"]
    code = verify_cli.main([*argv, "--json", str(tmp_path / "p.json"), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "p.json").read_text())
    assert errors(doc) == [] and [m["label"] for m in doc["models"]] == ["early", "late"]
    (claim,) = doc["claims"]
    assert (claim["holds"], claim["models"], [x["model"] for x in claim["not_held"]]) == (1, 2, ["early"])
    assert code == 1 and "heldout_generalization  1 of 2" in out and "early: fail" in out
    written = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.json"))
    assert written == [
        "early/report.json",
        "early/timings.json",
        "late/report.json",
        "late/timings.json",
        "population.json",
    ]
    late = json.loads((tmp_path / "out" / "late" / "report.json").read_text())
    assert (
        late["claims"][0]["verdict"] == "pass"
        and (tmp_path / "out" / "population.json").read_text() == (tmp_path / "p.json").read_text()
    )


def test_several_checkpoints_refuse_the_one_checkpoint_flags_in_one_line(tmp_path, capsys):
    ref = str(reference_checkpoint())
    assert verify_cli.main([ref, ref, "--junit", str(tmp_path / "j.xml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --junit and --claim-doc take one checkpoint; 2 were given"


@needs_series
def test_report_over_several_runs_gives_each_series_and_the_series_claims_across_them(tmp_path, capsys):
    from assignadd.reports import report_cli

    series = reference_checkpoint().parent / "series"
    for name, steps in (("short", (0, 500, 1000)), ("long", (0, 4000, 12000, 40000))):
        (tmp_path / "runs" / name).mkdir(parents=True)
        for step in steps:
            shutil.copy(series / f"step_{step:06d}.pt", tmp_path / "runs" / name / f"step_{step:06d}.pt")
    runs = [str(tmp_path / "runs" / "short"), str(tmp_path / "runs" / "long")]
    code = report_cli.main([*runs, "--n", "40", "--claims", "0", "--quiet", "--out", str(tmp_path / "out")])
    doc = json.loads((tmp_path / "out" / "population.json").read_text())
    assert errors(doc) == [] and doc["tool"]["name"] == "assignadd-report"
    assert [m["label"] for m in doc["models"]] == ["short", "long"] and doc["n"] == 40
    (claim,) = doc["claims"]
    short = json.loads((tmp_path / "out" / "short" / "series.json").read_text())
    assert claim["claim"] == "learning_phases" and claim["models"] == 2
    assert doc["models"][0]["verdicts"]["learning_phases"] == short["series_claims"]["learning_phases"]["verdict"]
    assert short["series_claims"]["learning_phases"]["verdict"] == "inconclusive"  # it ends before the phases
    assert code == (0 if claim["holds"] == 2 else 1)
    assert "learning_phases" in capsys.readouterr().out
    assert (tmp_path / "out" / "long" / "series.html").is_file()
