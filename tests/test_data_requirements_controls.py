"""``data_requirements`` (SPEC §4.5) on sweeps built to contain no threshold, or the wrong one: each must
fail or be inconclusive, never pass. And the band itself: symmetric around the paper's values, one step
of the paper's grid wide, so that it can fail.

The sweeps are synthetic scored points (``PointResult``), so the answer is known by construction and each
test takes milliseconds; ``tests/test_sweep.py`` runs the same rule through real sweep folders.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from assignadd.hypotheses import data_requirements as dr
from assignadd.reports import sweep_report

F_GRID = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7)  # the reduced protocol's grids (docs/sweeps.md)
R_GRID = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
SHIPPED_REPORT = Path(dr.__file__).resolve().parents[1] / "docs" / "sweep_results" / "sweep.json"


def points(param: str, accuracies: dict, seed: int = 0, half_width: float = 0.005) -> list[dr.PointResult]:
    """Scored points: ``accuracies`` maps grid value -> accuracy, with an interval of ± ``half_width``."""
    out = []
    for v, acc in sorted(accuracies.items()):
        f, r = (v, 1.0) if param == "f" else (0.7, v)
        out.append(
            dr.PointResult(
                f"{param}={v:g}_seed={seed}",
                param,
                v,
                seed,
                f,
                r,
                dr.METRICS[param],
                acc,
                acc - half_width,
                acc + half_width,
                1000,
                None,
            )
        )
    return out


def step(param: str, grid, from_value: float | None, seed: int = 0) -> list[dr.PointResult]:
    """0.99 at and above ``from_value`` (None: nowhere), 0.05 below."""
    return points(param, {v: 0.99 if from_value is not None and v >= from_value else 0.05 for v in grid}, seed)


def decide(f=None, r=None):
    given = {k: v for k, v in (("f", f), ("r", r)) if v is not None}
    return dr.DataRequirements().run_results(given)


# ----- the band ---------------------------------------------------------------------------------------
def test_the_band_is_symmetric_around_the_papers_values_and_one_paper_grid_step_wide():
    for p, paper in dr.PAPER.items():
        lo, hi = dr.BAND[p]
        assert paper - lo == pytest.approx(hi - paper) == pytest.approx(dr.BAND_HALF_WIDTH) == pytest.approx(0.05)
    assert dr.BAND == {"f": (0.2, 0.3), "r": (0.15, 0.25)}


def test_the_preregistered_grid_is_dense_enough_inside_the_band_to_pass():
    """Two neighbouring grid values inside the band: a bracket (b, θ] can lie wholly inside it."""
    for p, grid in dr.PREREGISTERED_GRID.items():
        lo, hi = dr.BAND[p]
        inside = [v for v in grid if lo - 1e-9 <= v <= hi + 1e-9]
        assert len(inside) >= 4 and max(b - a for a, b in zip(inside, inside[1:])) <= dr.BAND_HALF_WIDTH / 2 + 1e-9


def test_thresholds_at_the_papers_values_pass():
    result = decide(step("f", F_GRID, 0.25), step("r", R_GRID, 0.2))
    assert result.verdict == "pass", result.reason


# ----- controls that must not pass ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "case, f, r",
    [
        ("every value generalizes", step("f", F_GRID, 0.1), step("r", R_GRID, 0.05)),
        ("no value generalizes", step("f", F_GRID, None), step("r", R_GRID, None)),
        ("f: no value generalizes", step("f", F_GRID, None), step("r", R_GRID, 0.2)),
        ("r: every value generalizes", step("f", F_GRID, 0.25), step("r", R_GRID, 0.05)),
        (
            "not monotone in f",
            points("f", dict(zip(F_GRID, (0.05, 0.99, 0.05, 0.05, 0.99, 0.99, 0.99, 0.99)))),
            step("r", R_GRID, 0.2),
        ),
        (
            "not monotone in r",
            step("f", F_GRID, 0.25),
            points("r", dict(zip(R_GRID, (0.99, 0.05, 0.05, 0.99, 0.99, 0.99, 0.99)))),
        ),
        (
            "generalization lost at the top",
            points("f", dict(zip(F_GRID, (0.05, 0.05, 0.05, 0.99, 0.99, 0.99, 0.99, 0.05)))),
            step("r", R_GRID, 0.2),
        ),
        ("f threshold at 0.4", step("f", F_GRID, 0.4), step("r", R_GRID, 0.3)),
        ("f threshold one paper step low", step("f", F_GRID, 0.15), step("r", R_GRID, 0.2)),
    ],
)
def test_sweeps_without_the_papers_threshold_never_pass(case, f, r):
    result = decide(f, r)
    assert result.verdict in ("fail", "inconclusive"), (case, result.reason)


@pytest.mark.parametrize(
    "f, r, item",
    [
        (step("f", F_GRID, 0.1), step("r", R_GRID, 0.2), "f_threshold_not_below_band"),  # generalizes from f = 0.1
        (step("f", F_GRID, None), step("r", R_GRID, 0.2), "f_threshold_not_above_band"),  # nothing up to 0.7
        (
            points("f", dict(zip(F_GRID, (0.05, 0.99, 0.05, 0.05, 0.99, 0.99, 0.99, 0.99)))),
            step("r", R_GRID, 0.2),
            "f_generalization_is_monotone",
        ),
        (step("f", F_GRID, 0.25), step("r", R_GRID, 0.05), "r_threshold_not_below_band"),
    ],
)
def test_each_control_fails_on_the_item_that_catches_it(f, r, item):
    result = decide(f, r)
    assert result.verdict == "fail" and item in result.reason, result.reason


def test_a_grid_too_coarse_around_the_band_edge_is_inconclusive_not_a_pass():
    """r generalizes from 0.3 and fails at 0.2: the threshold is somewhere in (0.2, 0.3], across the band's
    upper edge (0.25). The grid cannot say which side: inconclusive, with the bracket and the edge."""
    result = decide(step("f", F_GRID, 0.25), step("r", R_GRID, 0.3))
    assert result.verdict == "inconclusive", result.reason
    assert "r_threshold_not_above_band" in result.reason and "(0.2, 0.3]" in result.reason and "0.25" in result.reason


def test_a_point_whose_interval_straddles_the_bar_widens_the_bracket():
    """r = 0.2 at 0.90 ± 0.02 is neither generalizing nor failing: the bracket becomes (0.15, 0.3]."""
    r = points("r", dict(zip(R_GRID, (0.05, 0.05, 0.05, 0.90, 0.99, 0.99, 0.99))), half_width=0.02)
    est = dr.estimate_threshold(r)
    assert est["seeds"]["0"]["bracket"] == [0.15, 0.3]
    assert decide(step("f", F_GRID, 0.25), r).verdict == "inconclusive"


def test_every_seed_must_lie_in_the_band():
    f = step("f", F_GRID, 0.25, seed=0) + step("f", F_GRID, 0.4, seed=1)
    result = decide(f, step("r", R_GRID, 0.2))
    assert result.verdict == "fail" and "f_threshold_not_above_band" in result.reason


def test_a_threshold_above_the_grid_is_a_fail_in_the_json_not_no_data():
    """No f value generalizes: the bracket is (0.7, ∞), wholly above the band; written as "fail"."""
    d = decide(step("f", F_GRID, None), step("r", R_GRID, 0.2)).to_dict()
    item = next(e for e in d["evidence"] if e["name"] == "f_threshold_not_above_band")
    assert item["status"] == "fail" and item["measurement"]["ci"] == [0.7, None]


def test_no_sweep_at_all_is_an_error_naming_both_commands():
    result = dr.DataRequirements().run_results({})
    assert result.verdict == "error" and "--param f" in result.reason and "--param r" in result.reason


# ----- the shipped sweep, re-scored --------------------------------------------------------------------
@pytest.mark.skipif(not SHIPPED_REPORT.exists(), reason="docs/sweep_results/sweep.json is not shipped")
def test_shipped_sweep_results_rescored_are_inconclusive_on_r():
    """docs/sweep_results (reduced protocol, one seed) was written under rule version 1 (pass). Under
    version 2 the f half passes (threshold in (0.25, 0.3], inside 0.20-0.30) and the r half cannot be
    decided: r = 0.2 fails (0.892), r = 0.3 generalizes, and the bracket (0.2, 0.3] straddles the band's
    edge 0.25. The grid has no value between them."""
    result = sweep_report.rescore_report(SHIPPED_REPORT)
    assert result.verdict == "inconclusive", result.reason
    states = {e.name: dr.SWEEP_RULE.of(e.threshold, e.measurement) for e in result.evidence}
    assert states == {
        "f_threshold_not_below_band": "pass",
        "f_threshold_not_above_band": "pass",
        "f_generalization_is_monotone": "pass",
        "r_threshold_not_below_band": "pass",
        "r_threshold_not_above_band": "inconclusive",
        "r_generalization_is_monotone": "pass",
    }
