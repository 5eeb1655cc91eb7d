"""``series.html``: one self-contained page (figures as base64 PNG, no network) for a checkpoint series:
accuracy by number of variables, the progress measures, and the claims' verdicts over training, with
the detected phase onsets marked."""
from __future__ import annotations

import base64
import html
import io

ACCURACY_PANELS = (
    ("0 variables", ("acc_0var_train", "acc_0var_heldout_pair")),
    ("1 variable", ("acc_1var_train", "acc_1var_heldout_pair", "acc_1var_restricted_slot", "acc_b_operand_1var")),
    ("2 variables", ("acc_2var_train", "acc_2var_heldout_pair", "acc_2var_restricted_1", "acc_2var_restricted_2",
                     "acc_b_operand_2var")),
)
PROGRESS_PANELS = (
    ("Addition from weights (SPEC §4.3)", ("ov2_mlp2_accuracy",)),
    ("Layer 1 [blocks.0]: previous-token head (SPEC §4.1)",
     ("positional_prev_token", "prev_token_argmax", "prev_token_weight", "layer1_eq_to_operand_slots", "variable_probe")),
    ("Layer 2 [blocks.1]: identity QK and routing (SPEC §4.2)",
     ("identity_qk_diagonal", "layer2_eq_to_operand_values", "layer2_eq_to_operand_values_restricted")),
)
PHASE_STYLES = {"addition": ":", "assignment": "--", "restricted_slots": "-."}  # black lines, told apart by style


def _png(fig) -> str:
    buf = io.BytesIO()
    # No timestamps in the PNG metadata: the same series gives the same bytes.
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _mark_phases(ax, doc):
    for p in doc["phases"]["phases"]:
        if p["onset_step"] is not None:
            ax.axvline(p["onset_step"], color="black", ls=PHASE_STYLES.get(p["id"], "-"), lw=1, label=f"onset: {p['id']}")


def _panels(doc, panels, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [c["step"] for c in doc["checkpoints"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), sharey=False, squeeze=False)
    for ax, (name, measures) in zip(axes[0], panels):
        for m in measures:
            ys = [c["values"].get(m) for c in doc["checkpoints"]]
            ys = [float("nan") if y is None else y for y in ys]
            ax.plot(steps, ys, marker="." if len(steps) < 60 else None, lw=1.2, label=m.removeprefix("acc_"))
        _mark_phases(ax, doc)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title)
    out = _png(fig)
    plt.close(fig)
    return out


def _claims_figure(doc):
    evaluated = [c for c in doc["checkpoints"] if "claims" in c]
    if not evaluated:
        return None
    ids = sorted({cid for c in evaluated for cid in c["claims"]})
    if not ids:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    code = {"pass": 1.0, "fail": 0.0}
    grid = [[code.get(c["claims"].get(cid, {}).get("verdict"), 0.5) for c in evaluated] for cid in ids]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(evaluated)), 0.45 * len(ids) + 1.2))
    ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_yticks(range(len(ids)), ids, fontsize=8)
    ax.set_xticks(range(len(evaluated)), [str(c["step"]) for c in evaluated], rotation=90, fontsize=7)
    ax.set_xlabel("training step (green: pass, red: fail, yellow: inconclusive or error)")
    out = _png(fig)
    plt.close(fig)
    return out


def _phase_table(doc) -> str:
    ph = doc["phases"]
    rows = []
    for p in ph["phases"]:
        sup = ", ".join(f"{k}: {v}" for k, v in sorted(p["supporting_onsets"].items()))
        rise = p["largest_rise"]
        rise_txt = "" if rise is None else f"{rise['rise']:+.3f} ({rise['from_step']}→{rise['to_step']})"
        before, at = p.get("onset_interval") or [None, p["onset_step"]]
        onset = "none" if at is None else (f"{at}" if before is None else f"({before}, {at}]")
        rows.append(f"<tr><td>{html.escape(p['title'])}</td><td><code>{html.escape(p['curve'])}</code></td>"
                    f"<td>{onset}</td><td>{p['coherence_r2']}</td><td>{p.get('step_r2')}</td><td>{rise_txt}</td>"
                    f"<td>{html.escape(sup)}</td></tr>")
    items = []
    jump, ref = ph.get("assignment_jump"), ph.get("restricted_refinement")
    if jump:
        items.append(f"<li>assignment jump: {_pair(jump['fraction_interval'])} of the assignment curve's rise "
                     f"within {jump['width_steps']} steps after addition is learned; best window "
                     f"{_pair(jump['window'], '→')} ({html.escape(jump['state'])})</li>")
    for s in ph["separations"]:
        if s.get("gap_steps") is not None:
            items.append(f"<li>{s['earlier']} → {s['later']}: {s['gap_steps']} steps between onsets "
                         f"({_pair(s['gap_interval'])} as the checkpoints place them; {s['separating_checkpoints']} "
                         "checkpoints between them, reported only)</li>")
    if ref:
        items.append(f"<li>restricted-slot refinement: {_pair(ref['fraction_interval'])} of what remains at the "
                     f"assignment onset gained within {ref['width_steps']} steps; best window "
                     f"{_pair(ref['window'], '→')} ({html.escape(ref['state'])})</li>")
    return ("<table><tr><th>phase</th><th>curve</th><th>onset step (interval)</th><th>monotone-fit R² (decided)</th>"
            "<th>step-fit R² (reported)</th>"
            "<th>largest rise</th><th>onsets of supporting measures</th></tr>" + "".join(rows) + "</table>"
            f"<ul>{''.join(items)}</ul>")


def _pair(x, sep: str = "–") -> str:
    if not x or x[0] is None or x[1] is None:
        return "n/a"
    return f"{x[0]:g}" if x[0] == x[1] and sep == "–" else f"{x[0]:g}{sep}{x[1]:g}"


def _state(e: dict, m: dict) -> str:
    """The status written with the item (or its control), else recomputed from its interval."""
    from ..hypotheses.learning_phases import interval_state

    written = e.get("status") if m is e["measurement"] else m.get("status")
    if written:
        return written
    lo, hi = (m.get("ci") or [None, None])[:2]
    return interval_state(e["threshold"]["direction"], e["threshold"]["value"], lo, hi)


def _evidence_table(claim: dict) -> str:
    """The claim's evidence items as the verify report shows them: definition, interval, threshold with its
    reason, result, and the same statistic on each control."""
    from .render import fmt, fmt_measurement, fmt_threshold

    ev = claim.get("evidence") or []
    if not ev:
        return ""
    rows = []
    for e in ev:
        ctrl = "<br>".join(
            f"{html.escape(k)}: {html.escape(fmt_measurement(m))} "
            f"({'passes!' if _state(e, m) == 'pass' else 'fails' if _state(e, m) == 'fail' else 'inconclusive'})"
            for k, m in sorted(e["controls"].items())) or "-"
        state = _state(e, e["measurement"])
        note = e["measurement"].get("extra", {}).get("unresolved")
        rows.append(
            f"<tr><td><b>{html.escape(e['name'])}</b><br><small>{html.escape(e['definition'])}</small></td>"
            f"<td>{html.escape(e['kind'])}{'' if e['required'] else '<br>(optional)'}</td>"
            f"<td>{html.escape(fmt_measurement(e['measurement']))}</td>"
            f"<td>{html.escape(fmt(e['measurement'].get('n')))}</td>"
            f"<td>{html.escape(fmt_threshold(e['threshold']))}<br>"
            f"<small>{html.escape(e['threshold']['reason'])}</small></td>"
            f"<td class=\"{state}\"><b>{state.upper()}</b>"
            f"{'<br><small>' + html.escape(note) + '</small>' if note else ''}</td>"
            f"<td>{ctrl}</td></tr>")
    return ("<table><tr><th>evidence</th><th>kind</th><th>value [interval]</th><th>n</th><th>threshold</th>"
            "<th>result</th><th>controls</th></tr>" + "".join(rows) + "</table>")


def _claims_section(doc) -> str:
    out = []
    for cid, r in sorted(doc["series_claims"].items()):
        v = html.escape(r["verdict"])
        out.append(f"<h3>{html.escape(cid)} <span class=\"{v}\">{v.upper()}</span> "
                   f"<small>{html.escape(r.get('spec', ''))}</small></h3>"
                   f"<blockquote>{html.escape(r.get('statement', ''))}</blockquote>"
                   f"<p>Verdict <b>{html.escape(r['verdict'])}</b>: {html.escape(r['reason'])}</p>{_evidence_table(r)}")
        if r.get("controls"):
            described = "; ".join(f"<i>{html.escape(k)}</i>: {html.escape(v)}"
                                  for k, v in sorted(r["controls"].items()))
            out.append(f"<p><small>Controls: {described}</small></p>")
    return "".join(out)


def render_html(doc: dict) -> str:
    from .series import first_hold_text

    rule = doc["phases"]["rule"]
    holds = "".join(f"<li>{html.escape(cid)}: {html.escape(first_hold_text(h))}</li>"
                    for cid, h in sorted(doc["claims_first_hold"].items()))
    figs = [("Accuracy by number of variables", _panels(doc, ACCURACY_PANELS, "Accuracy by number of variables")),
            ("Progress measures", _panels(doc, PROGRESS_PANELS, "Progress measures"))]
    claims_png = _claims_figure(doc)
    if claims_png:
        figs.append(("Per-checkpoint claims", claims_png))
    fig_html = "".join(f"<h2>{html.escape(t)}</h2><img alt=\"{html.escape(t)}\" src=\"data:image/png;base64,{b}\">"
                       for t, b in figs)
    n, first, last = len(doc["checkpoints"]), doc["checkpoints"][0]["step"], doc["checkpoints"][-1]["step"]
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>assignadd series: {html.escape(doc['source'])}</title>
<style>body{{font-family:sans-serif;max-width:1300px;margin:1em auto}}img{{max-width:100%}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:90%}}
.pass{{color:#2ca02c}}.fail{{color:#d62728}}.inconclusive,.error{{color:#b8860b}}</style></head>
<body><h1>Checkpoint series: {html.escape(doc['source'])}</h1>
<p>{n} checkpoints, steps {first}–{last}; pools of {doc['settings']['n']} sequences (seed {doc['settings']['pool_seed']}).
Schema <code>{html.escape(doc['schema'])}</code>.</p>
<h2>Learning phases (SPEC §4.5)</h2>
<p>Rule version {rule.get('version', 1)}, all in training steps: a phase's curve is learned at ≥
{rule['learned']}; its onset is the first checkpoint from which the {html.escape(rule['smoothing'])} stays
learned (the true onset lies between it and the checkpoint before); coherent when the best non-decreasing fit
explains R² ≥ {rule['coherence_r2']}.
Assignment: ≥ {rule.get('jump_fraction')} of its rise within {rule.get('jump_width_steps')} steps, after addition is
learned. Restricted slots: onset ≥ {rule.get('restricted_gap_steps')} steps after assignment's, and ≥
{rule.get('refinement_fraction')} of what remains gained within {rule.get('refinement_width_steps')} steps. An item
whose interval straddles its threshold is <i>inconclusive</i>, and so is the claim: not judged.</p>
{_phase_table(doc)}
<h2>Series claims</h2>
{_claims_section(doc)}
<h3>Per-checkpoint claims: where each starts to hold</h3><ul>{holds or '<li>(no claims evaluated)</li>'}</ul>
{fig_html}
</body></html>
"""
