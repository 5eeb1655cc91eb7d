"""The verification report in its forms: a dict (report.json), a terminal table, Markdown, JUnit XML
and one self-contained HTML page. Schema: docs/reports.md.

Every renderer here reads the report dict (the JSON), so a report can be re-rendered from
report.json alone; only the HTML also takes figures (PNG bytes). No torch here.
"""
from __future__ import annotations

import base64
import html
import json
import math
import xml.etree.ElementTree as ET

SCHEMA = "assignadd.verify/1"
TIMINGS_SCHEMA = "assignadd.verify.timings/1"


def _clean(x):
    """JSON-safe and deterministic: numpy/torch scalars to Python, NaN and ±inf to null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 0) == 0:
        x = x.item()
    elif hasattr(x, "tolist") and callable(x.tolist):
        return _clean(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def build_report(*, checkpoint: dict, model_config: dict, task: dict, task_source: str, seed: int, n: int,
                 device: str, only: list[str] | None, claims: list[dict], tool_version: str) -> dict:
    """The report.json document (``claims`` are ``ClaimResult.to_dict()`` in run order)."""
    passed = [c["claim"] for c in claims if c["verdict"] == "pass"]
    return _clean({
        "schema": SCHEMA,
        "tool": {"name": "assignadd-verify", "version": tool_version},
        "checkpoint": checkpoint,
        "model_config": model_config,
        "task": task,
        "task_source": task_source,
        "seed": seed,
        "n": n,
        "device": device,
        "only": only,
        "summary": {
            "passed": len(passed),
            "total": len(claims),
            "all_passed": bool(claims) and len(passed) == len(claims),
            "failed": [c["claim"] for c in claims if c["verdict"] == "fail"],
            "errors": [c["claim"] for c in claims if c["verdict"] == "error"],
        },
        "claims": claims,
    })


def dumps(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ----- numbers as text ---------------------------------------------------------------------------
def fmt(x) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if abs(x) >= 1e4 or (x != 0 and abs(x) < 1e-3):
        return f"{x:.3g}"
    return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.4g}"


def fmt_measurement(m: dict) -> str:
    lo, hi = (m.get("ci") or [None, None])[:2]
    v = m.get("value")
    if lo is None or hi is None or (lo == hi == v):
        return fmt(v)
    return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"


def fmt_threshold(t: dict) -> str:
    return f"{t['bound']} {t['direction']} {fmt(t['value'])}"


def headline(claim: dict) -> dict | None:
    """As ``ClaimResult.headline()``, on the dict: first required causal item, else first required."""
    ev = claim.get("evidence") or []
    for e in ev:
        if e["required"] and e["kind"] == "causal":
            return e
    return next((e for e in ev if e["required"]), None)


def closest_control(e: dict) -> tuple[str, dict] | None:
    """The control that comes closest to passing the threshold: the one a sceptic looks at first."""
    controls = e.get("controls") or {}
    if not controls:
        return None
    up = e["threshold"]["direction"] == ">="

    def key(item):
        m = item[1]
        b = m["ci"][0] if up else m["ci"][1]
        b = m["value"] if b is None else b
        if b is None:
            return math.inf
        return -b if up else b

    return min(sorted(controls.items()), key=key)


def summary_rows(report: dict) -> list[list[str]]:
    rows = []
    for c in report["claims"]:
        e = headline(c)
        if e is None:
            stat, thr, ctrl = "-", "-", "-"
        else:
            stat = f"{e['name']} = {fmt_measurement(e['measurement'])}"
            thr = fmt_threshold(e["threshold"])
            cc = closest_control(e)
            ctrl = f"{cc[0]}: {fmt_measurement(cc[1])}" if cc else "-"
        rows.append([c["claim"], c["verdict"].upper(), stat, thr, ctrl])
    return rows


HEADER = ["claim", "verdict", "key statistic [95% CI]", "threshold", "control (closest to passing)"]


def terminal_table(report: dict, width: int = 160) -> str:
    """A plain-text table, then the reasons for anything that did not pass, then `N/M claims passed`."""
    rows = summary_rows(report)
    cols = list(zip(HEADER, *rows)) if rows else [(h,) for h in HEADER]
    widths = [max(len(s) for s in col) for col in cols]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip())
    bad = [c for c in report["claims"] if c["verdict"] != "pass"]
    if bad:
        lines.append("")
        for c in bad:
            lines.append(f"{c['claim']}: {c['verdict']}: {c['reason']}")
    s = report["summary"]
    lines.append("")
    lines.append(f"{s['passed']}/{s['total']} claims passed")
    return "\n".join(lines) + "\n"


# ----- Markdown ----------------------------------------------------------------------------------
def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _evidence_lines(e: dict) -> list[str]:
    status = "PASS" if e["passed"] else "FAIL"
    m = e["measurement"]
    n = f", n = {m['n']}" if m.get("n") is not None else ""
    out = [f"- **{e['name']}** ({e['kind']}{'' if e['required'] else ', optional'}): "
           f"{fmt_measurement(m)}{n}; needs {fmt_threshold(e['threshold'])}: **{status}**",
           f"  - measures: {e['definition']}",
           f"  - threshold: {e['threshold']['reason']}"]
    if e.get("controls"):
        parts = [f"{name} {fmt_measurement(cm)} ({'passes: the item cannot tell them apart' if cm['passed'] else 'fails, as it should'})"
                 for name, cm in sorted(e["controls"].items())]
        out.append(f"  - controls: {'; '.join(parts)}")
    return out


def markdown(report: dict) -> str:
    ck = report["checkpoint"]
    s = report["summary"]
    lines = [
        "# assignadd-verify report",
        "",
        f"- checkpoint: `{ck['path']}` ({ck['format']}{', step ' + str(ck['step']) if ck.get('step') is not None else ''})",
        f"- SHA-256: `{ck['sha256']}`",
        f"- task ({report['task_source']}): " + ", ".join(f"{k} = {v}" for k, v in report["task"].items()),
        f"- seed {report['seed']}, pool size {report['n']}, device {report['device']}",
        f"- **{s['passed']}/{s['total']} claims passed**",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in summary_rows(report)]
    for c in report["claims"]:
        lines += ["", f"## {c['claim']} — {c['verdict'].upper()} ({c['spec']})", "", f"> {c['statement']}", "",
                  f"Verdict: **{c['verdict']}**: {c['reason']}", ""]
        for e in c.get("evidence") or []:
            lines += _evidence_lines(e)
        if c.get("controls"):
            lines += ["", "Controls: " + "; ".join(f"*{k}*: {v}" for k, v in sorted(c["controls"].items()))]
    return "\n".join(lines) + "\n"


# ----- JUnit XML ---------------------------------------------------------------------------------
def junit_xml(report: dict, timings: dict | None = None) -> str:
    """One testcase per claim; a failed claim is a <failure>, an errored one an <error>, with the reason."""
    timings = timings or {}
    claim_time = timings.get("claims", {})
    s = report["summary"]
    suite = ET.Element("testsuite", {
        "name": "assignadd-verify", "tests": str(s["total"]), "failures": str(len(s["failed"])),
        "errors": str(len(s["errors"])), "skipped": "0",
        "time": f"{sum(claim_time.values()):.3f}",
    })
    props = ET.SubElement(suite, "properties")
    for k, v in (("checkpoint", report["checkpoint"]["path"]), ("sha256", report["checkpoint"]["sha256"]),
                 ("seed", report["seed"]), ("n", report["n"])):
        ET.SubElement(props, "property", {"name": k, "value": str(v)})
    for c in report["claims"]:
        case = ET.SubElement(suite, "testcase", {"classname": "assignadd.claims", "name": c["claim"],
                                                 "time": f"{claim_time.get(c['claim'], 0.0):.3f}"})
        if c["verdict"] != "pass":
            tag = "failure" if c["verdict"] == "fail" else "error"
            el = ET.SubElement(case, tag, {"message": c["reason"], "type": c["verdict"]})
            el.text = "\n".join(sum((_evidence_lines(e) for e in c.get("evidence") or []), [c["reason"]]))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ----- HTML --------------------------------------------------------------------------------------
CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1200px;margin:24px auto;
padding:0 16px;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em;margin:1.2em 0 .3em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f7}
.pass{color:#116329;font-weight:bold}.fail{color:#b3261e;font-weight:bold}.error{color:#8a4b00;font-weight:bold}
.meta{color:#555;font-size:.92em}.meta code{font-size:.95em}
.summary{font-size:1.15em;margin:.6em 0}
figure{margin:.8em 0 1.2em;display:inline-block;vertical-align:top;max-width:100%}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#444;max-width:640px}
blockquote{margin:.4em 0;padding:.3em .8em;border-left:4px solid #d0d7de;color:#333;background:#fafbfc}
code{background:#f3f5f7;padding:0 3px;border-radius:3px}
td.num,td.ctl,span.num{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.95em}td.num{white-space:nowrap}
td.thr{min-width:12em}td.ctl{min-width:10em}table.wide{width:100%}
"""


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _img(fig) -> str:
    if not fig.png:
        return f'<p class="meta" id="fig-{_e(fig.key)}"><b>{_e(fig.title)}</b>: {_e(fig.caption)}</p>'
    data = base64.b64encode(fig.png).decode("ascii")
    return (f'<figure id="fig-{_e(fig.key)}"><img alt="{_e(fig.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption><b>{_e(fig.title)}.</b> {fig.caption}</figcaption></figure>")


def _verdict(v: str) -> str:
    return f'<span class="{_e(v)}">{_e(v.upper())}</span>'


def html_page(report: dict, figures: list | None = None) -> str:
    """One self-contained page: styles inline, figures as base64 PNG, no script, no network."""
    figures = list(figures or [])
    ck, s = report["checkpoint"], report["summary"]
    by_claim: dict[str, list] = {}
    for f in figures:
        by_claim.setdefault(f.claim, []).append(f)
    claim_ids = {c["claim"] for c in report["claims"]}
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>assignadd-verify: {_e(ck['path'])}</title><style>{CSS}</style></head><body>",
           "<h1>assignadd-verify report</h1>",
           '<div class="meta">',
           f"checkpoint <code>{_e(ck['path'])}</code> ({_e(ck['format'])}"
           f"{', step ' + _e(ck['step']) if ck.get('step') is not None else ''})<br>",
           f"SHA-256 <code>{_e(ck['sha256'])}</code><br>",
           f"task ({_e(report['task_source'])}): "
           + ", ".join(f"{_e(k)} = {_e(v)}" for k, v in report["task"].items()) + "<br>",
           f"seed {_e(report['seed'])}, pool size {_e(report['n'])}, device {_e(report['device'])}, "
           f"schema <code>{_e(report['schema'])}</code>",
           "</div>",
           f'<p class="summary"><b>{s["passed"]}/{s["total"]} claims passed</b></p>',
           "<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in HEADER) + "</tr></thead><tbody>"]
    for c, r in zip(report["claims"], summary_rows(report)):
        out.append(f'<tr><td><a href="#claim-{_e(c["claim"])}">{_e(r[0])}</a></td><td>{_verdict(c["verdict"])}</td>'
                   + "".join(f'<td class="{c_}">{_e(x)}</td>' for c_, x in zip(("ctl", "num", "ctl"), r[2:])) + "</tr>")
    out.append("</tbody></table>")

    for c in report["claims"]:
        out += [f'<h2 id="claim-{_e(c["claim"])}">{_e(c["claim"])} {_verdict(c["verdict"])} '
                f'<span class="meta">{_e(c["spec"])}</span></h2>',
                f"<blockquote>{_e(c['statement'])}</blockquote>",
                f"<p>Verdict <b>{_e(c['verdict'])}</b>: {_e(c['reason'])}</p>"]
        ev = c.get("evidence") or []
        if ev:
            out.append("<table class='wide'><thead><tr><th>evidence</th><th>kind</th><th>value [95% CI]</th><th>n</th>"
                       "<th>threshold</th><th>result</th><th>controls</th></tr></thead><tbody>")
            for e in ev:
                ctrl = "<br>".join(
                    f"{_e(k)}: {_e(fmt_measurement(m))} {'(passes!)' if m['passed'] else '(fails)'}"
                    for k, m in sorted(e["controls"].items())) or "-"
                out.append(
                    f"<tr><td><b>{_e(e['name'])}</b><br><span class='meta'>{_e(e['definition'])}</span></td>"
                    f"<td>{_e(e['kind'])}{'' if e['required'] else '<br>(optional)'}</td>"
                    f"<td class='num'>{_e(fmt_measurement(e['measurement']))}</td>"
                    f"<td class='num'>{_e(fmt(e['measurement'].get('n')))}</td>"
                    f"<td class='thr'><span class='num'>{_e(fmt_threshold(e['threshold']))}</span><br>"
                    f"<span class='meta'>{_e(e['threshold']['reason'])}</span></td>"
                    f"<td>{_verdict('pass' if e['passed'] else 'fail')}</td><td class='ctl'>{ctrl}</td></tr>")
            out.append("</tbody></table>")
        if c.get("controls"):
            out.append("<p class='meta'>Controls: " + "; ".join(
                f"<i>{_e(k)}</i>: {_e(v)}" for k, v in sorted(c["controls"].items())) + "</p>")
        for f in by_claim.get(c["claim"], []):
            out.append(_img(f))
    rest = [f for f in figures if f.claim not in claim_ids]
    if rest:
        out.append('<h2 id="model-figures">Model figures</h2>'
                   "<p class='meta'>Computed from the checkpoint's weights and activations, for claims not in "
                   "this run.</p>")
        out += [_img(f) for f in rest]
    out.append("</body></html>")
    return "\n".join(out) + "\n"
