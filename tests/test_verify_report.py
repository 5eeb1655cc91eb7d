"""The report a user reads: every claim listed (those not run here too), the four verdicts counted,
intervals shown as they are, one escaping HTML template, and report.json checked against its schema."""

from __future__ import annotations

import json

import pytest

from assignadd.model import AssignAddTransformer, save_checkpoint
from assignadd.reports import html as H
from assignadd.reports import render, schema
from assignadd.reports.verify import not_run_here
from assignadd.reports.verify_cli import main

from .test_verify_cli import ERROR, FAIL, PASS, _FakeError, _FakeFail, _FakePass, fake_claims  # noqa: F401 (autouse)

TASK = {"f": 0.7, "r": 1.0, "seed": 42, "modulus": 59, "n_vars": 12, "never_rhs": ["a", "b"], "never_lhs": ["k", "l"]}


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "step_000100.pt"
    save_checkpoint(AssignAddTransformer(seed=1), path, task=TASK, step=100)
    return path


def claim(cid: str, verdict: str, value=0.97, ci=(0.95, 0.985), reason="why") -> dict:
    return {
        "schema": "assignadd.claim/1",
        "claim": cid,
        "spec": "§4.1",
        "statement": "s",
        "verdict": verdict,
        "reason": reason,
        "seed": 0,
        "controls": {},
        "evidence": [
            {
                "name": "acc",
                "definition": "d",
                "kind": "causal",
                "required": True,
                "threshold": {"value": 0.9, "direction": ">=", "bound": "lower", "reason": "r"},
                "measurement": {"value": value, "ci": list(ci), "n": 100, "extra": {}},
                "passed": verdict == "pass",
                "controls": {},
            }
        ],
    }


def report(claims, not_run=None, task_source="checkpoint"):
    return render.build_report(
        checkpoint={"path": "x.pt", "sha256": "0" * 64, "format": "assignadd.checkpoint/1", "step": 1, "size_bytes": 1},
        model_config=AssignAddTransformer().cfg.to_dict(),
        task=TASK,
        task_source=task_source,
        seed=0,
        n=10,
        device="cpu",
        only=None,
        claims=claims,
        tool_version="0",
        not_run=not_run_here(None) if not_run is None else not_run,
    )


# ----- every claim listed, four verdicts counted -------------------------------------------------------
def test_the_series_and_sweep_claims_are_listed_as_not_run_with_their_commands():
    listed = {c["claim"]: c for c in not_run_here(None)}
    assert set(listed) == {"learning_phases", "data_requirements"}
    assert listed["learning_phases"]["command"] == "assignadd-report RUN_DIR"
    assert listed["data_requirements"]["command"].startswith("assignadd-sweep ")
    assert not_run_here([PASS]) == []  # --only chose the claims


def test_summary_counts_all_four_verdicts_and_names_what_was_not_run():
    r = report(
        [
            claim("a", "pass"),
            claim("b", "pass"),
            claim("c", "pass"),
            claim("d", "pass"),
            claim("e", "inconclusive"),
            claim("f", "fail"),
        ]
    )
    line = render.terminal_table(r).strip().splitlines()[-1]
    assert line == (
        "4 passed, 1 inconclusive, 1 failed of 6 run; 2 not run here: learning_phases "
        "(run: assignadd-report RUN_DIR), data_requirements (run: assignadd-sweep --param f|r "
        "--values ... --out SWEEP_DIR, then assignadd-report SWEEP_DIR)"
    )
    s = r["summary"]
    assert (s["passed"], s["total"], s["inconclusive"], s["failed"], s["errors"]) == (4, 6, ["e"], ["f"], [])
    assert s["not_run"] == ["learning_phases", "data_requirements"] and s["all_passed"] is False
    rows = [line for line in render.terminal_table(r).splitlines() if line.startswith(("learning_phases", "e "))]
    assert any("NOT RUN" in row and "assignadd-report RUN_DIR" in row for row in rows)
    assert any("INCONCLUSIVE" in row for row in rows)


def test_only_the_claims_run_decide_all_passed():
    assert report([claim("a", "pass")])["summary"]["all_passed"] is True  # not-run claims are not failures


def test_junit_skips_what_was_not_run_and_fails_what_is_inconclusive():
    import xml.etree.ElementTree as ET

    suite = ET.fromstring(render.junit_xml(report([claim("a", "pass"), claim("e", "inconclusive")]))).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["e"].find("failure").get("type") == "inconclusive"
    assert "assignadd-report RUN_DIR" in cases["learning_phases"].find("skipped").get("message")


def test_only_with_a_series_claim_says_which_command_runs_it(capsys, ours):
    assert main([str(ours), "--only", "learning_phases", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only learning_phases: this claim needs a checkpoint series")
    assert "run: assignadd-report RUN_DIR" in err


# ----- intervals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, ci, shown",
    [
        (1.0, (0.999742, 1.0), "1 [0.999, 1]"),  # was "1 [1, 1]"
        (0.97, (0.95, 0.985), "0.97 [0.95, 0.985]"),
        (0.9995, (0.9991, 0.9998), "0.9995 [0.9991, 0.9998]"),  # more decimals until the numbers differ
        (0.605, (0.589123, 0.619001), "0.605 [0.589, 0.62]"),  # outwards: low down, high up
        (0.0, (0.0, 0.0015), "0 [0, 0.002]"),
        (12.5, (12.25, 12.75), "12.5 [12.25, 12.75]"),
        (2e-05, (1e-05, 3e-05), "2e-05 [1e-05, 3e-05]"),
    ],
)
def test_intervals_show_what_the_numbers_say(value, ci, shown):
    assert render.fmt_measurement({"value": value, "ci": list(ci)}) == shown


def test_a_lower_bound_below_the_threshold_never_shows_as_reaching_it():
    # 0.8999 rounds to 0.9 to the nearest; shown outwards it stays below the bar of 0.9.
    assert render.fmt_measurement({"value": 0.93, "ci": [0.8999, 0.95]}) == "0.93 [0.899, 0.95]"


# ----- HTML -------------------------------------------------------------------------------------------
def test_html_escapes_every_string_from_the_report():
    nasty = '<script>alert("x")</script> & <b>'
    r = report([claim("a", "fail", reason=nasty)])
    r["checkpoint"]["path"] = nasty
    page = render.html_page(r)
    assert "<script>" not in page and "&lt;b&gt;" in page
    assert page.count("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;") == 3  # title, checkpoint, reason


def test_the_template_escapes_text_and_passes_markup():
    assert H.tag("td", "<x>", H.tag("code", "a&b")) == "<td>&lt;x&gt;<code>a&amp;b</code></td>"
    assert H.tag("a", "t", href='"><script>') == '<a href="&quot;&gt;&lt;script&gt;">t</a>'
    assert H.verdict("inconclusive") == '<span class="inconclusive">INCONCLUSIVE</span>'
    assert H.verdict("not-run") == '<span class="not-run">NOT RUN</span>'


def test_wide_tables_scroll_in_their_own_box_and_long_words_wrap():
    page = render.html_page(report([claim("a", "pass")]))
    assert page.count('<div class="table-wrap">') == 2  # the verdict table and the evidence table
    assert ".table-wrap{max-width:100%;overflow-x:auto" in page and "overflow-wrap:anywhere" in page


def test_html_lists_the_claims_not_run_with_their_commands():
    page = render.html_page(report([claim("a", "pass")]))
    assert 'id="claim-learning_phases"' in page and "<code>assignadd-report RUN_DIR</code>" in page
    assert "NOT RUN" in page


def test_a_bare_checkpoint_says_which_task_it_was_scored_on():
    r = report([claim("a", "pass")], task_source="default")
    text = render.terminal_table(r)
    assert (
        "note: the checkpoint holds no task, so the claims ran on the paper's (f = 0.7, r = 1.0, split seed 42)" in text
        and "--split-seed" in text
    )
    assert "note: the checkpoint holds no task" in render.markdown(r)


# ----- the schema ------------------------------------------------------------------------------------
def test_report_json_from_the_command_matches_its_schema(tmp_path, ours, capsys):
    out = tmp_path / "r.json"
    main([str(ours), "--only", f"{PASS},{FAIL},{ERROR}", "--json", str(out), "--quiet", "--n", "20"])
    doc = json.loads(out.read_text())
    assert schema.errors(doc) == []
    assert schema.errors(report([claim("a", "pass"), claim("e", "inconclusive")])) == []


def test_the_schema_checker_catches_what_breaks_the_schema():
    doc = report([claim("a", "pass")])
    doc["claims"][0]["verdict"] = "maybe"
    del doc["summary"]["total"]
    doc["seed"] = -1
    doc["claims"][0]["evidence"][0]["measurement"]["ci"] = [0.1]
    found = schema.errors(doc)
    assert "$.claims[0].verdict: expected one of ['pass', 'fail', 'inconclusive', 'error'], found 'maybe'" in found
    assert "$.summary: missing 'total'" in found
    assert "$.seed: -1 is below the minimum 0" in found
    assert "$.claims[0].evidence[0].measurement.ci: 1 items, expected at least 2" in found


def test_the_shipped_schema_is_valid_json_schema_where_jsonschema_is_installed():
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema.load())
    jsonschema.validate(report([claim("a", "pass")]), schema.load())


def test_the_schema_ships_with_the_package():
    from importlib.resources import files

    assert files("assignadd.reports").joinpath("schemas/verify.schema.json").is_file()
