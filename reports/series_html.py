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
    ax.set_xlabel("training step (green: pass, red: fail, yellow: error)")
    out = _png(fig)
    plt.close(fig)
    return out


def _phase_table(doc) -> str:
    rows = []
    for p in doc["phases"]["phases"]:
        sup = ", ".join(f"{k}: {v}" for k, v in sorted(p["supporting_onsets"].items()))
        rise = p["largest_rise"]
        rise_txt = "" if rise is None else f"{rise['rise']:+.3f} ({rise['from_step']}→{rise['to_step']})"
        rows.append(f"<tr><td>{html.escape(p['title'])}</td><td><code>{html.escape(p['curve'])}</code></td>"
                    f"<td>{p['onset_step']}</td><td>{p['coherence_r2']}</td><td>{p.get('step_r2')}</td><td>{rise_txt}</td>"
                    f"<td>{html.escape(sup)}</td></tr>")
    seps = "".join(f"<li>{s['earlier']} → {s['later']}: {s['separating_checkpoints']} separating checkpoints "
                   f"({'clear' if s['clear'] else 'not clear'})</li>" for s in doc["phases"]["separations"])
    return ("<table><tr><th>phase</th><th>curve</th><th>onset step</th><th>monotone-fit R² (decided)</th>"
            "<th>step-fit R² (reported)</th>"
            "<th>largest rise</th><th>onsets of supporting measures</th></tr>" + "".join(rows) + "</table>"
            f"<ul>{seps}</ul>")


def render_html(doc: dict) -> str:
    rule = doc["phases"]["rule"]
    claim_lines = "".join(
        f"<li><b>{html.escape(cid)}</b>: {html.escape(r['verdict'])}: {html.escape(r['reason'])}</li>"
        for cid, r in sorted(doc["series_claims"].items()))
    holds = "".join(f"<li>{html.escape(cid)}: {h['first_step_holding']}</li>"
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
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;font-size:90%}}</style></head>
<body><h1>Checkpoint series: {html.escape(doc['source'])}</h1>
<p>{n} checkpoints, steps {first}–{last}; pools of {doc['settings']['n']} sequences (seed {doc['settings']['pool_seed']}).
Schema <code>{html.escape(doc['schema'])}</code>.</p>
<h2>Learning phases (SPEC §4.5)</h2>
<p>Rule: a phase's curve is learned at ≥ {rule['learned']}; its onset is the first checkpoint from which the
{html.escape(rule['smoothing'])} stays learned; coherent when it has a checkpoint before its onset and the best
non-decreasing fit of the curve explains R² ≥ {rule['coherence_r2']} (rule version {rule.get('version', 1)});
phases clearly separated by ≥ {rule['min_separating_checkpoints']} checkpoints where the earlier holds and the later not yet.</p>
{_phase_table(doc)}
<ul>{claim_lines}</ul>
<h3>Per-checkpoint claims: first step from which each holds</h3><ul>{holds or '<li>(no claims evaluated)</li>'}</ul>
{fig_html}
</body></html>
"""
