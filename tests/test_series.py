"""assignadd-report over a checkpoint series, and the learning_phases claim (SPEC §4.5)."""

from __future__ import annotations

import html
import json
import shutil

import numpy as np
import pytest
import torch

import assignadd
from assignadd import Task, hypotheses
from assignadd.hypotheses.measures.circuits import last_position_correct
from assignadd.hypotheses.base import ClaimResult, Evidence, Hypothesis, Measurement, Threshold
from assignadd.hypotheses.learning_phases import (
    COHERENCE,
    LEARNED,
    PHASES,
    SERIES_REGISTRY,
    LearningPhases,
    detect_phases,
    monotone_fit_r2,
    onset_index,
    step_fit_r2,
)
from assignadd.model import load_checkpoint
from assignadd.training.train import TrainConfig, train
from assignadd.reports.html import breakable
from assignadd.reports.report_cli import main as report_main
from assignadd.reports.series import (
    SeriesError,
    claim_indices,
    claims_first_hold,
    claims_timeline,
    compute_series,
    find_checkpoints,
    first_hold_text,
    timeline_text,
    to_json,
    verdict_timeline,
)
from assignadd.reports.series_html import render_html

N = 40  # sequences per pool in these tests: enough to exercise every measure, small enough to be quick


# ----- a tiny real run, and the same weights in the authors' naming ------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 30-step run: checkpoints at steps 0, 10, 20, 30, plus final.pt (the same weights as step 30)."""
    run = tmp_path_factory.mktemp("series") / "run"
    train(
        run,
        TrainConfig(steps=30, batch_size=32, checkpoint_every=10, eval_every=10, eval_size=8, threads=1),
        progress=False,
    )
    return run


@pytest.fixture(scope="module")
def authors_folder(tiny_run, tmp_path_factory):
    """The tiny run's weights as bare TransformerLens state dicts, named as the authors name them, with
    steps whose text order is not their numeric order (11 < 101 < 1001 but "1001" < "101" < "11")."""
    folder = tmp_path_factory.mktemp("authors")
    names = {
        0: "checkpoint_step_11.pth",
        10: "checkpoint_step_101.pth",
        20: "checkpoint_step_1001.pth",
        30: "model_state_dict.pth",
    }
    for step, name in names.items():
        model = load_checkpoint(tiny_run / "checkpoints" / f"step_{step:06d}.pt")
        torch.save(model.state_dict(), folder / name, pickle_protocol=4)
    (folder / "notes.txt").write_text("not a checkpoint")
    return folder


def test_authors_named_state_dicts_are_read_and_ordered_by_step(authors_folder):
    entries = find_checkpoints(authors_folder)
    assert [e.path.name for e in entries] == [
        "checkpoint_step_11.pth",
        "checkpoint_step_101.pth",
        "checkpoint_step_1001.pth",
        "model_state_dict.pth",
    ]
    assert [e.step for e in entries[:3]] == [11, 101, 1001]
    assert entries[3].step_from == "inferred" and entries[3].step > 1001


def test_authors_state_dicts_measure_the_same_as_our_checkpoints_of_the_same_weights(tiny_run, authors_folder):
    ours = compute_series(tiny_run, n=N, claims=0, progress=False)
    theirs = compute_series(authors_folder, n=N, claims=0, progress=False)
    assert [c["values"] for c in ours["checkpoints"]] == [c["values"] for c in theirs["checkpoints"]]


def test_run_folder_final_checkpoint_is_not_counted_twice(tiny_run):
    entries = find_checkpoints(tiny_run)
    assert [e.step for e in entries] == [0, 10, 20, 30]
    assert all(e.path.name.startswith("step_") for e in entries)


def test_every_keeps_the_last_checkpoint(tiny_run):
    doc = compute_series(tiny_run, every=3, n=N, claims=0, progress=False)
    assert [c["step"] for c in doc["checkpoints"]] == [0, 30]


def test_claims_are_spread_over_the_series_first_and_last_included():
    assert claim_indices(400, 8) == [0, 57, 114, 171, 228, 285, 342, 399]
    assert claim_indices(5, 1) == [4] and claim_indices(5, 0) == [] and claim_indices(3, 10) == [0, 1, 2]


@pytest.mark.slow
def test_series_json_is_byte_identical_across_runs_and_jobs(tiny_run, tmp_path):
    for name, jobs in (("a", 1), ("b", 2)):  # exit 1: learning_phases fails on 30 steps (no phase at all)
        assert (
            report_main(
                [
                    str(tiny_run),
                    "--out",
                    str(tmp_path / name),
                    "--n",
                    str(N),
                    "--claims",
                    "0",
                    "--jobs",
                    str(jobs),
                    "--quiet",
                ]
            )
            == 1
        )
    a = (tmp_path / "a" / "series.json").read_bytes()
    assert a == (tmp_path / "b" / "series.json").read_bytes()
    assert a == to_json(compute_series(tiny_run, n=N, claims=0, progress=False)).encode()
    doc = json.loads(a)
    assert doc["schema"] == "assignadd.series/1"
    assert set(doc["checkpoints"][0]["values"]) == set(doc["measures"])


def test_series_csv_is_long_form_and_html_is_self_contained(tiny_run, tmp_path):
    assert report_main([str(tiny_run), "--out", str(tmp_path), "--n", str(N), "--claims", "0", "--quiet"]) == 1
    rows = (tmp_path / "series.csv").read_text().splitlines()
    assert rows[0] == "step,measure,value"
    doc = json.loads((tmp_path / "series.json").read_text())
    assert len(rows) - 1 == sum(len(c["values"]) for c in doc["checkpoints"])
    page = (tmp_path / "series.html").read_text()
    assert page.count("data:image/png;base64,") >= 2
    assert "http://" not in page and "https://" not in page and "<script" not in page
    # the series claim's evidence, as the verify report shows it: every item, its threshold's reason, its controls
    # (identifiers written as the page writes them, free to wrap after their underscores)
    for e in doc["series_claims"]["learning_phases"]["evidence"]:
        assert f"<b>{breakable(e['name'])}</b>" in page and html.escape(e["threshold"]["reason"]) in page
    assert f"{breakable('permuted_steps')}:" in page and f"{breakable('reversed_steps')}:" in page


class _StandInSeriesClaim:
    """A series claim whose verdict is fixed: for the exit status of assignadd-report."""

    verdict = "pass"

    def run_series(self, doc):
        return ClaimResult("stand_in_series", "test", "a fixed verdict", self.verdict, "fixed", [], {}, 0)


@pytest.mark.parametrize("verdict, code", [("pass", 0), ("fail", 1), ("inconclusive", 1), ("error", 1)])
def test_report_exit_status_is_0_only_when_every_series_claim_passes(tiny_run, tmp_path, monkeypatch, verdict, code):
    import assignadd.reports.series as series_module

    claim = type("Claim", (_StandInSeriesClaim,), {"verdict": verdict})
    monkeypatch.setattr(series_module, "SERIES_REGISTRY", {"stand_in_series": claim})
    assert report_main([str(tiny_run), "--out", str(tmp_path), "--n", str(N), "--claims", "0", "--quiet"]) == code
    assert (tmp_path / "series.json").exists()  # written whatever the verdict


def test_report_help_documents_the_exit_status(capsys):
    with pytest.raises(SystemExit):
        report_main(["--help"])
    out = capsys.readouterr().out
    assert "exit status" in out and "inconclusive" in out and "bad input" in out


def test_a_claim_evaluated_sparsely_is_said_to_hold_only_as_precisely_as_it_was_evaluated():
    """A claim said to 'hold from step 40000' when only steps 0 and 40000 were evaluated."""
    cps = [
        {"step": s, "values": {}, **({"claims": {"c": {"verdict": v}}} if v else {})}
        for s, v in ((0, "fail"), (100, None), (20000, None), (40000, "pass"))
    ]
    hold = claims_first_hold(cps)["c"]
    assert hold["first_step_holding"] == 40000 and hold["last_step_not_holding"] == 0
    text = first_hold_text(hold)
    assert "between steps 0 and 40000" in text and "2 evaluated" in text
    always = claims_first_hold([{"step": 5, "values": {}, "claims": {"c": {"verdict": "pass"}}}])["c"]
    assert always["last_step_not_holding"] is None and "holds at all 1 evaluated" in first_hold_text(always)


def test_missing_folder_is_refused_with_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        report_main([str(tmp_path / "nope"), "--out", str(tmp_path / "out"), "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_folder_without_checkpoints_is_refused_with_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("nothing here")
    with pytest.raises(SystemExit) as e:
        report_main([str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--quiet"])
    assert e.value.code == 2
    assert not (tmp_path / "out").exists()


def test_a_corrupt_checkpoint_among_good_ones_is_refused_and_nothing_is_written(tiny_run, tmp_path, capsys):
    folder = tmp_path / "ckpts"
    shutil.copytree(tiny_run / "checkpoints", folder)
    (folder / "step_000020.pt").write_bytes((folder / "step_000020.pt").read_bytes()[:500])
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(SystemExit) as e:
        report_main([str(folder), "--out", str(out), "--n", str(N), "--claims", "0", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "step_000020.pt" in err and len(err.strip().splitlines()) == 1
    assert list(out.iterdir()) == []


# ----- per-checkpoint claims ----------------------------------------------------------------------
class _AlwaysLate(Hypothesis):
    """A stand-in claim: holds once the 0-var training accuracy is above chance x 2."""

    id, spec, statement = "stand_in", "test", "0-var training accuracy above twice chance"

    def evidence(self, ctx):
        acc = float(last_position_correct(ctx.model, *ctx.pool("0var_train")).double().mean())
        return [Evidence("acc", "mean correct", "causal", Threshold(2 / 59, ">=", "test"), Measurement.exact(acc))]


def test_registered_claims_run_on_the_chosen_checkpoints(tiny_run, monkeypatch):
    monkeypatch.setattr(hypotheses, "REGISTRY", {"stand_in": _AlwaysLate})
    doc = compute_series(tiny_run, n=N, claims=2, claims_n=N, progress=False)
    with_claims = [c["step"] for c in doc["checkpoints"] if "claims" in c]
    assert with_claims == [0, 30]
    hold = doc["claims_first_hold"]["stand_in"]
    assert hold["evaluated_steps"] == [0, 30]
    assert hold["verdicts"][-1] in ("pass", "fail")


# ----- the verdict timeline -----------------------------------------------------------------------
def test_a_claim_that_fails_then_passes_settles_once_with_one_flip():
    t = verdict_timeline([0, 500, 1000, 1500], ["fail", "fail", "pass", "pass"])
    assert t["final"] == "pass" and t["settles_at"] == 1000 and t["settled_after"] == 500
    assert t["flips"] == [{"from_step": 500, "to_step": 1000, "from": "fail", "to": "pass", "undecided_between": []}]
    assert not t["multiple_flips"] and not t["flagged"] and t["flag_reasons"] == []
    assert "settles pass between steps 500 and 1000" in timeline_text(t) and "FLAGGED" not in timeline_text(t)


def test_inconclusive_neither_makes_nor_hides_a_flip_and_delays_settling():
    # pass, inconclusive, pass: no flip; the verdict settles only after the inconclusive checkpoint
    t = verdict_timeline([0, 10, 20, 30], ["pass", "inconclusive", "pass", "pass"])
    assert t["flips"] == [] and t["settles_at"] == 20 and t["settled_after"] == 10 and not t["flagged"]
    # fail, inconclusive, pass: one flip, across the undecided checkpoint, which is listed with it
    t = verdict_timeline([0, 10, 20], ["fail", "inconclusive", "pass"])
    assert [(f["from_step"], f["to_step"], f["from"], f["to"]) for f in t["flips"]] == [(0, 20, "fail", "pass")]
    assert t["flips"][0]["undecided_between"] == [10] and t["settles_at"] == 20
    # a series that ends undecided has not settled
    t = verdict_timeline([0, 10], ["pass", "inconclusive"])
    assert t["settles_at"] is None and t["settled_after"] is None and t["final"] == "inconclusive"
    assert "not settled" in timeline_text(t)
    # a verdict held from the first checkpoint settles there, with nothing before it
    t = verdict_timeline([0, 10], ["pass", "pass"])
    assert t["settles_at"] == 0 and t["settled_after"] is None and "pass at all 2" in timeline_text(t)


def test_an_error_is_shown_and_flagged_but_is_not_a_flip():
    t = verdict_timeline([0, 10, 20], ["pass", "error", "pass"])
    assert t["flips"] == [] and t["errors"] == [10] and t["flagged"] and not t["multiple_flips"]
    assert t["flag_reasons"] == ["error at step 10"] and t["settles_at"] == 20


def test_a_claim_that_flips_twice_is_flagged():
    t = verdict_timeline([0, 10, 20, 30, 40], ["fail", "pass", "fail", "fail", "pass"])
    assert [(f["from"], f["to"], f["to_step"]) for f in t["flips"]] == [
        ("fail", "pass", 10),
        ("pass", "fail", 20),
        ("fail", "pass", 40),
    ]
    assert t["multiple_flips"] and t["flagged"] and t["flag_reasons"] == ["flips 3 times"]
    assert t["settles_at"] == 40 and t["settled_after"] == 30
    assert "FLAGGED: flips 3 times" in timeline_text(t)


def test_a_timeline_needs_ordered_steps_and_one_verdict_each():
    with pytest.raises(ValueError):
        verdict_timeline([0, 10], ["pass"])
    with pytest.raises(ValueError):
        verdict_timeline([10, 10], ["pass", "fail"])
    assert verdict_timeline([], [])["settles_at"] is None


def test_a_flip_names_the_items_whose_status_moved_with_their_numbers():
    def item(name, status, value, control_status="fail"):
        return {
            "name": name,
            "kind": "causal",
            "required": True,
            "status": status,
            "value": value,
            "ci": [value - 0.01, value + 0.01],
            "controls": {"shuffled": {"status": control_status, "value": 0.1}},
        }

    cps = [
        {
            "step": 0,
            "values": {},
            "claims": {"c": {"verdict": "pass", "items": [item("a", "pass", 0.9), item("b", "pass", 0.8)]}},
        },
        {"step": 5, "values": {}},  # claims not run here: not part of the timeline
        {
            "step": 10,
            "values": {},
            "claims": {"c": {"verdict": "fail", "items": [item("a", "pass", 0.91), item("b", "fail", 0.3)]}},
        },
        {
            "step": 20,
            "values": {},
            "claims": {"c": {"verdict": "fail", "items": [item("a", "pass", 0.9, "pass"), item("b", "pass", 0.8)]}},
        },
    ]
    t = claims_timeline(cps)["c"]
    assert t["steps"] == [0, 10, 20] and len(t["flips"]) == 1
    (moved,) = t["flips"][0]["changed_items"]  # a did not move: its status is pass at both
    assert (
        moved["name"] == "b"
        and moved["from"]["value"] == 0.8
        and moved["to"]
        == {
            "status": "fail",
            "value": 0.3,
            "ci": [0.29, 0.31],
        }
    )
    assert moved["controls"] == {}
    # without item numbers (a series written before they were kept) the flip still shows, its items unknown
    bare = [
        {"step": c["step"], "values": {}, "claims": {"c": {"verdict": c["claims"]["c"]["verdict"]}}}
        for c in cps
        if "claims" in c
    ]
    assert claims_timeline(bare)["c"]["flips"][0]["changed_items"] is None


def _flipping_claim(values):
    """A stand-in claim whose one item takes ``values`` in turn, one per checkpoint it runs on (in step
    order with one process): 0.9 passes its bar of 0.5, 0.1 fails it."""
    it = iter(values)

    class Flipping(Hypothesis):
        id, spec, statement = "flipping", "test", "a verdict that comes and goes"

        def evidence(self, ctx):
            v = next(it)
            return [Evidence("level", "a fixed sequence", "causal", Threshold(0.5, ">=", "test"), Measurement.exact(v))]

    return Flipping


def test_series_json_carries_each_claims_timeline_and_the_page_flags_a_claim_that_flips_twice(
    tiny_run, monkeypatch, tmp_path
):
    docs = []
    for _ in range(2):
        monkeypatch.setattr(hypotheses, "REGISTRY", {"flipping": _flipping_claim([0.9, 0.1, 0.9, 0.9])})
        docs.append(compute_series(tiny_run, n=N, claims=4, claims_n=N, progress=False))
    assert to_json(docs[0]) == to_json(docs[1])  # same inputs, same bytes
    doc = json.loads(to_json(docs[0]))
    t = doc["verdict_timeline"]["flipping"]
    assert t["steps"] == [0, 10, 20, 30] and t["verdicts"] == ["pass", "fail", "pass", "pass"]
    assert [(f["from_step"], f["to_step"]) for f in t["flips"]] == [(0, 10), (10, 20)]
    assert t["multiple_flips"] and t["flagged"] and t["settles_at"] == 20 and t["settled_after"] == 10
    moved = t["flips"][0]["changed_items"][0]
    assert moved["name"] == "level" and (moved["from"]["value"], moved["to"]["value"]) == (0.9, 0.1)
    page = render_html(doc)
    assert 'id="timeline-flagged"' in page and "⚑ flips 2 times" in page
    assert page.index("Accuracy by number of variables") < page.index('id="timeline"') < page.index("Progress measures")
    assert moved["threshold"] == {"value": 0.5, "direction": ">="}
    assert "level (bar &gt;= 0.5): 0.9 pass → 0.1 fail" in page
    # a claim that settles once is not flagged, and the page says none is
    monkeypatch.setattr(hypotheses, "REGISTRY", {"flipping": _flipping_claim([0.1, 0.1, 0.9, 0.9])})
    once = compute_series(tiny_run, n=N, claims=4, claims_n=N, progress=False)
    assert (
        not once["verdict_timeline"]["flipping"]["flagged"] and len(once["verdict_timeline"]["flipping"]["flips"]) == 1
    )
    page = render_html(once)
    assert 'id="timeline-flagged"' not in page and "No claim flips more than once" in page


# ----- phase detection on planted curves ----------------------------------------------------------
def planted(onsets=(1000, 4000, 12000), *, width=150, last=20000, every=100, n=1000, seed=0):
    """Records whose phase curves are logistic rises centred at ``onsets`` (addition, assignment,
    restricted slots), sampled as accuracies on n sequences (binomial noise)."""
    rng = np.random.default_rng(seed)
    steps = list(range(0, last + 1, every))
    records = []
    for s in steps:
        values = {}
        for phase, centre in zip(PHASES, onsets):
            p = 1 / 59 + (1 - 1 / 59) * 0.995 / (1 + np.exp(-(s - centre) / width))
            for m in phase.curve:
                values[m] = float(rng.binomial(n, p) / n)
        records.append({"step": s, "values": values})
    return records


def test_phase_detection_finds_planted_phases_in_order():
    found = detect_phases(planted())
    onsets = [p["onset_step"] for p in found["phases"]]
    for got, centre in zip(onsets, (1000, 4000, 12000)):
        assert centre <= got <= centre + 600  # 0.9 is crossed ~2.2 widths after the centre
    assert found["in_order"] and found["all_clear"]


def test_learning_phases_passes_on_planted_phases():
    r = LearningPhases().run_series(planted())
    assert r.verdict == "pass", r.reason


def test_a_two_stage_learning_curve_is_coherent_where_a_single_step_is_not():
    """Why rule version 2: a curve that rises in two stages (a spike, a plateau, then completion) is a
    learning curve; a single step split at its onset fits it badly, a non-decreasing fit does not. The
    same values shuffled or reversed are not learning curves under either measure."""
    curve = np.array([0.0] * 4 + [0.8, 0.85, 0.82, 0.86, 0.84, 0.87, 0.85, 0.86] + [0.95, 0.97, 0.98, 0.99, 0.99])
    onset = onset_index(curve)
    assert curve[onset] >= LEARNED and curve[onset - 1] < LEARNED
    assert step_fit_r2(curve, onset) < COHERENCE.value <= monotone_fit_r2(curve, onset)
    assert monotone_fit_r2(curve, onset) > 0.95
    shuffled = curve[np.random.default_rng(0).permutation(len(curve))]
    assert monotone_fit_r2(shuffled, onset_index(shuffled) or 1) < COHERENCE.value
    assert monotone_fit_r2(curve[::-1], 1) < 0.05
    assert monotone_fit_r2(curve, 0) is None and monotone_fit_r2(curve, None) is None  # nothing before the onset


def test_learning_phases_fails_on_a_shuffled_series():
    records = planted()
    order = np.random.default_rng(123).permutation(len(records))
    shuffled = [{"step": r["step"], "values": records[k]["values"]} for r, k in zip(records, order)]
    r = LearningPhases().run_series(shuffled)
    assert r.verdict == "fail", r.reason


def test_learning_phases_fails_when_assignment_and_restricted_slots_coincide():
    r = LearningPhases().run_series(planted((1000, 4000, 4000)))
    assert r.verdict == "fail"
    assert "assignment_before_restricted_slots" in r.reason


def test_learning_phases_fails_when_restricted_slots_come_before_assignment():
    r = LearningPhases().run_series(planted((1000, 12000, 4000)))
    assert r.verdict == "fail"


def test_learning_phases_fails_when_the_series_starts_after_addition():
    r = LearningPhases().run_series([x for x in planted() if x["step"] >= 2000])
    assert r.verdict == "fail" and "addition_phase_is_a_learning_curve" in r.reason


def test_a_single_noisy_dip_does_not_move_an_onset_but_forgetting_removes_it():
    curve = [0.0, 0.1, 0.5, 0.95, 0.97, 0.98, 0.2, 0.99, 0.99, 0.99]
    assert onset_index(curve) == 3
    assert onset_index(curve[:-3] + [0.3, 0.2, 0.1]) is None
    assert onset_index([0.99] * 5) == 0 and LEARNED == 0.9


def test_learning_phases_is_not_a_per_checkpoint_claim(tiny_run):
    assert "learning_phases" not in hypotheses.REGISTRY and "learning_phases" in SERIES_REGISTRY
    ctx = hypotheses.Context(load_checkpoint(tiny_run / "final.pt"), n=N)
    r = LearningPhases().run(ctx)
    assert isinstance(r, ClaimResult) and r.verdict == "skipped" and "assignadd-report" in r.reason


def test_series_json_serialises_an_undecided_claim_without_nan(tiny_run):
    doc = compute_series(tiny_run, n=N, claims=0, progress=False)
    assert doc["series_claims"]["learning_phases"]["verdict"] == "inconclusive"  # 30 steps: no phase yet
    json.loads(to_json(doc))


def test_bad_options_are_series_errors(tiny_run):
    for kwargs in ({"every": 0}, {"jobs": 0}, {"n": 1}, {"claims": -1}):
        with pytest.raises(SeriesError):
            compute_series(tiny_run, progress=False, **kwargs)


# ----- the shipped series ------------------------------------------------------------------------
shipped = pytest.mark.skipif(not assignadd.reference_series(), reason="the thinned reference series is not shipped yet")


@pytest.fixture(scope="module")
def shipped_doc():
    return compute_series(assignadd.reference_series()[0].parent, n=500, claims=0, progress=False)


@pytest.mark.slow
@pytest.mark.xdist_group("series_shipped")
@shipped
def test_shipped_series_shows_the_three_phases_in_order_at_plausible_steps(shipped_doc):
    onsets = [p["onset_step"] for p in shipped_doc["phases"]["phases"]]
    assert None not in onsets and onsets == sorted(onsets) and len(set(onsets)) == 3
    assert onsets[0] <= 5_000 and onsets[1] <= 15_000 and onsets[2] <= 25_000  # paper: spike ~5k, refinement ~15k


@pytest.mark.slow
@pytest.mark.xdist_group("series_shipped")
@shipped
def test_learning_phases_passes_on_the_shipped_series_under_version_4(shipped_doc):
    """Rule version 4 (docs/dynamics.md), scored after it was frozen. Version 3 failed the shipped series:
    no 500-step window held half of the assignment rise. Its assignment curve min(1-var, 2-var train
    accuracy) rises in two stages, as the paper's run does: about 0.4 with addition by step 500, then a
    spike at 2,500 -> 3,000 that holds a quarter or more of the rise at several times the rate of the
    1,000 steps around it, then a slow completion to ~8k. Version 1's step R^2 is still reported, and is
    below 0.5 here."""
    claim = shipped_doc["series_claims"]["learning_phases"]
    assert claim["verdict"] == "pass", claim["reason"]
    assignment = shipped_doc["phases"]["phases"][1]
    assert assignment["id"] == "assignment" and assignment["step_r2"] < 0.5 <= assignment["coherence_r2"]
    jump = shipped_doc["phases"]["assignment_jump"]
    assert jump["state"] == "pass" and tuple(jump["window"]) == (2500, 3000)
    assert jump["fraction_interval"][0] >= 0.2 and jump["window_contrast"] >= 3
    for p in shipped_doc["phases"]["phases"]:
        before, at = p["onset_interval"]
        assert before is not None and before < at  # onsets in steps, as intervals


@pytest.mark.slow
@pytest.mark.xdist_group("series_shipped")
@shipped
@pytest.mark.parametrize("every", [2, 4])
def test_the_shipped_series_thinned_is_inconclusive_not_judged(shipped_doc, every):
    """Version 2 counted checkpoints: --every 4 left 2 separating ones and failed without a word. Versions 3
    and 4 measure steps: with 1,000-8,000 steps between checkpoints the 500-step spike cannot be placed
    (it may hold nothing or half of the rise), and the claim says so."""
    records = [{"step": c["step"], "values": c["values"]} for c in shipped_doc["checkpoints"]]
    thinned = records[::every] + ([records[-1]] if (len(records) - 1) % every else [])
    r = LearningPhases().run_series(thinned)
    assert r.verdict == "inconclusive" and "assignment_jumps_after_addition" in r.reason, r.reason


@shipped
def test_the_shipped_series_cut_before_binding_is_inconclusive_with_exit_status_1(tmp_path, capsys):
    """assignadd-report on the shipped checkpoints up to step 2,000 (before the assignment spike): the
    assignment curve never reaches 0.9, so the series ends before assignment is learned; learning_phases
    is inconclusive, and the exit status says it did not pass."""
    cut = tmp_path / "cut"
    cut.mkdir()
    for ckpt in assignadd.reference_series():
        if int(ckpt.stem.split("_")[-1]) <= 2000:
            (cut / ckpt.name).symlink_to(ckpt)
    out = tmp_path / "out"
    assert report_main([str(cut), "--out", str(out), "--n", "100", "--claims", "0", "--quiet"]) == 1
    claim = json.loads((out / "series.json").read_text())["series_claims"]["learning_phases"]
    assert claim["verdict"] == "inconclusive" and "ends at step 2,000, before variable assignment" in claim["reason"]


@pytest.mark.slow
@pytest.mark.xdist_group("series_shipped")
@shipped
def test_scrubbed_accuracy_tracks_when_the_papers_algorithm_explains_the_model(shipped_doc):
    """The whole_algorithm scrubs along the shipped run: at chance at step 0; by the end the routing
    scrub keeps nearly all of the model's accuracy; before the refinement it keeps clearly less."""
    by_step = {c["step"]: c["values"] for c in shipped_doc["checkpoints"]}
    first, last = by_step[min(by_step)], by_step[max(by_step)]
    assert first["scrub_model_accuracy"] < 0.1 and first["scrub_routing_accuracy"] < 0.1
    assert last["scrub_model_accuracy"] > 0.95
    assert last["scrub_routing_accuracy"] > last["scrub_model_accuracy"] - 0.05
    assert last["scrub_addition_accuracy"] > last["scrub_model_accuracy"] - 0.05
    gaps = [v["scrub_model_accuracy"] - v["scrub_routing_accuracy"] for s, v in by_step.items() if 2000 <= s <= 10000]
    assert max(gaps) > 0.15  # mid-training, the routing the paper describes does not yet explain the model


def test_restricted_cells_name_each_variable_in_the_slot_training_never_gave_it():
    from assignadd.hypotheses.measures.progress import measure_definitions, restricted_cells

    task = Task()
    tokens, _ = task.pool("1var_restricted_slot", 400, seed=0)
    cells = restricted_cells(task, tokens)
    assert list(cells) == [
        "acc_restricted_a_in_rhs",
        "acc_restricted_b_in_rhs",
        "acc_restricted_k_in_lhs",
        "acc_restricted_l_in_lhs",
    ]
    # every sequence of the pool falls in exactly one cell: a restricted variable in its forbidden slot
    assert torch.equal(torch.stack(list(cells.values())).sum(0), torch.ones(len(tokens), dtype=torch.long))
    assert set(cells) <= set(measure_definitions(task))


@pytest.mark.slow
@pytest.mark.xdist_group("series_shipped")
@shipped
def test_the_restricted_slot_phase_comes_cell_by_cell_on_the_shipped_run(shipped_doc):
    """Each restricted (variable, slot) cell generalizes at its own time: at some checkpoint one cell is
    solved while another is near chance; by the end all are solved."""
    cells = [m for m in shipped_doc["measures"] if m.startswith("acc_restricted_")]
    values = [[c["values"][m] for m in cells] for c in shipped_doc["checkpoints"]]
    assert len(cells) == 4 and min(values[-1]) > 0.95
    assert max(max(v) - min(v) for v in values) > 0.8
