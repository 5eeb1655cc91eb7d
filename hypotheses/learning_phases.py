"""Learning phases (SPEC §4.5): over a checkpoint series, (1) 0-var addition generalizes first; (2) then
variable assignment is learned, with a spike (paper: steps 5,300 -> 5,400); (3) thousands of steps later,
in a refinement of its own, restricted-slot sequences generalize (paper: steps 14,500-16,000).

A claim about a *series* of checkpoints, not one model: it lives in ``SERIES_REGISTRY`` (``run_all`` and
``assignadd-verify`` never see it) and runs through ``run_series(series)``, ``series`` the
``assignadd.series/1`` document ``assignadd-report`` writes (only ``checkpoints[*].step`` and
``checkpoints[*].values`` are read). On one checkpoint it answers ``skipped`` with a note.

The phase rule (version 4) works in training steps, never in checkpoint counts: onsets, window rises and
gaps are intervals of what the checkpoints allow, read under ``SERIES_RULE`` (or ``ENDS_EARLY_RULE``), and
the claim is decided by ``base.decide`` under ``SERIES_POLICY``. The rule in full, what it can and cannot
see, and every earlier version with why it was replaced: docs/dynamics.md, "The phase rule (version 4)".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..random_streams import numpy_rng
from .base import ClaimResult, Evidence, Hypothesis, IntervalRule, Measurement, Policy, Threshold, decide

RULE_VERSION = 4
PERMUTATION_SEED = 0
SMOOTH = 3  # median window, in checkpoints: one noisy evaluation neither makes nor breaks an onset

# Pre-registered (rule version 4; each value's reasons: docs/dynamics.md, "The phase rule (version 4)").
# Each Threshold's reason is the one the report shows.
LEARNED = 0.9  # 90%: far above chance (1/59), and a 1000-sequence pool's 95% CI at 0.9 is about ±2 points
COHERENCE = Threshold(
    0.5,
    ">=",
    "a rise explains at least half the curve's variance; on the reference run's log (docs/nulls.md) a permuted "
    "series finds no onset, or R^2 0.00-0.47 (0.47 with the log cut at 3,000 steps: a short series' permuted "
    "control can come near the bar), a reversed one no onset",
)
JUMP = Threshold(
    0.2,
    ">=",
    "a spike that is a stage of the rise: on the paper's run the spike (5,300 -> 5,400) holds 0.30-0.37 of "
    "the assignment rise in its best 500-step window, after a slow climb (1-var accuracy ~0.76 by 5,300); "
    "a fifth keeps a third of that as margin for seeds with a smaller spike, and is far above a noise step "
    "of the fit (a few hundredths)",
)
JUMP_WIDTH = 500  # steps: the paper's spike spans one 100-step checkpoint interval; 'a few hundred' at most
# The spike rises >= JUMP_CONTRAST times as fast as the JUMP_FLANK steps on either side: a line has contrast 1,
# a logistic over 2,000 steps 1.75, the paper's shape 8-30.
JUMP_CONTRAST = 3.0
JUMP_FLANK = 1000  # twice the window; inside the paper's slow climb (addition ~1,000-1,500, spike 5,300)
RESTRICTED = Threshold(
    2000,
    ">=",
    "'thousands of steps later' (paper: spike ends 5,400, refinement starts 14,500, "
    "9,100 steps on); 2,000 = the fewest 'thousands', and no less than the two "
    "transitions' widths (500 + 1,500) end to end",
)
REFINEMENT = Threshold(
    0.5,
    ">=",
    "a refinement is a transition: most of what the restricted curve still has to "
    "gain once assignment is learned comes in one window, not as a slow drift",
)
REFINEMENT_WIDTH = 3000  # steps: twice the paper's refinement (14,500-16,000: 1,500 steps), for seed variation


@dataclass(frozen=True)
class Phase:
    id: str
    title: str
    curve: tuple[str, ...]  # measure names; the phase curve is their minimum
    supporting: tuple[str, ...]  # measures whose onsets are reported beside it (not decided on)


PHASES = (
    Phase(
        "addition", "0-var addition generalizes", ("acc_0var_heldout_pair",), ("acc_0var_train", "ov2_mlp2_accuracy")
    ),
    Phase(
        "assignment",
        "variable assignment appears",
        ("acc_1var_train", "acc_2var_train"),
        (
            "prev_token_argmax",
            "positional_prev_token",
            "identity_qk_diagonal",
            "layer1_eq_to_operand_slots",
            "layer2_eq_to_operand_values",
            "variable_probe",
        ),
    ),
    Phase(
        "restricted_slots",
        "restricted-slot sequences generalize",
        ("acc_1var_restricted_slot", "acc_2var_restricted_1", "acc_2var_restricted_2"),
        ("layer2_eq_to_operand_values_restricted",),
    ),
)


# ----- the decision on intervals -----------------------------------------------------------------
# A missing end of an interval is unbounded; an item that could not be measured (no onset: a phase with no
# place in time, an incoherent phase) fails rather than having "no data".
SERIES_RULE = IntervalRule(missing="unbounded", empty="fail", fails="unreached")

# A series that stops before the paper's run (SPEC §3: 40,000 steps; seeds learn the restricted slots as late
# as 36,000) may stop before a phase comes (``ends_before``): an item that waits on that phase
# (``open_at_end``) is open both ways and reads ``inconclusive``, never ``fail``, and the claim says where the
# series ends.
PAPER_RUN_STEPS = 40_000
ENDS_EARLY_RULE = IntervalRule(missing="unbounded", empty="inconclusive", fails="unreached")

# No causal item: every required item needs a time-axis control (steps permuted, reversed), on which it must
# fail.
SERIES_POLICY = Policy(
    requires="controls",
    uncontrolled="required items without a time-axis control",
    straddles="the checkpoints do not resolve: ",
    open_control="{item} on {control} (a control the checkpoints cannot rule out)",
    denser=". Measure a denser series there (assignadd-report --every 1, or more checkpoints)",
    also="; not resolved by the checkpoints: ",
)


# ----- curves -----------------------------------------------------------------------------------
def smoothed(values) -> np.ndarray:
    """Median of each checkpoint and its two neighbours (edges repeat the end value)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 3:
        return v.copy()
    padded = np.concatenate([v[:1], v, v[-1:]])
    return np.median(np.stack([padded[:-2], padded[1:-1], padded[2:]]), axis=0)


def onset_index(values, threshold: float = LEARNED) -> int | None:
    """First index from which the smoothed curve stays >= threshold to the end (None if it never does)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0 or np.isnan(v).any():
        return None
    below = np.nonzero(smoothed(v) < threshold)[0]
    start = 0 if len(below) == 0 else int(below[-1]) + 1
    if start >= len(v):
        return None
    raw_up = np.nonzero(v[start:] >= threshold)[0]
    return start + int(raw_up[0]) if len(raw_up) else start


def _r2(v: np.ndarray, residual: float) -> float | None:
    """1 - ``residual`` / the curve's sum of squares about its mean; None for a constant curve."""
    total = float(((v - v.mean()) ** 2).sum())
    return None if total <= 1e-12 else 1.0 - residual / total


def step_fit_r2(values, split: int | None) -> float | None:
    """R^2 of the two-level step (mean before ``split``, mean from it on); None when undefined (no
    checkpoint before the onset: the series starts after the phase; or a constant curve). Reported only
    (rule version 1's coherence measure)."""
    v = np.asarray(values, dtype=float)
    if split is None or split <= 0 or split >= len(v):
        return None
    before, after = v[:split], v[split:]
    return _r2(v, float(((before - before.mean()) ** 2).sum() + ((after - after.mean()) ** 2).sum()))


def monotone_fit(values) -> np.ndarray:
    """The best non-decreasing fit (isotonic regression on the checkpoint index)."""
    from sklearn.isotonic import IsotonicRegression

    v = np.asarray(values, dtype=float)
    return IsotonicRegression(increasing=True).fit_transform(np.arange(len(v), dtype=float), v)


def monotone_fit_r2(values, onset: int | None) -> float | None:
    """R^2 of the best non-decreasing fit of the curve; None when the phase has no onset, no checkpoint
    before its onset (the series starts after it), or a constant curve."""
    v = np.asarray(values, dtype=float)
    if onset is None or onset <= 0 or onset >= len(v) or np.isnan(v).any():
        return None
    return _r2(v, float(((v - monotone_fit(v)) ** 2).sum()))


def ends_before(steps, curve) -> bool:
    """Whether the series ends before the phase of ``curve`` is learned: it stops short of the paper's run
    (``PAPER_RUN_STEPS``) and the phase's smoothed curve is below LEARNED at every checkpoint."""
    v = np.asarray(curve, dtype=float)
    if len(v) == 0 or steps[-1] >= PAPER_RUN_STEPS or np.isnan(v).any():
        return False
    return bool((smoothed(v) < LEARNED).all())


def open_at_end(phases: list[dict], *ids: str) -> bool:
    """Whether an item over the phases ``ids`` (in order; one id for a phase's own item) waits on a phase the
    series ends before (``series_ends_before`` in its record, ``detect_phases``): the last of them is not
    learned by the series' end, and each one before it is a learning curve or not learned by the end either.
    Such an item reads under ``ENDS_EARLY_RULE``."""
    by_id = {p["id"]: p for p in phases}
    early = {i for i in ids if "series_ends_before" in by_id[i]}
    *before, last = ids
    return last in early and all(by_id[i]["coherent"] or i in early for i in before)


def _rule(phases: list[dict], *ids: str) -> IntervalRule:
    return ENDS_EARLY_RULE if open_at_end(phases, *ids) else SERIES_RULE


def phase_curve(records: list[dict], phase: Phase) -> np.ndarray:
    """The phase's curve over the records (ordered by step): the minimum over its measures."""
    out = []
    for r in records:
        vals = [r["values"].get(m) for m in phase.curve]
        out.append(math.nan if any(x is None for x in vals) else min(vals))
    return np.asarray(out, dtype=float)


def separating_checkpoints(later: np.ndarray, onset_a: int | None, onset_b: int | None) -> int | None:
    """Checkpoints from the earlier onset up to the later one at which the later phase is not yet
    learned; 0 when the order is wrong, None when either phase has no onset. Reported only (rule
    versions 1-2 decided on it; a count of checkpoints depends on how densely the series was saved)."""
    if onset_a is None or onset_b is None:
        return None
    if onset_b <= onset_a:
        return 0
    return int((later[onset_a:onset_b] < LEARNED).sum())


# ----- steps, with the resolution the checkpoints allow --------------------------------------------
def window_rise(steps, fit, width: int, first: int) -> dict:
    """The largest rise of ``fit`` (monotone) within any window of ``width`` steps that starts at or after
    checkpoint ``first``, as the interval the checkpoints allow (docs/dynamics.md, "Resolution").

    ``low`` (certain): over checkpoints i < j (i >= first), (fit[j] - fit[i]) / ceil((s_j - s_i) / width), the
    least one of the windows covering the span must rise (exactly the rise when s_j - s_i <= width).
    ``high`` (possible): a window starting in [s_i, s_i+1) (i >= first - 1: the start may lie just after
    the checkpoint before ``first``) rises at most fit[k] - fit[i], k the first checkpoint at or after
    s_i+1 + width."""
    s = np.asarray(steps, dtype=float)
    n = len(s)
    low, low_at, high, high_at = 0.0, None, 0.0, None
    for i in range(max(first, 0), n - 1):
        spans = s[i + 1 :] - s[i]
        rises = (fit[i + 1 :] - fit[i]) / np.maximum(np.ceil(spans / width), 1.0)
        j = int(np.argmax(rises))
        if rises[j] > low + 1e-12:
            low, low_at = float(rises[j]), (int(s[i]), int(s[i + 1 + j]))
    for i in range(max(first - 1, 0), n - 1):
        k = min(int(np.searchsorted(s, s[i + 1] + width, side="left")), n - 1)
        if fit[k] - fit[i] > high + 1e-12:
            high, high_at = float(fit[k] - fit[i]), (int(s[i]), int(s[k]))
    return {"low": low, "high": max(high, low), "low_window": low_at, "high_span": high_at or low_at}


def spike_window(steps, fit, *, width: int, flank: int, contrast: float, first: int) -> dict:
    """The largest rise of ``fit`` within a window [a, a + ``width``] (a at or after checkpoint ``first``)
    that is a *spike*: with flanks F(a) = [a - flank, a] and [a + width, a + width + flank] (each cut to the
    series), of total length L(a),

        contrast(a) = (rise in the window / width) / (rise in F(a) / L(a)) >= ``contrast``.

    As the interval the checkpoints allow (docs/dynamics.md, "Resolution"). ``low`` (certain): r = fit[j] -
    fit[i] for checkpoints i < j (i >= first, s_j - s_i <= width), where a window holding them, whose flanks
    rise at most fit[h] - fit[l] - r (l the last checkpoint at or before the flanks' start, h the first at or
    after their end), has that contrast. ``high`` (possible): for a window with a >= s_first-1 (the start may
    lie just after the checkpoint before ``first``), fit[first at or after a + width] - fit[last at or before
    a], where flanks rising only by the checkpoint intervals that lie inside them (zero where none do) give
    that contrast."""
    s = np.asarray(steps, dtype=float)
    n = len(s)
    out = {"low": 0.0, "high": 0.0, "low_window": None, "high_span": None, "low_contrast": None, "high_contrast": None}
    if n < 2:
        return out
    s0, s_end = s[0], s[-1]

    def flank_length(a: float) -> float:
        return max(0.0, a - max(a - flank, s0)) + max(0.0, min(a + width + flank, s_end) - (a + width))

    def at_or_before(x: float) -> int:
        return int(np.searchsorted(s, x, side="right")) - 1

    def at_or_after(x: float) -> int:
        return min(int(np.searchsorted(s, x, side="left")), n - 1)

    def ratio(window_rise: float, flank_rise: float, length: float) -> float:
        if length <= 0 or flank_rise <= 1e-12:
            return math.inf
        return (window_rise / width) / (flank_rise / length)

    def flanks_at_most(a: float, r: float) -> float:
        """The most the flanks of a window at ``a`` that rises by ``r`` can rise."""
        lo_k, hi_k = at_or_before(max(a - flank, s0)), at_or_after(min(a + width + flank, s_end))
        return max(float(fit[hi_k] - fit[lo_k]) - r, 0.0)

    # low: a checkpoint pair inside one window, the window placed where its flanks can rise the least.
    start = max(first, 0)
    for i in range(start, n - 1):
        for j in range(i + 1, n):
            if s[j] - s[i] > width:
                break
            r = float(fit[j] - fit[i])
            if r <= out["low"] + 1e-12:
                continue
            a_lo, a_hi = max(s[j] - width, s[start]), s[i]
            # the bound changes only where a flank's start passes a checkpoint; within a piece, the latest
            # checkpoint after the flanks only moves later, so each piece's first point is its best
            inner = s + flank
            cands = np.concatenate([[a_lo, a_hi], inner[(inner > a_lo) & (inner < a_hi)]])
            contrasts = [ratio(r, flanks_at_most(a, r), flank_length(a)) for a in cands if flank_length(a) > 0]
            if contrasts and max(contrasts) >= contrast:
                out.update(low=r, low_window=(int(s[i]), int(s[j])), low_contrast=max(contrasts))

    # high: every window start where one of the bounds can change (a checkpoint meets an edge of the
    # window or of a flank), and just after it.
    a_min = s[max(first - 1, 0)]
    a_max = max(s_end - width, a_min)
    edges = np.concatenate([s, s - width, s + flank, s - width - flank, [a_min, a_max]])
    cands = np.unique(np.concatenate([edges, edges + 0.5]))
    for a in cands[(cands >= a_min) & (cands <= a_max)]:
        k0, k1 = at_or_before(a), at_or_after(a + width)
        r = float(fit[k1] - fit[k0])
        if r <= 1e-12:
            continue
        before = float(fit[at_or_before(a)] - fit[at_or_after(max(a - flank, s0))])
        after = float(fit[at_or_before(min(a + width + flank, s_end))] - fit[at_or_after(a + width)])
        c = ratio(r, max(before, 0.0) + max(after, 0.0), flank_length(a))
        if c >= contrast and r > out["high"] + 1e-12:
            out.update(high=r, high_span=(int(s[k0]), int(s[k1])), high_contrast=c)
    if out["low"] > out["high"]:
        out.update(high=out["low"], high_span=out["low_window"], high_contrast=out["low_contrast"])
    return out


def _finite(x: float | None) -> float | None:
    """A contrast for JSON: rounded; None where no window qualifies, or where its flanks do not rise at all
    (an unbounded contrast: JSON has no infinity)."""
    return None if x is None or math.isinf(x) else round(float(x), 6)


def _share(w: dict | None, total: float | None) -> dict:
    """A window's certain and possible rise (``window_rise``, ``spike_window``) as shares of ``total``, at most
    1 (a monotone fit's window never rises more than its whole rise), rounded for JSON; None where no window
    was measured (``w`` None)."""
    if w is None:
        return {"fraction": None, "fraction_interval": [None, None], "window": None, "possible_span": None}
    lo, hi = round(min(w["low"] / total, 1.0), 6), round(min(w["high"] / total, 1.0), 6)
    return {"fraction": lo, "fraction_interval": [lo, hi], "window": w["low_window"], "possible_span": w["high_span"]}


def _phase_records(records: list[dict], steps: list[int]) -> tuple[list[dict], dict, dict, dict]:
    """Per phase: its record (onset, coherence, largest rise, supporting onsets), and its curve, monotone
    fit and onset index by phase id."""
    phases, curves, fits, onsets = [], {}, {}, {}
    for p in PHASES:
        c = phase_curve(records, p)
        i = onset_index(c)
        curves[p.id], onsets[p.id] = c, i
        fits[p.id] = monotone_fit(c) if len(c) and not np.isnan(c).any() else None
        r2 = monotone_fit_r2(c, i)
        step_r2 = step_fit_r2(c, i)
        rise = np.diff(c)
        j = int(np.nanargmax(rise)) if len(rise) and not np.isnan(rise).all() else None
        supporting = {}
        for m in p.supporting:
            if all(m in r["values"] and r["values"][m] is not None for r in records):
                k = onset_index([r["values"][m] for r in records])
                supporting[m] = None if k is None else steps[k]
        # the true onset lies between the last checkpoint before it and the onset checkpoint
        before, at = (None, None) if i is None else ((steps[i - 1] if i > 0 else None), steps[i])
        phases.append(
            {
                "id": p.id,
                "title": p.title,
                "curve": "min(" + ", ".join(p.curve) + ")",
                "onset_step": at,
                "onset_interval": [before, at],
                "coherence_r2": None if r2 is None else round(r2, 6),
                "step_r2": None if step_r2 is None else round(step_r2, 6),
                "coherent": r2 is not None and r2 >= COHERENCE.value,
                "largest_rise": None
                if j is None
                else {"from_step": steps[j], "to_step": steps[j + 1], "rise": round(float(rise[j]), 6)},
                "supporting_onsets": supporting,
            }
        )
        if ends_before(steps, c):  # only then: the record of a series that shows the phase is unchanged
            phases[-1]["series_ends_before"] = {"last_step": steps[-1], "highest": round(float(c.max()), 6)}
    return phases, curves, fits, onsets


def _assignment_jump(steps: list[int], fits: dict, onsets: dict, coherent: dict) -> dict:
    """Assignment spikes after addition: of the windows of JUMP_WIDTH steps that start once addition is
    learned and rise at least JUMP_CONTRAST times as fast as their flanks, the largest rise, as a fraction
    of the assignment curve's whole rise."""
    w, total = None, None
    if coherent["addition"] and coherent["assignment"]:
        fit = fits["assignment"]
        total = float(fit[-1] - fit[0])
        if total > 1e-9:
            w = spike_window(
                steps, fit, width=JUMP_WIDTH, flank=JUMP_FLANK, contrast=JUMP_CONTRAST, first=onsets["addition"]
            )
    return {
        "width_steps": JUMP_WIDTH,
        "flank_steps": JUMP_FLANK,
        "min_contrast": JUMP_CONTRAST,
        **_share(w, total),
        "window_contrast": None if w is None else _finite(w["low_contrast"]),
        "possible_contrast": None if w is None else _finite(w["high_contrast"]),
        "total_rise": None if total is None else round(total, 6),
    }


def _refinement(steps: list[int], fits: dict, onsets: dict, coherent: dict) -> dict:
    """Restricted slots' refinement: of what the restricted curve still has to gain at the assignment
    onset, the largest share gained within REFINEMENT_WIDTH steps from then on."""
    w, remaining = None, None
    if coherent["assignment"] and coherent["restricted_slots"]:
        fit, ib = fits["restricted_slots"], onsets["assignment"]
        remaining = float(fit[-1] - fit[ib])
        if remaining > 1e-9:
            w = window_rise(steps, fit, REFINEMENT_WIDTH, ib)
    return {
        "width_steps": REFINEMENT_WIDTH,
        **_share(w, remaining),
        "remaining_rise": None if remaining is None else round(remaining, 6),
    }


def _separations(curves: dict, onsets: dict, coherent: dict, by_id: dict) -> list[dict]:
    """Per pair of successive phases: the steps between their onsets (an interval: onsets are known to
    the spacing of the checkpoints) and the checkpoints that separate them."""
    gaps = []
    for a, b in zip(PHASES, PHASES[1:]):
        # only learning curves are ordered: an onset whose curve does not rise (noise, a shuffled series) has
        # no place in time to compare, so the gap is not measured (None)
        both = coherent[a.id] and coherent[b.id]
        (a_before, a_at), (b_before, b_at) = by_id[a.id]["onset_interval"], by_id[b.id]["onset_interval"]
        gap = [b_before - a_at, b_at - a_before] if both else [None, None]
        n_sep = separating_checkpoints(curves[b.id], onsets[a.id], onsets[b.id]) if both else None
        gaps.append(
            {
                "earlier": a.id,
                "later": b.id,
                "gap_steps": (b_at - a_at) if both else None,
                "gap_interval": gap,
                "separating_checkpoints": n_sep,
            }
        )
    return gaps


def detect_phases(records: list[dict]) -> dict:
    """Phase onsets, coherence, the assignment jump, the refinement and the gaps over ``records`` (each
    ``{"step", "values"}``), taken in the order given (callers sort by step). JSON-able."""
    steps = [int(r["step"]) for r in records]
    phases, curves, fits, onsets = _phase_records(records, steps)
    coherent = {p["id"]: p["coherent"] for p in phases}
    by_id = {p["id"]: p for p in phases}
    jump = _assignment_jump(steps, fits, onsets, coherent)
    refinement = _refinement(steps, fits, onsets, coherent)
    gaps = _separations(curves, onsets, coherent, by_id)
    # addition -> assignment is decided by the jump (it must come after addition is learned), not by a gap
    jump["state"] = _rule(phases, "addition", "assignment").state(">=", JUMP.value, *jump["fraction_interval"])
    later = _rule(phases, "assignment", "restricted_slots")
    refinement["state"] = later.state(">=", REFINEMENT.value, *refinement["fraction_interval"])
    gaps[1]["min_gap_steps"] = RESTRICTED.value
    for g, state in zip(gaps, (jump["state"], later.state(">=", RESTRICTED.value, *gaps[1]["gap_interval"]))):
        g.update(state=state, clear=state == "pass")
    in_order = all(g["gap_steps"] is not None and g["gap_steps"] > 0 for g in gaps)
    return {
        "rule": {
            "version": RULE_VERSION,
            "learned": LEARNED,
            "coherence_r2": COHERENCE.value,
            "coherence": "R^2 of the best non-decreasing (isotonic) fit of the phase curve",
            "jump_width_steps": JUMP_WIDTH,
            "jump_fraction": JUMP.value,
            "jump_flank_steps": JUMP_FLANK,
            "jump_contrast": JUMP_CONTRAST,
            "restricted_gap_steps": RESTRICTED.value,
            "refinement_width_steps": REFINEMENT_WIDTH,
            "refinement_fraction": REFINEMENT.value,
            "smoothing": f"median of {SMOOTH} checkpoints",
        },
        "phases": phases,
        "assignment_jump": jump,
        "restricted_refinement": refinement,
        "separations": gaps,
        "in_order": in_order,
        "all_clear": (
            in_order
            and all(p["coherent"] for p in phases)
            and all(g["clear"] for g in gaps)
            and refinement["state"] == "pass"
        ),
    }


# ----- the time-axis controls ---------------------------------------------------------------------
def permuted(records: list[dict], seed: int = PERMUTATION_SEED) -> list[dict]:
    """Control: the same checkpoints with their steps permuted (values move, step labels stay)."""
    order = numpy_rng(seed, "permuted series control").permutation(len(records))
    return [{"step": r["step"], "values": records[int(k)]["values"]} for r, k in zip(records, order)]


def reversed_series(records: list[dict]) -> list[dict]:
    """Control: the checkpoints in reverse order (a model that unlearns)."""
    return [{"step": r["step"], "values": s["values"]} for r, s in zip(records, records[::-1])]


def _steps_text(a, b) -> str:
    return "n/a" if a is None or b is None else f"{a:,}-{b:,}"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def ends_early_text(phases: list[dict], ids=None, heights: bool = True) -> str:
    """Where the series ends, and the phases (of ``ids``; None: all) it ends before, with how high their
    curves came (``heights``): "the series ends at step 2,000, before variable assignment appears (its
    curve reaches at most 0.62, below the 0.9 that counts as learned)"; "" when it ends before none."""
    early = [p for p in phases if "series_ends_before" in p and (ids is None or p["id"] in ids)]
    if not early:
        return ""
    text = f"the series ends at step {early[0]['series_ends_before']['last_step']:,}, before "
    text += _and([p["title"] for p in early])
    if heights:
        highest = _and([f"{p['series_ends_before']['highest']:.3f}".rstrip("0").rstrip(".") for p in early])
        curves = "its curve reaches" if len(early) == 1 else "their curves reach"
        text += f" ({curves} at most {highest}, below the {LEARNED} that counts as learned)"
    return text


def ends_early_reason(phases: list[dict]) -> str:
    """The claim's reason when the series ends before phases it would need to see."""
    they = "they come" if sum("series_ends_before" in p for p in phases) > 1 else "it comes"
    return (
        f"{ends_early_text(phases)}: a series shorter than the paper's {PAPER_RUN_STEPS:,}-step run cannot show "
        f"whether {they} later; train longer (assignadd-train on the same folder with a larger --steps "
        "continues the run) and report again"
    )


class LearningPhases(Hypothesis):
    id = "learning_phases"
    spec = "§4.5"
    statement = (
        "Over training, 0-var addition generalizes first; then variable assignment is learned, with a "
        "spike (a stage of its rise far steeper than the curve around it); thousands of steps later, in a "
        "refinement of their own, restricted-slot sequences generalize."
    )
    controls = {
        "permuted_steps": f"the same checkpoints with their steps permuted (seed {PERMUTATION_SEED})",
        "reversed_steps": "the same checkpoints in reverse order",
    }
    skip_note = (
        "needs a checkpoint series: run `assignadd-report RUN_FOLDER` (a claim about the order of "
        "training phases cannot be tested on one checkpoint)"
    )
    needs = ("a checkpoint series (a training run's folder)", "assignadd-report RUN_DIR")

    def series_evidence(self, records: list[dict]) -> list[Evidence]:
        arms = {"series": records, "permuted_steps": permuted(records), "reversed_steps": reversed_series(records)}
        found = {k: detect_phases(v) for k, v in arms.items()}
        n = len(records)

        def evidence(name, definition, threshold, measure, ids: tuple[str, ...]) -> Evidence:
            """An item over the phases ``ids`` (what it waits on), measured on the series and its controls."""
            on_series, on_controls = measure(found["series"], ids), {c: measure(found[c], ids) for c in self.controls}
            rule = _rule(found["series"]["phases"], *ids)
            return Evidence(name, definition, "observational", threshold, on_series, on_controls, rule=rule)

        def early_note(d, extra, ids) -> bool:  # an item waiting on a phase the series ends before says so
            if open_at_end(d["phases"], *ids):
                extra["unresolved"] = ends_early_text(d["phases"], ids)
                return True
            return False

        def coherence(d, ids) -> Measurement:
            p = next(p for p in d["phases"] if p["id"] == ids[0])
            extra = {"onset_step": p["onset_step"], "onset_interval": p["onset_interval"]}
            early_note(d, extra, ids)
            return Measurement.exact(p["coherence_r2"], n, **extra)

        def fraction(key, what):
            def m(d, ids) -> Measurement:
                x = d[key]
                lo, hi = x["fraction_interval"]
                extra = {"window": x["window"], "possible_span": x["possible_span"]}
                if key == "assignment_jump":
                    extra.update(window_contrast=x["window_contrast"], possible_contrast=x["possible_contrast"])
                if not early_note(d, extra, ids) and x["state"] == "inconclusive":
                    a, b = x["possible_span"] or (None, None)
                    extra["unresolved"] = (
                        f"{what} {lo:.2f}-{hi:.2f} of the rise within {x['width_steps']:,} steps: "
                        f"checkpoints {_steps_text(a, b)} are too far apart to tell"
                    )
                return Measurement(x["fraction"], lo, hi, n, extra)

            return m

        def gap(d, ids) -> Measurement:
            g = d["separations"][1]
            lo, hi = g["gap_interval"]
            extra = {
                "assignment_onset_interval": d["phases"][1]["onset_interval"],
                "restricted_onset_interval": d["phases"][2]["onset_interval"],
                "separating_checkpoints": g["separating_checkpoints"],
            }
            if not early_note(d, extra, ids) and g["state"] == "inconclusive":
                extra["unresolved"] = (
                    f"{lo:,}-{hi:,} steps between the onsets (assignment in "
                    f"{_steps_text(*d['phases'][1]['onset_interval'])}, restricted slots in "
                    f"{_steps_text(*d['phases'][2]['onset_interval'])})"
                )
            v = None if g["gap_steps"] is None else float(g["gap_steps"])
            return Measurement(v, None if lo is None else float(lo), None if hi is None else float(hi), n, extra)

        names = {p["id"]: p["curve"] for p in found["series"]["phases"]}
        return [
            *(
                evidence(
                    f"{p.id}_phase_is_a_learning_curve",
                    f"R^2 of the best non-decreasing fit of {names[p.id]} over the series, given an onset "
                    f"(first checkpoint from which the median-of-3 curve stays >= {LEARNED}) with a checkpoint "
                    "before it",
                    COHERENCE,
                    coherence,
                    (p.id,),
                )
                for p in PHASES
            ),
            evidence(
                "assignment_jumps_after_addition",
                f"max over windows of {JUMP_WIDTH} steps starting at or after the addition onset that rise "
                f"at least {JUMP_CONTRAST:g} times as fast as the {JUMP_FLANK:,} steps on either side (a spike) "
                f"of [rise of fit({names['assignment']}) in the window] / [its rise over the series]; "
                "interval: what the checkpoints' spacing allows",
                JUMP,
                fraction("assignment_jump", "spike"),
                ("addition", "assignment"),
            ),
            evidence(
                "assignment_before_restricted_slots",
                f"onset({names['restricted_slots']}) - onset({names['assignment']}) in steps; interval: the "
                "onsets anywhere between their checkpoint and the one before",
                RESTRICTED,
                gap,
                ("assignment", "restricted_slots"),
            ),
            evidence(
                "restricted_slots_refine_on_their_own",
                f"max over windows of {REFINEMENT_WIDTH} steps from the assignment onset on of [rise of "
                f"fit({names['restricted_slots']}) in the window] / [its rise from the assignment onset to "
                "the end]",
                REFINEMENT,
                fraction("restricted_refinement", "refinement"),
                ("assignment", "restricted_slots"),
            ),
        ]

    def run_series(self, series) -> ClaimResult:
        """Decide the claim on an ``assignadd.series/1`` document (or a list of ``{"step", "values"}``)."""

        def compute():
            recs = series["checkpoints"] if isinstance(series, dict) else series
            records = sorted(({"step": int(r["step"]), "values": r["values"]} for r in recs), key=lambda r: r["step"])
            items = self.series_evidence(records)
            verdict, reason = decide(items, SERIES_POLICY)
            early = [e for e in items if e.rule is ENDS_EARLY_RULE]
            if verdict == "inconclusive" and early:  # the series ends before a phase: say so, and what to do
                rest = [e for e in items if e.rule is not ENDS_EARLY_RULE]
                more = decide(rest, SERIES_POLICY) if rest else ("pass", "")
                reason = ends_early_reason(detect_phases(records)["phases"])
                if more[0] != "pass":
                    reason += f"; also {more[1]}"
            return items, verdict, reason

        return self.decided(compute)


SERIES_REGISTRY: dict[str, type[Hypothesis]] = {LearningPhases.id: LearningPhases}
