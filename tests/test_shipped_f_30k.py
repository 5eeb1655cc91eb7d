"""The f half at the paper's 30,000 steps (docs/sweep_results/f_30k): nine finished points over three seeds,
and re-scored under the current rule every required item of the f half passes, the threshold at 0.275 for
every seed. The weights of the pair that brackets it (seed 1 at f = 0.25, seed 0 at f = 0.275) are checked
with the other shipped sweep weights (tests/test_shipped_three_seed_sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

from assignadd.reports import sweep_report

FOLDER = Path(sweep_report.__file__).resolve().parents[1] / "docs" / "sweep_results" / "f_30k"
STEPS = 30000


def points() -> dict:
    doc = json.loads((FOLDER / "sweep.json").read_text(encoding="utf-8"))
    return {p["name"]: p for p in doc["sweeps"][0]["points"]}


def test_nine_points_finished_under_the_papers_budget():
    pts = points()
    assert len(pts) == 9 and {p["seed"] for p in pts.values()} == {0, 1, 2}
    assert sorted({p["f"] for p in pts.values()}) == [0.25, 0.275, 0.3]
    for p in pts.values():
        assert p["finished"] and p["accuracy"] is not None and len(p["final_sha256"]) == 64
        assert p["steps_trained"] == STEPS or (p["stopped_early"] and p["steps_trained"] < STEPS)
    # every seed: below the bar at 0.25, above it from 0.275
    assert {p["f"]: p["generalizes"] for p in pts.values() if p["seed"] == 0} == {0.25: False, 0.275: True, 0.3: True}
    assert [p["generalizes"] for p in pts.values()].count(True) == 6


def test_rescored_the_f_half_passes_every_item_and_waits_for_the_r_half():
    result = sweep_report.rescore_report(FOLDER / "sweep.json")
    assert result.verdict == "error" and "no r sweep given" in result.reason
    assert "all 3 required items passed" in result.reason
    items = {e.name: e for e in result.evidence}
    assert items["f_threshold_not_below_band"].measurement.value == 0.275
    assert items["f_generalization_is_monotone"].measurement.value == 0.0
