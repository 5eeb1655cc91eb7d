"""A series that ends before the paper's run and before a phase is learned (a run of a few hundred steps, a
run cut before binding): ``learning_phases`` is ``inconclusive`` and says where the series ends, never
``fail``, and ``assignadd-report``'s summary and page print no ``None``. A series as long as the paper's run,
and a short series that shows a failure, keep their ``fail``.

Synthetic records (``{"step", "values"}``): each test takes milliseconds.
"""

from __future__ import annotations

import re

import numpy as np

from assignadd.hypotheses.base import IntervalRule
from assignadd.hypotheses.learning_phases import PAPER_RUN_STEPS, PHASES, LearningPhases, detect_phases
from assignadd.reports.series import SCHEMA, summary_lines
from assignadd.reports.series_html import render_html

CHANCE = 1 / 59


def logistic(centre: float, width: float = 150):
    return lambda s: CHANCE + (0.995 - CHANCE) / (1 + np.exp(-(s - centre) / width))


def records(steps, curves: dict) -> list[dict]:
    """Every measure of a phase's curve follows ``curves[phase id]`` (a function of the step)."""
    return [{"step": s, "values": {m: float(curves[p.id](s)) for p in PHASES for m in p.curve}} for s in steps]


# The 300-step run of assignadd-train --steps 300: every curve near chance, rising a little at the end.
SHORT_RUN = records(
    range(0, 301, 100),
    {
        "addition": lambda s: [0.012, 0.003, 0.0, 0.015][s // 100],
        "assignment": lambda s: [0.016, 0.015, 0.04, 0.131][s // 100],
        "restricted_slots": lambda s: [0.011, 0.019, 0.037, 0.092][s // 100],
    },
)


def series_doc(recs: list[dict]) -> dict:
    """The parts of an ``assignadd.series/1`` document the summary and the page read."""
    return {
        "schema": SCHEMA,
        "source": "runs/short",
        "settings": {"n": 100, "every": 1, "pool_seed": 0, "claims": 0, "claims_n": 2000},
        "measures": {m: m for p in PHASES for m in (*p.curve, "acc_restricted_a_in_rhs")},
        "checkpoints": recs,
        "phases": detect_phases(recs),
        "claims_first_hold": {},
        "verdict_timeline": {},
        "series_claims": {"learning_phases": LearningPhases().run_series(recs).to_dict()},
    }


def test_a_run_too_short_to_show_a_phase_is_inconclusive_and_says_where_it_ends():
    r = LearningPhases().run_series(SHORT_RUN)
    assert r.verdict == "inconclusive", r.reason
    assert r.reason.startswith(
        "the series ends at step 300, before 0-var addition generalizes, variable assignment appears and "
        "restricted-slot sequences generalize (their curves reach at most 0.015, 0.131 and 0.092"
    ), r.reason
    assert f"the paper's {PAPER_RUN_STEPS:,}-step run" in r.reason and "--steps" in r.reason
    d = r.to_dict()
    for e in d["evidence"]:  # every item waits on a phase the series ends before: open, never failed
        assert e["status"] == "inconclusive", e["name"]
        assert e["measurement"]["extra"]["unresolved"].startswith("the series ends at step 300, before "), e["name"]
        assert all(c["status"] == "inconclusive" for c in e["controls"].values()), e["name"]
    assert IntervalRule(missing="unbounded", empty="inconclusive").state(">=", 0.5, None, None) == "inconclusive"


def test_the_summary_and_the_page_of_a_short_run_print_no_none_and_no_fail():
    doc = series_doc(SHORT_RUN)
    lines = summary_lines(doc)
    text = "\n".join(lines)
    assert "None" not in text and "(fail)" not in text and "n/a of" not in text, text
    assert lines[0] == (
        "  addition          onset none: not learned by step 300, where the series ends (its curve reaches at "
        "most 0.015; learned at 0.9)"
    )
    assert lines[3] == (
        "  assignment spike: not measured: the series ends at step 300, before 0-var addition generalizes and "
        "variable assignment appears (inconclusive)"
    )
    assert lines[5].startswith("  learning_phases: inconclusive (the series ends at step 300, before ")
    page = re.sub(r"<img [^>]*>", "", render_html(doc))
    assert "None" not in page and "(fail)" not in page
    assert "The series ends at step 300, before 0-var addition generalizes" in page
    assert "after 300 (the series ends first)" in page


def test_a_series_cut_after_addition_waits_only_on_the_later_phases():
    recs = records(
        range(0, 2001, 100),
        {
            "addition": logistic(300),
            "assignment": lambda s: min(0.3 + s / 5000, 0.7),
            "restricted_slots": lambda s: CHANCE,
        },
    )
    r = LearningPhases().run_series(recs)
    assert r.verdict == "inconclusive", r.reason
    assert r.reason.startswith(
        "the series ends at step 2,000, before variable assignment appears and restricted-slot sequences generalize"
    ), r.reason
    status = {e.name: e.status for e in r.evidence}
    assert status.pop("addition_phase_is_a_learning_curve") == "pass"
    assert set(status.values()) == {"inconclusive"}, status


def test_a_series_as_long_as_the_papers_run_that_never_learns_a_phase_still_fails():
    """Variable binding never learned in 40,000 steps (as seed 7's run): the series shows its absence."""
    recs = records(
        range(0, PAPER_RUN_STEPS + 1, 500),
        {
            "addition": logistic(700),
            "assignment": lambda s: min(0.3 + s / 10000, 0.58),
            "restricted_slots": lambda s: CHANCE,
        },
    )
    found = detect_phases(recs)
    assert not any("series_ends_before" in p for p in found["phases"])
    r = LearningPhases().run_series(recs)
    assert r.verdict == "fail" and "assignment_phase_is_a_learning_curve" in r.reason, r.reason
    assert "the series ends" not in r.reason


def test_a_short_series_that_shows_a_failure_still_fails():
    """Assignment learned before addition, restricted slots not yet: the spike after addition is already
    ruled out, whatever comes later."""
    recs = records(
        range(0, 5001, 100),
        {"addition": logistic(3000), "assignment": logistic(1000), "restricted_slots": lambda s: CHANCE},
    )
    r = LearningPhases().run_series(recs)
    assert r.verdict == "fail" and "assignment_jumps_after_addition" in r.reason, r.reason
    status = {e.name: e.status for e in r.evidence}
    assert status["restricted_slots_phase_is_a_learning_curve"] == "inconclusive"  # not learned yet: open


def test_a_phase_learned_and_lost_in_a_short_series_still_fails():
    recs = records(
        range(0, 3001, 100),
        {
            "addition": lambda s: 0.99 if 500 <= s <= 1500 else 0.2,
            "assignment": lambda s: CHANCE,
            "restricted_slots": lambda s: CHANCE,
        },
    )
    r = LearningPhases().run_series(recs)
    assert r.verdict == "fail" and "addition_phase_is_a_learning_curve" in r.reason, r.reason
