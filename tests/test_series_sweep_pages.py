"""The series and sweep reports as a reader gets them: series.html and sweep.html on the verify page's
template (one stylesheet, every string escaped where it enters), intervals written as the verify report
writes them, and series.json and sweep.json checked against their shipped JSON Schemas.

The documents are real output, made cheaply: the 30-step run of ``test_series`` (with a stand-in
per-checkpoint claim, so that the per-checkpoint fields are filled) and the hand-written sweep folders of
``test_sweep``, whose answer is known by construction.
"""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

import pytest

from assignadd import hypotheses
from assignadd.reports import html as H
from assignadd.reports import render, schema, series_html, sweep_report
from assignadd.reports.report_cli import main as report_main

from .test_series import N, _AlwaysLate, tiny_run  # noqa: F401 (tiny_run is a fixture)
from .test_sweep import F_GRID, R_GRID, synthetic_sweep
from .test_verify_html import CHROMIUM, chromium
from .test_verify_report import claim, report

SCRIPT = "<script>alert('x')</script>"
ESCAPED = html.escape(SCRIPT)
SHIPPED_SWEEP = Path(sweep_report.__file__).resolve().parents[1] / "docs" / "sweep_results" / "sweep.json"
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
)


@pytest.fixture(scope="module")
def series_out(tiny_run, tmp_path_factory):  # noqa: F811
    """``assignadd-report`` on the tiny run, with a stand-in per-checkpoint claim run on two checkpoints."""
    out = tmp_path_factory.mktemp("series_report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hypotheses, "REGISTRY", {"stand_in": _AlwaysLate})
        assert report_main([str(tiny_run), "--out", str(out), "--n", str(N), "--claims", "2", "--quiet"]) == 1
    return out


@pytest.fixture(scope="module")
def series_doc(series_out) -> dict:
    return json.loads((series_out / "series.json").read_text())


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory):
    """``assignadd-report`` on an f sweep and an r sweep side by side, both thresholds inside the band."""
    root = tmp_path_factory.mktemp("sweeps")
    synthetic_sweep(root / "both", "f", F_GRID, 0.25)
    synthetic_sweep(root / "both", "r", R_GRID, 0.2)
    assert report_main([str(root / "both"), "--out", str(root / "report"), "--quiet"]) == 0
    return root / "report"


@pytest.fixture(scope="module")
def sweep_doc(sweep_out) -> dict:
    return json.loads((sweep_out / "sweep.json").read_text())


def head_without_title(page: str) -> str:
    return re.sub(r"<title>.*?</title>", "", page[: page.index("</head>")], flags=re.S)


# ----- one template, escaping by construction ---------------------------------------------------------
@pytest.mark.xdist_group("series_pages")
def test_series_page_escapes_a_script_in_a_claim_reason_and_in_the_source_path(series_doc):
    doc = copy.deepcopy(series_doc)
    doc["source"] = f"runs/{SCRIPT}"
    claim_doc = doc["series_claims"]["learning_phases"]
    claim_doc["reason"] = SCRIPT
    claim_doc["evidence"][0]["threshold"]["reason"] = SCRIPT
    claim_doc["controls"] = {SCRIPT: SCRIPT}
    page = series_html.render_html(doc)
    assert "<script" not in page
    assert f"<code>runs/{ESCAPED}</code>" in page and f"<title>assignadd series: runs/{ESCAPED}</title>" in page
    assert f"Verdict <b>inconclusive</b>: {ESCAPED}</p>" in page  # 30 steps: the series ends before any phase
    assert page.count(ESCAPED) >= 5


def test_sweep_page_escapes_a_script_in_a_claim_reason_a_folder_and_a_point(sweep_doc):
    doc = copy.deepcopy(sweep_doc)
    doc["claim"]["reason"] = SCRIPT
    doc["claim"]["evidence"][0]["definition"] = SCRIPT
    doc["sweeps"][0]["folder"] = f"sweeps/{SCRIPT}"
    doc["sweeps"][0]["points"][0]["name"] = SCRIPT
    doc["sweeps"][1]["threshold"] = {"error": SCRIPT}
    page = sweep_report.render_html(doc)
    assert "<script" not in page
    assert f"Verdict <b>pass</b>: {ESCAPED}</p>" in page
    assert f"<code>sweeps/{ESCAPED}</code>" in page
    assert page.count(ESCAPED) >= 4


@pytest.mark.xdist_group("series_pages")
def test_the_three_pages_share_one_template_and_stylesheet(series_out, sweep_out):
    series_page = (series_out / "series.html").read_text()
    sweep_page = (sweep_out / "sweep.html").read_text()
    verify_page = render.html_page(report([claim("a", "pass")]))
    for page in (series_page, sweep_page):
        assert page.startswith("<!DOCTYPE html>\n") and page.count("<style>") == 1 and H.STYLESHEET in page
        assert head_without_title(page) == head_without_title(verify_page)
        assert 'class="table-wrap"' in page  # every table in a box that scrolls on its own
        assert "<script" not in page and "http://" not in page and "https://" not in page
    # the figures, the evidence tables and the verdicts are still there
    assert series_page.count('<figure id="fig-') == 3  # accuracy, progress measures, per-checkpoint claims
    assert sweep_page.count('<figure id="fig-sweep-') == 2
    assert '<span class="fail">FAIL</span>' in series_page and '<span class="pass">PASS</span>' in sweep_page
    for page in (series_page, sweep_page):
        assert "<th>value [interval]</th>" in page and "<th>controls</th>" in page


# ----- intervals as the verify report writes them ------------------------------------------------------
def test_sweep_page_writes_an_exact_accuracy_as_one_number_and_rounds_intervals_outwards(sweep_doc):
    doc = copy.deepcopy(sweep_doc)
    exact, close = doc["sweeps"][0]["points"][0], doc["sweeps"][0]["points"][1]
    exact.update(accuracy=0.0954356846473029, low=0.0954356846473029, high=0.0954356846473029)  # every pair scored
    close.update(accuracy=0.9987, low=0.99742, high=1.0)
    page = sweep_report.render_html(doc)
    cells = dict(re.findall(r'<tr><td class="text">(.*?)</td><td class="nowrap"><span class="num">(.*?)</span>', page))
    assert cells[H.breakable(exact["name"])] == "0.095"
    assert cells[H.breakable(close["name"])] == "0.999 [0.997, 1]"  # never 1 [1, 1]
    assert cells[H.breakable(doc["sweeps"][0]["points"][2]["name"])] == "0.05 [0.045, 0.055]"
    assert "<th>accuracy [95% CI]</th>" in page
    assert not re.search(r"\[([^\[\],<]+), \1\]", page), "a zero-width interval written as [x, x]"


def test_sweep_evidence_shows_exact_values_alone_and_the_threshold_as_its_open_bracket(tmp_path):
    """``f_generalization_is_monotone`` counts inversions exactly (0, not [0, 0]); a threshold lies in (b, θ],
    and above the grid when no value generalizes: (0.7, ∞)."""
    synthetic_sweep(tmp_path / "both", "f", F_GRID, None)
    synthetic_sweep(tmp_path / "both", "r", R_GRID, 0.2)
    doc = sweep_report.compute_sweep_report(tmp_path / "both")
    page = sweep_report.render_html(doc)
    values = {
        name: value
        for name, value in re.findall(r"<b>([^<]*(?:<wbr>[^<]*)*)</b><br>.*?<span class=\"num\">(.*?)</span>", page)
    }
    assert values[H.breakable("f_generalization_is_monotone")] == "0"
    assert values[H.breakable("f_threshold_not_above_band")] == "(0.7, ∞)"
    assert values[H.breakable("r_threshold_not_below_band")] == "0.2 (0.15, 0.2]"
    assert doc["claim"]["verdict"] == "fail" and '<span class="fail">FAIL</span>' in page


def test_series_page_rounds_the_phase_fractions_outwards():
    assert series_html._fraction_range([0.41234, 0.98761]) == "0.412–0.988"
    assert series_html._fraction_range([0.5, 0.5]) == "0.5" and series_html._fraction_range([None, None]) == "n/a"


# ----- 800 px in headless Chromium ---------------------------------------------------------------------
LAYOUT_PROBE = """<script>
window.addEventListener('load', function () {
  var wraps = Array.prototype.slice.call(document.querySelectorAll('.table-wrap'));
  var pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify({
    viewport: window.innerWidth, page: document.documentElement.scrollWidth,
    tables: wraps.map(function (w) { return [w.scrollWidth, w.clientWidth]; }),
    figures: Array.prototype.slice.call(document.images).map(function (i) { return i.getBoundingClientRect().right; })
  });
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.xdist_group("series_pages")
@needs_chromium
@pytest.mark.parametrize("which", ["series", "sweep"])
def test_nothing_overflows_an_800_px_window_and_tables_fit_their_box(which, series_out, sweep_out, tmp_path):
    page = (series_out / "series.html" if which == "series" else sweep_out / "sweep.html").read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"))
    p = chromium("--window-size=800,2000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', p.stdout, re.S)
    assert found, f"the probe never ran (chromium exit {p.returncode}): {p.stderr[-2000:]}"
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["page"] <= layout["viewport"], layout
    assert layout["tables"] and all(scroll <= client + 1 for scroll, client in layout["tables"]), layout
    assert layout["figures"] and max(layout["figures"]) <= layout["viewport"], layout


# ----- the schemas ------------------------------------------------------------------------------------
@pytest.mark.xdist_group("series_pages")
def test_series_json_from_the_command_matches_its_schema(series_doc):
    assert series_doc["checkpoints"][0]["claims"] and series_doc["claims_first_hold"]  # the optional parts are there
    assert series_doc["verdict_timeline"]["stand_in"]["steps"] == [0, 30]
    assert series_doc["checkpoints"][0]["claims"]["stand_in"]["items"][0]["name"] == "acc"
    assert schema.errors(series_doc, schema.load("series")) == []
    assert schema.errors(series_doc) == []  # the checker picks the schema the document names


def test_sweep_json_from_the_command_matches_its_schema(sweep_doc, tmp_path):
    assert schema.errors(sweep_doc, schema.load("sweep")) == [] and schema.errors(sweep_doc) == []
    # half a claim (an error verdict), and a sweep whose threshold is an error (a point not finished)
    half = synthetic_sweep(tmp_path, "f", F_GRID, 0.25)
    (half / "points" / "f=0.4_seed=0" / "generalization.json").unlink()
    doc = sweep_report.compute_sweep_report(half)
    assert doc["claim"]["verdict"] == "error" and "error" in doc["sweeps"][0]["threshold"]
    assert schema.errors(json.loads(sweep_report.to_json(doc))) == []


def test_the_shipped_sweep_report_written_by_an_earlier_rule_matches_the_schema():
    doc = json.loads(SHIPPED_SWEEP.read_text())
    assert schema.errors(doc) == []


@pytest.mark.xdist_group("series_pages")
def test_the_schema_checker_catches_a_broken_series_document(series_doc):
    doc = copy.deepcopy(series_doc)
    del doc["checkpoints"][0]["sha256"]
    doc["checkpoints"][1]["step"] = -5
    doc["phases"]["phases"][0]["id"] = "grokking"
    doc["series_claims"]["learning_phases"]["verdict"] = "maybe"
    doc["series_claims"]["learning_phases"]["evidence"][0]["measurement"]["ci"] = [0.1]
    found = schema.errors(doc)
    assert "$.checkpoints[0]: missing 'sha256'" in found
    assert "$.checkpoints[1].step: -5 is below the minimum 0" in found
    assert (
        "$.phases.phases[0].id: expected one of ['addition', 'assignment', 'restricted_slots'], found 'grokking'"
        in found
    )
    assert (
        "$.series_claims.learning_phases.verdict: expected one of ['pass', 'fail', 'inconclusive', 'error'], "
        "found 'maybe'"
    ) in found
    assert "$.series_claims.learning_phases.evidence[0].measurement.ci: 1 items, expected at least 2" in found
    assert len(found) == 5, found


def test_the_schema_checker_catches_a_broken_sweep_document(sweep_doc):
    doc = copy.deepcopy(sweep_doc)
    doc["sweeps"][0]["points"][0]["accuracy"] = "0.99"
    doc["sweeps"][0]["param"] = "q"
    doc["sweeps"][1]["threshold"] = {"median": 0.2}  # neither an estimate nor an error
    del doc["claim"]["reason"]
    found = schema.errors(doc)
    assert "$.sweeps[0].points[0].accuracy: expected number or null, found string" in found
    assert "$.sweeps[0].param: expected one of ['f', 'r'], found 'q'" in found
    assert (
        "$.sweeps[1].threshold: matches none of the 2 alternatives ($.sweeps[1].threshold: missing 'seeds'; "
        "$.sweeps[1].threshold: missing 'error')"
    ) in found
    assert "$.claim: missing 'reason'" in found
    assert len(found) == 4, found
    assert schema.errors({"schema": "assignadd.sweep/1"}) == [
        "$: missing 'rule'",
        "$: missing 'sweeps'",
        "$: missing 'claim'",
    ]


SHARED_DEFS = ("number_or_null", "measurement", "status", "control", "evidence", "claim")


@pytest.mark.parametrize("name", ["series", "sweep"])
def test_a_claim_is_described_word_for_word_as_in_the_verify_schema(name):
    """The claim, evidence and measurement definitions are copied into each schema (a full validator
    resolves no reference into another file without help); this keeps the copies from drifting."""
    verify, other = schema.load("verify"), schema.load(name)
    assert {d: other["$defs"][d] for d in SHARED_DEFS} == {d: verify["$defs"][d] for d in SHARED_DEFS}
    if name == "series":
        assert other["$defs"]["task"] == verify["properties"]["task"]


def test_the_schemas_ship_with_the_package_and_name_their_documents():
    from importlib.resources import files

    for name, doc_id in (("series", "assignadd.series/1"), ("sweep", "assignadd.sweep/1")):
        assert files("assignadd.reports").joinpath(f"schemas/{name}.schema.json").is_file()
        loaded = schema.load(name)
        assert loaded["$id"] == doc_id == loaded["properties"]["schema"]["const"] and schema.BY_ID[doc_id] == name


@pytest.mark.xdist_group("series_pages")
def test_the_schemas_are_valid_json_schema_where_jsonschema_is_installed(series_doc, sweep_doc):
    jsonschema = pytest.importorskip("jsonschema")
    for name, doc in (("series", series_doc), ("sweep", sweep_doc)):
        jsonschema.Draft202012Validator.check_schema(schema.load(name))
        jsonschema.validate(doc, schema.load(name))
