"""``series.html``: one self-contained page for a checkpoint series: accuracy by number of variables, the
progress measures, and the claims' verdicts over training, with the detected phase onsets marked.

Built on ``reports/html.py`` like the verify and sweep pages. The evidence table here (``evidence_table``)
is also the sweep page's: both show claims decided over many checkpoints or runs, whose intervals are what
the checkpoints or the grid allow rather than a 95% CI.
"""

from __future__ import annotations

import fnmatch

from . import html as H
from .png import PAGE_DPI, png_bytes, pyplot
from .render import bullets, claim_link, fmt, fmt_interval, fmt_measurement, fmt_span, meta, meta_p, num, page_head
from .render import claim_section as render_claim_section
from .render import evidence_table as render_evidence_table

ACCURACY_PANELS = (
    ("0 variables", ("acc_0var_train", "acc_0var_heldout_pair")),
    ("1 variable", ("acc_1var_train", "acc_1var_heldout_pair", "acc_1var_restricted_slot", "acc_b_operand_1var")),
    (
        "2 variables",
        (
            "acc_2var_train",
            "acc_2var_heldout_pair",
            "acc_2var_restricted_1",
            "acc_2var_restricted_2",
            "acc_b_operand_2var",
        ),
    ),
    ("1 variable in a slot it never had, by variable", ("acc_restricted_*",)),  # names depend on the task
)
PROGRESS_PANELS = (
    ("Addition from weights (SPEC §4.3)", ("ov2_mlp2_accuracy",)),
    (
        "Layer 1 [blocks.0]: previous-token head (SPEC §4.1)",
        (
            "positional_prev_token",
            "prev_token_argmax",
            "prev_token_weight",
            "layer1_eq_to_operand_slots",
            "variable_probe",
        ),
    ),
    (
        "Layer 2 [blocks.1]: identity QK (SPEC §4.2)",
        ("identity_qk_diagonal", "layer2_eq_to_operand_values", "layer2_eq_to_operand_values_restricted"),
    ),
    (
        "Whole algorithm, scrubbed (SPEC §6)",
        ("scrub_model_accuracy", "scrub_routing_accuracy", "scrub_addition_accuracy"),
    ),
)
PHASE_STYLES = {"addition": ":", "assignment": "--", "restricted_slots": "-."}  # black lines, told apart by style
ONSETS_NOTE = "black lines: detected phase onsets (dotted addition, dashed assignment, dash-dot restricted slots)"


def _panels(doc, panels, title) -> bytes:
    plt = pyplot()
    steps = [c["step"] for c in doc["checkpoints"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), sharey=False, squeeze=False)
    for ax, (name, patterns) in zip(axes[0], panels):
        measures = [m for p in patterns for m in (sorted(fnmatch.filter(doc["measures"], p)) if "*" in p else [p])]
        for m in measures:
            ys = [c["values"].get(m) for c in doc["checkpoints"]]
            ys = [float("nan") if y is None else y for y in ys]
            ax.plot(steps, ys, marker="." if len(steps) < 60 else None, lw=1.2, label=m.removeprefix("acc_"))
        for p in doc["phases"]["phases"]:
            if p["onset_step"] is not None:
                style = PHASE_STYLES.get(p["id"], "-")
                ax.axvline(p["onset_step"], color="black", ls=style, lw=1, label=f"onset: {p['id']}")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    return png_bytes(fig, dpi=PAGE_DPI, tight=True)


def _claims_figure(doc) -> bytes | None:
    evaluated = [c for c in doc["checkpoints"] if "claims" in c]
    ids = sorted({cid for c in evaluated for cid in c["claims"]})
    if not ids:
        return None
    plt = pyplot()
    code = {"pass": 1.0, "fail": 0.0}
    grid = [[code.get(c["claims"].get(cid, {}).get("verdict"), 0.5) for c in evaluated] for cid in ids]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(evaluated)), 0.45 * len(ids) + 1.2))
    ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_yticks(range(len(ids)), ids, fontsize=8)
    ax.set_xticks(range(len(evaluated)), [str(c["step"]) for c in evaluated], rotation=90, fontsize=7)
    ax.set_xlabel("training step (green: pass, red: fail, yellow: inconclusive or error)")
    return png_bytes(fig, dpi=PAGE_DPI, tight=True)


# ----- numbers as text ---------------------------------------------------------------------------
def _fraction_range(x) -> str:
    """A fraction's interval ``[low, high]`` rounded outwards as the verify report does; one number when exact."""
    if not x or x[0] is None or x[1] is None:
        return "n/a"
    if x[0] == x[1]:
        return fmt(x[0])
    _, lo, hi = fmt_interval(None, x[0], x[1])
    return f"{lo}–{hi}"


def _onset(p: dict) -> str:
    before, at = p.get("onset_interval") or [None, p["onset_step"]]
    if at is None and "series_ends_before" in p:
        return f"after {p['series_ends_before']['last_step']} (the series ends first)"
    return "none" if at is None else (f"{at}" if before is None else f"({before}, {at}]")


# ----- the evidence table, shared with the sweep page ---------------------------------------------
def fmt_item_value(m: dict) -> str:
    """An item's value with its interval: ``fmt_measurement`` (rounded outwards, an exact value alone), or
    for a bracket open below (a sweep's threshold lies in (b, θ], ``extra["open_low"]``) ``θ (b, θ]``, with
    ∞ where no grid value generalizes."""
    if not (m.get("extra") or {}).get("open_low"):
        return fmt_measurement(m)
    lo, hi = (m.get("ci") or [None, None])[:2]
    v, lo_s, hi_s = fmt_interval(m.get("value"), lo, hi)
    bracket = f"({'0' if lo is None else lo_s}, {'∞)' if hi is None else hi_s + ']'}"
    return bracket if m.get("value") is None else f"{v} {bracket}"


def evidence_table(evidence: list[dict], recompute) -> H.Markup:
    """``render.evidence_table`` for a claim decided over many checkpoints or runs: an item they cannot
    resolve says why under its result. A result is the status written with item ``e``'s measurement ``m``
    (``e["measurement"]`` or one of its controls), else ``recompute(e, m)``."""
    words = {"pass": "passes", "fail": "fails"}

    def status(e: dict, m: dict) -> str:
        return (e if m is e["measurement"] else m).get("status") or recompute(e, m)

    return render_evidence_table(
        evidence,
        value=fmt_item_value,
        status=status,
        control_word=lambda e, c: words.get(status(e, c), status(e, c)),
        interval="interval",
        result_class="text",
        note=lambda m: (m.get("extra") or {}).get("unresolved"),
    )


def claim_section(claim: dict, recompute) -> list:
    """``render.claim_section`` with this page's evidence table."""
    return render_claim_section(claim, lambda evidence: evidence_table(evidence, recompute))


def _interval_status(e: dict, m: dict) -> str:
    """A series item's (or control's) status from its interval, where the document wrote none."""
    from ..hypotheses.learning_phases import SERIES_RULE

    lo, hi = (m.get("ci") or [None, None])[:2]
    return SERIES_RULE.state(e["threshold"]["direction"], e["threshold"]["value"], lo, hi)


# ----- the verdict timeline ---------------------------------------------------------------------------
LETTER = {"pass": "P", "fail": "F", "inconclusive": "I", "error": "E"}


def _item_change_text(x: dict) -> str:
    """An item that moved between a flip's two checkpoints: ``name: value [interval] status → ...``."""
    side = lambda d: f"{fmt_measurement(d)} {d['status']}"  # noqa: E731
    bar = x.get("threshold")
    name = f"{x['name']} (bar {bar['direction']} {fmt(bar['value'])})" if bar else x["name"]
    text = f"{name}: {side(x['from'])} → {side(x['to'])}"
    for name, c in x["controls"].items():
        a, b = c["from"] or {}, c["to"] or {}
        text += (
            f"; control {name}: {fmt(a.get('value'))} {a.get('status', 'none')} → "
            f"{fmt(b.get('value'))} {b.get('status', 'none')}"
        )
    return text


def _flip_cell(t: dict) -> list:
    if not t["flips"]:
        return ["none"]
    out = []
    for f in t["flips"]:
        skipped = f" (undecided at {', '.join(map(str, f['undecided_between']))})" if f["undecided_between"] else ""
        items = f.get("changed_items")
        moved = [H.tag("br"), meta("; ".join(_item_change_text(x) for x in items))] if items else []
        between = f" between {f['from_step']} and {f['to_step']}{skipped}"
        out.append(H.tag("div", H.verdict(f["from"]), " → ", H.verdict(f["to"]), between, moved))
    return out


TIMELINE_NOTE = H.tag(
    "p",
    "A flip is a change between consecutive decided verdicts (pass, fail) at the checkpoints where claims ran; an "
    "inconclusive or error verdict in between neither makes nor hides one. A claim settles at the first step from "
    "which its verdict stays at its last one. Flagged: more than one flip (the mechanism came and went), or an error.",
)


def timeline_section(doc: dict) -> list:
    """Per claim, its verdict at every checkpoint where claims ran (a strip of P, F, I, E), where it
    settles and every flip with the items that moved; a claim that flips more than once, or that gave an
    error, is flagged above the table and in its row."""
    timelines = sorted((doc.get("verdict_timeline") or {}).items())
    head = [H.tag("h2", "Verdict timeline: where each claim settles, and every flip", id="timeline")]
    if not timelines:
        return head + [H.tag("p", "No per-checkpoint claim was run (--claims 0).")]
    steps = timelines[0][1]["steps"]
    flagged = [[H.breakable(cid), f" ({'; '.join(t['flag_reasons'])})"] for cid, t in timelines if t["flagged"]]
    if flagged:
        flags = [H.tag("b", "FLAGGED: ", class_="fail"), H.join(flagged, "; ")]
        head += [TIMELINE_NOTE, H.tag("p", flags, class_="summary", id="timeline-flagged")]
    else:
        head += [TIMELINE_NOTE, H.tag("p", "No claim flips more than once, and none gave an error.", class_="summary")]
    rows = []
    for cid, t in timelines:
        settles = "not settled" if t["settles_at"] is None else str(t["settles_at"])
        if t["settles_at"] is not None and t["settled_after"] is not None:
            settles = f"({t['settled_after']}, {t['settles_at']}]"
        label = [claim_link(cid, "timeline")]
        if t["flagged"]:
            label += [H.tag("br"), H.tag("span", "⚑ " + "; ".join(t["flag_reasons"]), class_="fail")]
        strip = [
            H.tag("span", LETTER.get(v, "–"), class_=v if v in LETTER else "not-run", title=f"step {s}: {v}")
            for s, v in zip(t["steps"], t["verdicts"])
        ]
        anchored = H.tag("span", label, id=f"timeline-{cid}")
        rows.append([anchored, H.verdict(t["final"] or "not-run"), num(settles), num(strip), _flip_cell(t)])
    table = H.table(
        ["claim", "last verdict", "settles at (interval)", f"verdict at steps {steps[0]}…{steps[-1]}", "flips"],
        rows,
        wide=True,
        cell_classes=[None, "nowrap", "nowrap", "nowrap", "text"],
    )
    legend = f"Evaluated steps: {', '.join(map(str, steps))}. P pass, F fail, I inconclusive, E error, – not run."
    return head + [table, meta_p(legend)]


# ----- the page --------------------------------------------------------------------------------------
def _phase_section(doc) -> list:
    ph, rule = doc["phases"], doc["phases"]["rule"]
    explained = H.tag(
        "p",
        (
            f"Rule version {rule.get('version', 1)}, all in training steps: a phase's curve is learned at ≥ "
            f"{rule['learned']}; its onset is the first checkpoint from which the {rule['smoothing']} stays learned (the "
            f"true onset lies between it and the checkpoint before); coherent when the best non-decreasing fit explains "
            f"R² ≥ {rule['coherence_r2']}. Assignment: a spike, ≥ {rule.get('jump_fraction')} of its rise within "
            f"{rule.get('jump_width_steps')} steps after addition is learned, rising ≥ {rule.get('jump_contrast')}x as "
            f"fast as the {rule.get('jump_flank_steps')} steps on either side. Restricted slots: onset ≥ "
            f"{rule.get('restricted_gap_steps')} steps after assignment's, and ≥ {rule.get('refinement_fraction')} of "
            f"what remains gained within {rule.get('refinement_width_steps')} steps. An item whose interval straddles "
            "its threshold is "
        ),
        H.tag("i", "inconclusive"),
        ", and so is the claim: not judged.",
    )
    rows = []
    for p in ph["phases"]:
        rise = p["largest_rise"]
        onsets = [
            [H.breakable(k), f": {'none' if v is None else v}"] for k, v in sorted(p["supporting_onsets"].items())
        ]
        rows.append(
            [
                p["title"],
                H.tag("code", H.breakable(p["curve"])),
                num(_onset(p)),
                num(fmt(p["coherence_r2"])),
                num(fmt(p.get("step_r2"))),
                "" if rise is None else num(f"{rise['rise']:+.3f} ({rise['from_step']}→{rise['to_step']})"),
                H.join(onsets, ", "),
            ]
        )
    table = H.table(
        [
            "phase",
            "curve",
            "onset step (interval)",
            "monotone-fit R² (decided)",
            "step-fit R² (reported)",
            "largest rise",
            "onsets of supporting measures",
        ],
        rows,
        wide=True,
        cell_classes=[None, None, "nowrap", "nowrap", "nowrap", "nowrap", None],
    )  # wrap between words
    jump_share = "of the assignment curve's rise within {} steps after addition is learned"
    items = [_window_item(ph, "assignment_jump", "assignment jump", jump_share)]
    items += [
        f"{s['earlier']} → {s['later']}: {s['gap_steps']} steps between onsets ({fmt_span(s['gap_interval'])} as the "
        f"checkpoints place them; {s['separating_checkpoints']} checkpoints between them, reported only)"
        for s in ph["separations"]
        if s.get("gap_steps") is not None
    ]
    refinement_share = "of what remains at the assignment onset gained within {} steps"
    items.append(_window_item(ph, "restricted_refinement", "restricted-slot refinement", refinement_share))
    from ..hypotheses.learning_phases import PAPER_RUN_STEPS, ends_early_text

    early = ends_early_text(ph["phases"])
    shorter = (
        f". A series shorter than the paper's {PAPER_RUN_STEPS:,}-step run cannot show whether a phase it ends "
        "before comes later: the items that wait on it are inconclusive. Train longer and report again."
    )
    ends = H.tag("p", H.tag("b", early[0].upper() + early[1:], class_="inconclusive"), shorter) if early else ""
    heading = H.tag("h2", "Learning phases (SPEC §4.5)", id="phases")
    return [heading, explained, ends, table, bullets(x for x in items if x)]


def _window_item(ph: dict, key: str, what: str, share: str) -> str | None:
    """The assignment jump or the restricted-slot refinement (``key``): the ``share`` (words with ``{}`` for
    the window's width) within its best window, or why it was not measured; None when the document has none."""
    from .series import not_measured_why

    x = ph.get(key)
    if not x:
        return None
    if x["fraction_interval"][0] is None:
        return f"{what}: not measured: {not_measured_why(ph, key)} ({x['state']})"
    window = fmt_span(x["window"], "→", collapse=False)
    fraction = _fraction_range(x["fraction_interval"])
    return f"{what}: {fraction} {share.format(x['width_steps'])}; best window {window} ({x['state']})"


def _flagged_summary(doc: dict):
    """The claims the verdict timeline flags, named at the top of the page (nothing when none is)."""
    flagged = sorted(cid for cid, t in (doc.get("verdict_timeline") or {}).items() if t["flagged"])
    if not flagged:
        return ""
    return H.tag(
        "p",
        H.tag("b", "Verdict timeline flags ", class_="fail"),
        H.join([claim_link(cid, "timeline") for cid in flagged], ", "),
        " (more than one flip, or an error, along the series).",
    )


def render_html(doc: dict) -> str:
    """``series.html`` from an ``assignadd.series/1`` document (``reports/html.py``'s template)."""
    from .series import first_hold_text

    n, first, last = len(doc["checkpoints"]), doc["checkpoints"][0]["step"], doc["checkpoints"][-1]["step"]
    pools = f"pools of {doc['settings']['n']} sequences (seed {doc['settings']['pool_seed']})"
    about = [["source ", H.tag("code", doc["source"])], f"{n} checkpoints, steps {first}–{last}; {pools}; "]
    claims = sorted(doc["series_claims"].items())
    verdicts = [[claim_link(cid), " ", H.verdict(r["verdict"])] for cid, r in claims]
    first_hold = [[H.breakable(cid), f": {first_hold_text(h)}"] for cid, h in sorted(doc["claims_first_hold"].items())]
    body = page_head("Checkpoint series", about, doc["schema"]) + [
        H.tag("p", H.join(verdicts, "; "), class_="summary"),
        _flagged_summary(doc),
        _phase_section(doc),
        [claim_section(r, _interval_status) for _, r in claims],
        H.tag("h2", "Per-checkpoint claims: where each starts to hold", id="first-hold"),
        bullets(first_hold or ["(no claims evaluated)"]),
    ]

    def figure(key: str, title: str, png: bytes, caption: str) -> list:
        return [H.tag("h2", title), H.figure(key, title, caption, png)]

    title = "Accuracy by number of variables"
    caption = "accuracy on each evaluation pool against the training step; "
    body += figure("accuracy", title, _panels(doc, ACCURACY_PANELS, title), caption + ONSETS_NOTE)
    body += timeline_section(doc)  # the verdicts over training beside the curves they are read against
    title = "Progress measures"
    caption = "the authors' progress measures (defined under measures in series.json) against the training step; "
    body += figure("progress", title, _panels(doc, PROGRESS_PANELS, title), caption + ONSETS_NOTE)
    claims_png = _claims_figure(doc)
    if claims_png:
        caption = "each registered claim's verdict at the checkpoints it ran on (--claims)"
        body += figure("claims", "Per-checkpoint claims", claims_png, caption)
    return H.page(f"assignadd series: {doc['source']}", *body)
