"""The one interval rule (``base.IntervalRule``) and the one decision (``base.decide``) against the three pairs
they replaced: one checkpoint (``Threshold.status`` + ``decide``), a series (``learning_phases.interval_state``
+ ``decide_series``) and a sweep (``data_requirements.bracket_state`` + ``decide_sweep``).

The former rules are copied below, labelled ``FORMER``, as they stood before the merge; the only edit is that
the former checkpoint ``decide`` reads the former ``Threshold.status`` where it read ``Evidence.status`` (which
now goes through the new rule), so that nothing of the new code judges the old. Every state and every verdict
and reason string must be the same for every input on the grids here: ends missing, NaN, infinite, on the
bar and 1e-10 / 1e-9 either side of it, with and without an open low end.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from assignadd.hypotheses.base import (
    ACTED_MIN,
    CHECKPOINT_POLICY,
    CHECKPOINT_RULE,
    Evidence,
    IntervalRule,
    Measurement,
    Policy,
    Threshold,
    decide,
)
from assignadd.hypotheses.data_requirements import SWEEP_POLICY, SWEEP_RULE
from assignadd.hypotheses.learning_phases import SERIES_POLICY, SERIES_RULE


# ===== FORMER rules (reference implementations, copied; not used by the package) ===========================
def former_threshold_status(t: Threshold, low, high) -> str:
    """FORMER ``Threshold.status`` (with ``Threshold.passes``), base.py."""

    def passes(low, high):
        if low is None or high is None:
            return False
        return low >= t.value if t.direction == ">=" else high <= t.value

    if low is None or high is None:
        return "no data"
    if passes(low, high):
        return "pass"
    wrong_side = high < t.value if t.direction == ">=" else low > t.value
    return "fail" if wrong_side else "inconclusive"


def former_interval_state(direction: str, value: float, low, high) -> str:
    """FORMER ``learning_phases.interval_state``."""
    conservative, optimistic = (low, high) if direction == ">=" else (high, low)
    if conservative is None and optimistic is None:
        return "fail"

    def clears(x):
        return x is not None and (x >= value if direction == ">=" else x <= value)

    if clears(conservative):
        return "pass"
    return "inconclusive" if clears(optimistic) or optimistic is None else "fail"


def former_bracket_state(direction: str, value: float, low, high, open_low: bool) -> str:
    """FORMER ``data_requirements.bracket_state``."""
    if low is None and high is None:
        return "fail"
    tol = 1e-9
    if direction == ">=":
        if low is not None and low >= value - tol:
            return "pass"
        return "fail" if high is not None and high < value - tol else "inconclusive"
    if high is not None and high <= value + tol:
        return "pass"
    if low is not None and (low >= value - tol if open_low else low > value + tol):
        return "fail"
    return "inconclusive"


def former_series_item_state(e, control=None) -> str:
    """FORMER ``learning_phases.item_state``."""
    m = e.measurement if control is None else e.controls[control]
    return former_interval_state(e.threshold.direction, e.threshold.value, m.low, m.high)


def former_sweep_item_state(e) -> str:
    """FORMER ``data_requirements.item_state``."""
    m, t = e.measurement, e.threshold
    return former_bracket_state(t.direction, t.value, m.low, m.high, bool(m.extra.get("open_low")))


def former_decide(evidence) -> tuple[str, str]:
    """FORMER ``base.decide`` (``e.status`` / ``e.control_status(c)`` read as the former ``Threshold.status``)."""

    def status(e):
        return former_threshold_status(e.threshold, e.measurement.low, e.measurement.high)

    def control_status(e, c):
        return former_threshold_status(e.threshold, e.controls[c].low, e.controls[c].high)

    required = [e for e in evidence if e.required]
    if not any(e.kind == "causal" for e in required):
        return "error", "no required causal evidence item: observational evidence alone never suffices"
    empty = [e.name for e in required if status(e) == "no data"]
    if empty:
        return "error", f"required evidence had no data: {', '.join(empty)}"
    failed = [e.name for e in required if status(e) == "fail"]
    if failed:
        return "fail", f"required evidence failed: {', '.join(failed)}"
    idle = []
    for e in required:
        for c, m in sorted(e.controls.items()):
            if m.value is None or not m.n:
                idle.append(f"{c} on {e.name} had no data")
            elif m.acted is not None and not m.acted > ACTED_MIN:
                idle.append(f"{c} on {e.name} changed nothing it targets")
    if idle:
        return "error", "a control did not act, so it cannot count for or against the claim: " + "; ".join(idle)
    leaked = [f"{e.name} on {c}" for e in required for c in e.controls if control_status(e, c) == "pass"]
    if leaked:
        return "fail", f"evidence also passed on a control (it cannot tell the claim apart): {', '.join(leaked)}"
    open_items = []
    for e in required:
        if status(e) == "inconclusive":
            more = e.measurement.samples_to_decide(e.threshold)
            hint = f" (about {more} samples might decide it)" if more else ""
            open_items.append(
                f"{e.name} {e.measurement.value:.4g} [{e.measurement.low:.4g}, {e.measurement.high:.4g}] "
                f"straddles {e.threshold.direction} {e.threshold.value}{hint}"
            )
        for c, m in sorted(e.controls.items()):
            if control_status(e, c) == "inconclusive":
                open_items.append(f"{e.name} on control {c} straddles its bar")
    if open_items:
        return "inconclusive", "an interval straddles its threshold: " + "; ".join(open_items)
    return "pass", f"all {len(required)} required items passed and failed on their controls"


def former_decide_series(evidence) -> tuple[str, str]:
    """FORMER ``learning_phases.decide_series``."""
    item_state = former_series_item_state
    required = [e for e in evidence if e.required]
    if not required:
        return "error", "no required evidence item"
    uncontrolled = [e.name for e in required if not e.controls]
    if uncontrolled:
        return "error", f"required items without a time-axis control: {', '.join(uncontrolled)}"
    unresolved = [e for e in required if item_state(e) == "inconclusive"]
    also = ("; not resolved by the checkpoints: " + ", ".join(e.name for e in unresolved)) if unresolved else ""
    failed = [e.name for e in required if item_state(e) == "fail"]
    if failed:
        return "fail", f"required evidence failed: {', '.join(failed)}{also}"
    leaked = [f"{e.name} on {c}" for e in required for c in e.controls if item_state(e, c) == "pass"]
    if leaked:
        return "fail", f"evidence also passed on a control (it cannot tell the claim apart): {', '.join(leaked)}"
    unresolved_controls = [
        f"{e.name} on {c}" for e in required for c in e.controls if item_state(e, c) == "inconclusive"
    ]
    if unresolved or unresolved_controls:
        parts = [
            f"{e.name} ({e.measurement.extra.get('unresolved', 'interval straddles the threshold')})"
            for e in unresolved
        ] + [f"{x} (a control the checkpoints cannot rule out)" for x in unresolved_controls]
        return "inconclusive", (
            "the checkpoints do not resolve: "
            + "; ".join(parts)
            + ". Measure a denser series there (assignadd-report --every 1, or more checkpoints)"
        )
    return "pass", f"all {len(required)} required items passed and failed on their controls"


def former_decide_sweep(evidence) -> tuple[str, str]:
    """FORMER ``data_requirements.decide_sweep``."""
    item_state = former_sweep_item_state
    required = [e for e in evidence if e.required]
    if not required:
        return "error", "no required evidence item"
    states = {e.name: item_state(e) for e in required}
    unresolved = [e for e in required if states[e.name] == "inconclusive"]
    failed = [n for n, st in states.items() if st == "fail"]
    if failed:
        also = f"; not resolved by the grid: {', '.join(e.name for e in unresolved)}" if unresolved else ""
        return "fail", f"required evidence failed: {', '.join(failed)}{also}"
    if unresolved:
        notes = [
            f"{e.name} ({e.measurement.extra.get('unresolved', 'interval straddles the threshold')})"
            for e in unresolved
        ]
        return "inconclusive", (
            "the grid does not resolve: "
            + "; ".join(notes)
            + ". A grid denser there decides it (the pre-registered grid: docs/sweeps.md)"
        )
    return "pass", f"all {len(required)} required items passed"


# ===== the interval rule: every state on a grid =============================================================
BARS = (0.0, 0.2, 0.25, 0.3, 0.5, 2000, 0.25 - 0.05, 0.25 + 0.05)  # the last two as a band's edges are computed


def ends(bar) -> list:
    near = [bar + d for d in (0.0, 1e-10, -1e-10, 1e-9, -1e-9, 2e-9, -2e-9, 0.05, -0.05, 1.0, -1.0)]
    return [None, math.nan, math.inf, -math.inf, *near]


GRID = [
    (direction, bar, low, high, open_low)
    for direction in (">=", "<=")
    for bar in BARS
    for low, high in itertools.product(ends(bar), repeat=2)
    for open_low in (False, True)
]


def test_the_grid_reaches_every_state_of_every_former_rule():
    seen = {
        "checkpoint": {former_threshold_status(Threshold(v, d, "t"), lo, hi) for d, v, lo, hi, _ in GRID},
        "series": {former_interval_state(d, v, lo, hi) for d, v, lo, hi, _ in GRID},
        "sweep": {former_bracket_state(d, v, lo, hi, o) for d, v, lo, hi, o in GRID},
    }
    assert seen["checkpoint"] == {"pass", "fail", "inconclusive", "no data"}
    assert seen["series"] == seen["sweep"] == {"pass", "fail", "inconclusive"}


@pytest.mark.parametrize("direction", [">=", "<="])
def test_one_checkpoint_reads_as_the_former_threshold_status(direction):
    for d, v, lo, hi, open_low in GRID:
        if d != direction:
            continue
        t = Threshold(v, d, "t")
        want = former_threshold_status(t, lo, hi)
        m = Measurement(None, lo, hi, 1, {"open_low": open_low})  # the checkpoint rule reads no brackets
        assert CHECKPOINT_RULE.state(d, v, lo, hi) == want, (d, v, lo, hi)
        assert t.status(lo, hi) == want, (d, v, lo, hi)
        assert Evidence("x", "", "causal", t, m).status == want, (d, v, lo, hi, open_low)
        assert Evidence("x", "", "causal", t, Measurement(0.0, 0, 0), {"c": m}).control_status("c") == want


@pytest.mark.parametrize("direction", [">=", "<="])
def test_a_series_reads_as_the_former_interval_state(direction):
    for d, v, lo, hi, open_low in GRID:
        if d != direction:
            continue
        want = former_interval_state(d, v, lo, hi)
        t = Threshold(v, d, "t")
        m = Measurement(None, lo, hi, 1, {"open_low": open_low})  # the series rule reads no brackets
        e = Evidence("x", "", "observational", t, m, {"c": m}, rule=SERIES_RULE)
        assert SERIES_RULE.state(d, v, lo, hi) == want, (d, v, lo, hi)
        assert e.status == former_series_item_state(e) == want, (d, v, lo, hi, open_low)
        assert e.control_status("c") == former_series_item_state(e, "c") == want


@pytest.mark.parametrize("direction", [">=", "<="])
def test_a_sweep_reads_as_the_former_bracket_state(direction):
    for d, v, lo, hi, open_low in GRID:
        if d != direction:
            continue
        want = former_bracket_state(d, v, lo, hi, open_low)
        t = Threshold(v, d, "t")
        e = Evidence("x", "", "observational", t, Measurement(None, lo, hi, 1, {"open_low": open_low}), rule=SWEEP_RULE)
        assert SWEEP_RULE.state(d, v, lo, hi, open_low) == want
        assert e.status == former_sweep_item_state(e) == want, (d, v, lo, hi, open_low)
    closed = Evidence("x", "", "observational", Threshold(0.3, "<=", "t"), Measurement(None, 0.3, 0.5, 1))
    assert former_sweep_item_state(closed) == SWEEP_RULE.of(closed.threshold, closed.measurement) == "inconclusive"


def test_the_rules_differ_only_in_their_options():
    assert CHECKPOINT_RULE == IntervalRule()
    assert SERIES_RULE == IntervalRule(missing="unbounded", empty="fail", fails="unreached")
    assert SWEEP_RULE == IntervalRule(missing="unbounded", empty="fail", tol=1e-9, brackets=True)
    with pytest.raises(ValueError, match="missing"):
        IntervalRule(missing="open")
    with pytest.raises(ValueError, match="tol"):
        IntervalRule(tol=-1.0)
    with pytest.raises(ValueError, match="requires"):
        Policy(requires="a model", straddles="")


# ===== the one decide: every verdict and reason on random evidence ===========================================
def random_measurement(rng: random.Random, t: Threshold) -> Measurement:
    v = t.value
    pick = [None, math.nan, v, v - 0.3, v - 0.1, v - 1e-10, v + 1e-10, v + 0.1, v + 0.3]
    low, high = rng.choice(pick), rng.choice(pick)
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)) and low > high:
        low, high = high, low
    value = rng.choice([None, v, v + 0.05, v - 0.05])
    extra = {}
    if rng.random() < 0.3:
        extra["unresolved"] = rng.choice(["checkpoints 1,000-2,000 are too far apart", "bracket (0.2, 0.3]"])
    if rng.random() < 0.5:
        extra["open_low"] = True
    acted = rng.choice([None, None, 0.0, ACTED_MIN, 1.0])
    return Measurement(value, low, high, rng.choice([None, 0, 1, 100, 2000]), extra, acted)


def random_evidence(rng: random.Random, rule: IntervalRule, with_controls: bool) -> list[Evidence]:
    items = []
    for k in range(rng.randint(0, 4)):
        t = Threshold(rng.choice([0.0, 0.25, 0.5, 0.9]), rng.choice([">=", "<="]), "t")
        names = rng.sample(["wrong_site", "reinitialised", "permuted_steps", "b"], rng.randint(0, 3))
        controls = {c: random_measurement(rng, t) for c in names} if with_controls else {}
        kind = rng.choice(["causal", "observational"])
        items.append(
            Evidence(f"item_{k}", "", kind, t, random_measurement(rng, t), controls, rng.random() < 0.85, rule=rule)
        )
    return items


def outcome(fn, *args):
    """A verdict and reason, or the exception a reason's formatting raised (e.g. a value of None)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 (the same exception is the same outcome)
        return type(e).__name__


CASES = 4000


def test_decide_under_the_checkpoint_policy_is_the_former_decide():
    rng = random.Random(0)
    verdicts = set()
    for _ in range(CASES):
        items = random_evidence(rng, CHECKPOINT_RULE, with_controls=True)
        got = outcome(decide, items)
        assert got == outcome(former_decide, items) == outcome(decide, items, CHECKPOINT_POLICY)
        verdicts.add(got[0] if isinstance(got, tuple) else got)
    assert verdicts >= {"pass", "fail", "inconclusive", "error"}


def test_decide_under_the_series_policy_is_the_former_decide_series():
    rng = random.Random(1)
    verdicts = set()
    for _ in range(CASES):
        items = random_evidence(rng, SERIES_RULE, with_controls=True)
        got = outcome(decide, items, SERIES_POLICY)
        assert got == outcome(former_decide_series, items)
        verdicts.add(got[0] if isinstance(got, tuple) else got)
    assert verdicts == {"pass", "fail", "inconclusive", "error"}


@pytest.mark.parametrize("with_controls", [False, True])  # a sweep's items have none; had they, none is judged
def test_decide_under_the_sweep_policy_is_the_former_decide_sweep(with_controls):
    rng = random.Random(2)
    verdicts = set()
    for _ in range(CASES):
        items = random_evidence(rng, SWEEP_RULE, with_controls=with_controls)
        got = outcome(decide, items, SWEEP_POLICY)
        assert got == outcome(former_decide_sweep, items)
        verdicts.add(got[0] if isinstance(got, tuple) else got)
    assert verdicts == {"pass", "fail", "inconclusive", "error"}


# ===== the reasons, word for word ============================================================================
def ev(name, low, high, *, kind="observational", value=None, n=100, controls=None, rule=CHECKPOINT_RULE, **extra):
    t = Threshold(0.5, ">=", "t")
    m = Measurement((low + high) / 2 if value is None and None not in (low, high) else value, low, high, n, extra)
    return Evidence(name, "", kind, t, m, controls or {}, rule=rule)


FORMER = {CHECKPOINT_POLICY: former_decide, SERIES_POLICY: former_decide_series, SWEEP_POLICY: former_decide_sweep}


def decided(items, policy=CHECKPOINT_POLICY):
    """``decide`` under ``policy``, checked against the former rule it replaced."""
    got = decide(items, policy)
    assert got == FORMER[policy](items)
    return got


def ctl(low, high, acted=None, n=100):
    return Measurement(None if low is None else (low + high) / 2, low, high, n, {}, acted)


def test_the_checkpoint_reasons():
    ok = {"reinitialised": ctl(0.0, 0.1)}
    assert decided([ev("a", 0.6, 0.7, controls=ok)]) == (
        "error",
        "no required causal evidence item: observational evidence alone never suffices",
    )
    assert decided([ev("a", 0.6, None, kind="causal")]) == ("error", "required evidence had no data: a")
    assert decided([ev("a", 0.1, 0.2, kind="causal"), ev("b", 0.4, 0.6)]) == ("fail", "required evidence failed: a")
    idle = {"wrong_site": ctl(0.0, 0.1, acted=0.0), "reinitialised": ctl(None, None, n=0)}
    assert decided([ev("a", 0.6, 0.7, kind="causal", controls=idle)]) == (
        "error",
        "a control did not act, so it cannot count for or against the claim: reinitialised on a had no data; "
        "wrong_site on a changed nothing it targets",
    )
    assert decided([ev("a", 0.6, 0.7, kind="causal", controls={"wrong_site": ctl(0.6, 0.8, acted=1.0)})]) == (
        "fail",
        "evidence also passed on a control (it cannot tell the claim apart): a on wrong_site",
    )
    open_controls = {"z": ctl(0.4, 0.6, acted=1.0), "b": ctl(0.3, 0.7, acted=1.0)}
    assert decided([ev("a", 0.4, 0.6, kind="causal", value=0.45, controls=open_controls), ev("c", 0.6, 0.7)]) == (
        "inconclusive",
        "an interval straddles its threshold: a 0.45 [0.4, 0.6] straddles >= 0.5 (about 100 samples might "
        "decide it); a on control b straddles its bar; a on control z straddles its bar",
    )
    assert decided([ev("a", 0.6, 0.7, kind="causal", controls=ok), ev("b", 0.9, 1.0)]) == (
        "pass",
        "all 2 required items passed and failed on their controls",
    )


def test_the_series_reasons():
    def s(name, low, high, controls=None, **extra):
        return ev(name, low, high, controls=controls, rule=SERIES_RULE, **extra)

    shuffled = {"permuted_steps": ctl(0.0, 0.1), "reversed_steps": ctl(0.0, 0.1)}
    assert decided([], SERIES_POLICY) == ("error", "no required evidence item")
    assert decided([s("a", 0.6, 0.7, shuffled), s("b", 0.6, 0.7)], SERIES_POLICY) == (
        "error",
        "required items without a time-axis control: b",
    )
    assert decided(
        [s("a", None, None, shuffled), s("b", 0.4, None, shuffled), s("c", 0.1, 0.2, shuffled)], SERIES_POLICY
    ) == (
        "fail",
        "required evidence failed: a, c; not resolved by the checkpoints: b",
    )
    assert decided([s("a", 0.6, 0.7, {"reversed_steps": ctl(0.6, 0.7)})], SERIES_POLICY) == (
        "fail",
        "evidence also passed on a control (it cannot tell the claim apart): a on reversed_steps",
    )
    open_controls = {"reversed_steps": ctl(0.4, 0.6), "permuted_steps": ctl(None, 0.6)}
    note = "spike 0.10-0.40 of the rise within 500 steps: checkpoints 5,000-6,000 are too far apart to tell"
    items = [s("a", 0.6, 0.7, open_controls), s("b", 0.1, 0.9, shuffled, unresolved=note), s("c", 0.2, 0.9, shuffled)]
    assert decided(items, SERIES_POLICY) == (
        "inconclusive",
        f"the checkpoints do not resolve: b ({note}); c (interval straddles the threshold); "
        "a on reversed_steps (a control the checkpoints cannot rule out); "
        "a on permuted_steps (a control the checkpoints cannot rule out). "
        "Measure a denser series there (assignadd-report --every 1, or more checkpoints)",
    )
    assert decided([s("a", 0.6, 0.7, shuffled)], SERIES_POLICY) == (
        "pass",
        "all 1 required items passed and failed on their controls",
    )


def test_the_sweep_reasons():
    def w(name, low, high, **extra):
        return ev(name, low, high, rule=SWEEP_RULE, **extra)

    assert decided([], SWEEP_POLICY) == ("error", "no required evidence item")
    assert decided([w("a", 0.5 - 1e-10, None, open_low=True), w("b", 0.0, 0.3), w("c", 0.2, 0.6)], SWEEP_POLICY) == (
        "fail",
        "required evidence failed: b; not resolved by the grid: c",
    )
    note = "bracket (0.45, 0.55] straddles the band's edge 0.5"
    assert decided([w("a", 0.45, 0.55, open_low=True, unresolved=note), w("b", 0.2, None)], SWEEP_POLICY) == (
        "inconclusive",
        f"the grid does not resolve: a ({note}); b (interval straddles the threshold). "
        "A grid denser there decides it (the pre-registered grid: docs/sweeps.md)",
    )
    assert decided([w("a", 0.5, 0.6), w("b", 0.7, None)], SWEEP_POLICY) == ("pass", "all 2 required items passed")
