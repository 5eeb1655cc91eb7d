"""The shipped three-seed f sweep (docs/sweep_results/f_three_seeds) re-scores: its weights are the ones its
report hashed and measured, and the current rule gives the verdict the docs state."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from assignadd.hypotheses.data_requirements import generalization_accuracy
from assignadd.hypotheses.session import task_for
from assignadd.model import load_checkpoint_full
from assignadd.reports import sweep_report

SHIPPED = Path(sweep_report.__file__).resolve().parents[1] / "docs" / "sweep_results" / "f_three_seeds"
pytestmark = pytest.mark.skipif(not (SHIPPED / "sweep.json").exists(), reason="the three-seed f sweep is not shipped")


def points() -> dict:
    doc = json.loads((SHIPPED / "sweep.json").read_text(encoding="utf-8"))
    return {p["name"]: p for p in doc["sweeps"][0]["points"]}


def test_every_point_is_finished_with_its_metric_hash_and_cost():
    pts = points()
    assert len(pts) == 15 and {p["seed"] for p in pts.values()} == {0, 1, 2}
    for p in pts.values():
        assert p["finished"] and p["steps_trained"] == 20000 and p["accuracy"] is not None
        assert len(p["final_sha256"]) == 64 and p["train_wall_s"] > 0


@pytest.mark.parametrize("path", sorted((SHIPPED / "weights").glob("*.pt")), ids=lambda p: p.stem)
def test_shipped_weights_are_the_measured_ones_and_give_the_reported_accuracy(path):
    point = points()[path.stem]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == point["final_sha256"]
    model, meta = load_checkpoint_full(path)
    task, source = task_for(meta, model.cfg, path)
    assert source == "checkpoint" and task.config.f == point["f"]
    assert generalization_accuracy(model, task, "f").value == pytest.approx(point["accuracy"], abs=1e-12)


def test_rescored_under_the_current_rule_the_f_half_fails_above_the_band():
    result = sweep_report.rescore_report(SHIPPED / "sweep.json")
    assert result.verdict == "fail"
    assert "f_threshold_not_above_band" in result.reason
