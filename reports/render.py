"""The verification report in its forms: a dict (report.json), a terminal table, Markdown, JUnit XML
and one self-contained HTML page. Schema: docs/reports.md and ``reports/schemas/verify.schema.json``.

Every renderer here reads the report dict (the JSON), so a report can be re-rendered from
report.json alone; only the HTML also takes figures (PNG bytes). No torch here.

Verdicts: ``pass``, ``fail``, ``inconclusive`` (an interval straddles its threshold), ``error`` (the
claim could not be decided). Claims that need more than one checkpoint (a series, a sweep) are listed
as *not run here*, with the command that runs them.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

from . import html as H

SCHEMA = "assignadd.verify/1"
TIMINGS_SCHEMA = "assignadd.verify.timings/1"
VERDICTS = ("pass", "inconclusive", "fail", "error")  # the order a summary counts them in


def clean_json(x):
    """JSON-safe and deterministic: numpy/torch scalars to Python, NaN and ±inf to null."""
    if isinstance(x, dict):
        return {str(k): clean_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean_json(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 0) == 0:
        x = x.item()
    elif hasattr(x, "tolist") and callable(x.tolist):
        return clean_json(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def build_report(
    *,
    checkpoint: dict,
    model_config: dict,
    task: dict,
    task_source: str,
    seed: int,
    n: int,
    device: str,
    only: list[str] | None,
    claims: list[dict],
    tool_version: str,
    not_run: list[dict] | None = None,
    interfaces: list[dict] | None = None,
) -> dict:
    """The report.json document. ``claims`` are ``ClaimResult.to_dict()`` in run order; ``not_run`` the
    claims this command cannot run (``{"claim", "spec", "statement", "needs", "command"}``);
    ``interfaces`` the checks of ``hypotheses/interfaces.py`` (left out of the document when None)."""
    by_verdict = {v: [c["claim"] for c in claims if c["verdict"] == v] for v in VERDICTS}
    others = [c["claim"] for c in claims if c["verdict"] not in VERDICTS]  # a verdict this version does not know
    not_run = list(not_run or [])
    summary = {
        "passed": len(by_verdict["pass"]),
        "total": len(claims),
        "all_passed": bool(claims) and len(by_verdict["pass"]) == len(claims),
        "failed": by_verdict["fail"],
        "inconclusive": by_verdict["inconclusive"],
        "errors": by_verdict["error"] + others,
        "not_run": [c["claim"] for c in not_run],
    }
    doc = {
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
        "summary": summary,
        "claims": claims,
        "not_run": not_run,
    }
    if interfaces is not None:
        doc["interfaces"] = interfaces
        broken = [i["interface"] for i in interfaces if i["verdict"] == "interface-broken"]
        doc["summary"] = {**summary, "interfaces_broken": broken}
    return clean_json(doc)


def dumps(report: dict) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


# ----- numbers as text ---------------------------------------------------------------------------
def fmt(x) -> str:
    """One number, short: integers as they are, 3 decimals below 1, 4 significant digits above; very
    small or large ones in 3 significant digits. The form of every single number in the reports' text
    and tables (verify, series, sweep). A figure's title uses ``figures._fmt`` (3 significant digits);
    an interval, ``fmt_interval``; a pair of steps, ``fmt_span``."""
    if x is None:
        return "n/a"
    if isinstance(x, int):  # bool included
        return str(x)
    if abs(x) >= 1e4 or (x != 0 and abs(x) < 1e-3):
        return f"{x:.3g}"
    return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.4g}"


def fmt_span(x, sep: str = "–", collapse: bool = True) -> str:
    """A pair ``(a, b)`` of training steps (or a fraction's range on a terminal) as ``a–b``, each end in
    ``:g`` form; one number when the ends agree and ``collapse`` (a window ``a→b`` is written whole);
    ``n/a`` when either end is missing. Exact ends, not rounded outwards: for an interval of a statistic,
    ``fmt_interval``."""
    if not x or x[0] is None or x[1] is None:
        return "n/a"
    return f"{x[0]:g}" if collapse and x[0] == x[1] else f"{x[0]:g}{sep}{x[1]:g}"


def _decimals(x: float, places: int, rounding) -> str:
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-places), rounding=rounding)
    s = f"{q:f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def fmt_interval(value, low, high) -> tuple[str, str, str]:
    """``value``, ``low``, ``high`` as text that never hides what the numbers say.

    The interval is rounded outwards (its low end down, its high end up), so a shown bound is never
    better than the real one, and with as many decimals (3 to 6) as it takes for different numbers to
    look different: ``1.0`` with ``[0.999742, 1.0]`` shows ``1 [0.999, 1]``, never ``1 [1, 1]``.
    """
    numbers = (value, low, high)
    given = [x for x in numbers if x is not None]
    if not given or any(isinstance(x, float) and not math.isfinite(x) for x in given):
        return fmt(value), fmt(low), fmt(high)
    significant = any(x != 0 and not 1e-3 <= abs(x) < 1e4 for x in given)  # very small or large
    for digits in range(3, 8) if significant else range(3, 7):  # significant digits, else decimal places
        if significant:
            shown = [None if x is None else f"{x:.{digits}g}" for x in numbers]
        else:
            roundings = (ROUND_HALF_EVEN, ROUND_FLOOR, ROUND_CEILING)
            shown = [None if x is None else _decimals(x, digits, r) for x, r in zip(numbers, roundings)]
        if _distinct(shown, numbers):
            break
    return tuple("n/a" if s is None else s for s in shown)


def _distinct(shown, numbers) -> bool:
    """Numbers that differ are shown differently."""
    pairs = [(i, j) for i, j in ((0, 1), (0, 2), (1, 2)) if None not in (numbers[i], numbers[j])]
    return all(shown[i] != shown[j] for i, j in pairs if numbers[i] != numbers[j])


def fmt_measurement(m: dict) -> str:
    """``value [low, high]``, or the value alone when the statistic has no sampling error."""
    lo, hi = (m.get("ci") or [None, None])[:2]
    v = m.get("value")
    if lo is None or hi is None or (lo == hi == v):
        return fmt(v)
    v_s, lo_s, hi_s = fmt_interval(v, lo, hi)
    return f"{v_s} [{lo_s}, {hi_s}]"


def fmt_threshold(t: dict) -> str:
    return f"{t['bound']} {t['direction']} {fmt(t['value'])}"


def item_status(e: dict) -> str:
    """An evidence item's result, or a control's on the item's bar (``pass`` there means the item cannot
    tell them apart): ``pass``, ``fail``, ``inconclusive``, or ``no data``."""
    return e.get("status") or e.get("verdict") or ("pass" if e.get("passed") else "fail")


def headline(claim: dict) -> dict | None:
    """The item a summary shows: the first required causal item, else the first required one."""
    required = [e for e in claim.get("evidence") or [] if e["required"]]
    return next((e for e in required if e["kind"] == "causal"), required[0] if required else None)


def closest_control(e: dict) -> tuple[str, dict] | None:
    """The control that comes closest to passing the threshold: the one a sceptic looks at first."""
    controls = e.get("controls") or {}
    if not controls:
        return None
    up = e["threshold"]["direction"] == ">="

    def key(item):  # how far its conservative bound (its value where it has none) is from passing
        m = item[1]
        bound = (m.get("ci") or [None, None])[0 if up else 1]
        bound = m.get("value") if bound is None else bound
        return math.inf if bound is None else (-bound if up else bound)

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
    for c in report.get("not_run") or []:
        rows.append([c["claim"], "NOT RUN", f"needs {c['needs']}", "-", f"run: {c['command']}"])
    return rows


HEADER = ["claim", "verdict", "key statistic [95% CI]", "threshold", "control (closest to passing)"]


def summary_line(report: dict) -> str:
    """``4 passed, 1 inconclusive, 1 failed of 6 run; 2 not run here: learning_phases (run: ...), ...``"""
    s = report["summary"]
    words = (("inconclusive", "inconclusive"), ("failed", "failed"), ("errors", "errored"))
    parts = [f"{s['passed']} passed"] + [f"{len(s[key])} {word}" for key, word in words if s.get(key)]
    line = f"{', '.join(parts)} of {s['total']} run"
    if s.get("interfaces_broken"):
        line += "; interface broken: " + ", ".join(s["interfaces_broken"])
    not_run = report.get("not_run") or []
    if not_run:
        line += f"; {len(not_run)} not run here: " + ", ".join(f"{c['claim']} (run: {c['command']})" for c in not_run)
    return line


def notes(report: dict) -> list[str]:
    """What the reader must know about how the claims were run: the task when the checkpoint did not say."""
    out = []
    if report.get("task_source") == "default":
        t = report["task"]
        out.append(
            f"note: the checkpoint holds no task, so the claims ran on the paper's (f = {t.get('f')}, "
            f"r = {t.get('r')}, split seed {t.get('seed')}); if it was trained on another, say so with "
            "--f, --r and --split-seed"
        )
    elif report.get("task_source") == "command line":
        out.append("note: the task was given on the command line (--f, --r, --split-seed); the checkpoint holds none")
    return out


def interface_words(i: dict) -> str:
    """``ov2_to_mlp (shared_residual -> fourier_neurons)``"""
    return f"{i['interface']} ({i['writer']} -> {i['reader'] or i['reads']})"


def interface_rows(report: dict) -> list[list[str]]:
    """One row per interface check: interface, verdict, answers as they are, answers recoded."""
    rows = []
    for i in report.get("interfaces") or []:
        recoded = fmt_measurement(i["recoded"]) if i.get("recoded") else "not fitted"
        rows.append([interface_words(i), i["verdict"], fmt_measurement(i["plain"]), recoded])
    return rows


INTERFACE_NOTE = (
    "Where one component's output is the next one's input, a break can be a recoding on either side. "
    "`interface-broken`: the answers fail or fall short of a trained model's, and an affine recoding of the "
    "writer's output restores them; "
    "one checkpoint cannot tell which side changed (docs/interfaces.md)."
)
INTERFACE_HEADER = ["interface (writer -> reader)", "verdict", "answers", "answers, output recoded"]

ROLE_NAMES = {
    "previous_token_head": "previous-token head",
    "fetching_head": "fetching head",
    "adding_mlp": "adding MLP",
}


def components_lines(report: dict) -> list[str]:
    """Where the claims found their components, one line per role, when the report names them (a model
    other than the paper's layout, or components given with --components); none otherwise."""
    found = report.get("components")
    if not found:
        return []
    out = []
    for role, r in found.items():
        name = ROLE_NAMES.get(role, role)
        site = _site(r) if "." in r["found"] else f"MLP {r['found']}"
        if r["how"] == "given":
            out.append(f"{name}: {site} (given with --components)")
            continue
        silent = f", {_counted(r['silent_heads'], 'silent head')} left out" if r.get("silent_heads") else ""
        found_in = f"({_counted(r['candidates'], 'candidate')}{silent})"
        out.append(f"{name}: {site}, score {fmt(r['score'])}{_runner_up(r)} {found_in}")
    return out


def components_line(found: dict) -> str:
    """``components_lines`` on one line (the terminal's), from ``found``: report.json's ``components``
    (``Located.to_dict()``)."""
    parts = []
    for role, r in found.items():
        name = f"{ROLE_NAMES.get(role, role)} {_site(r)}"
        if r["how"] == "given":
            parts.append(f"{name} (given with --components)")
            continue
        silent = f"; {_counted(r['silent_heads'], 'silent head')} left out" if r.get("silent_heads") else ""
        parts.append(f"{name} (score {fmt(r['score'])}{_runner_up(r)}{silent})")
    single = all(r["how"] == "searched" and r["candidates"] == 1 for r in found.values())
    return "components (layer.head from 0): " + ", ".join(parts) + ("; one candidate each" if single else "")


def _site(r: dict) -> str:
    """The role's head, and the heads that fill it with that one (``also``): "1.0+1.1"."""
    return "+".join([r["found"], *r.get("also", [])])


def _runner_up(r: dict) -> str:
    return "" if r["runner_up"] is None else f"; runner-up {r['runner_up']} at {fmt(r['runner_up_score'])}"


def _counted(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


COMPONENTS_NOTE = (
    "The claims read the components found by the pre-registered search of SPEC §2.1 (layer.head, from 0), "
    "or given with --components."
)


def _step(ck: dict) -> str:
    if ck.get("step") is None:
        return ""
    return f", step {ck['step']}" + (" (from the file name)" if ck.get("step_source") == "file name" else "")


def terminal_table(report: dict, located: dict | None = None) -> str:
    """A plain-text table, where the claims found their components, the reasons for anything that did not
    pass, notes, then the summary line. The components are report.json's ``components``, else ``located``
    (``Located.to_dict()``: report.json leaves out the paper's layout found as such); none when neither."""
    rows = summary_rows(report)
    widths = [max(len(s) for s in col) for col in zip(HEADER, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(s.ljust(w) for s, w in zip(r, widths)).rstrip() for r in rows]
    bad = [f"{c['claim']}: {c['verdict']}: {c['reason']}" for c in report["claims"] if c["verdict"] != "pass"]
    odd = [
        f"interface {interface_words(i)}: {i['verdict']}: {i['reason']}"
        for i in report.get("interfaces") or []
        if i["verdict"] != "intact"
    ]
    found = report.get("components") or located
    where = [components_line(found)] if found else []
    for block in (where, bad, odd, notes(report)):  # each after a blank line, when it has anything to say
        if block:
            lines += ["", *block]
    return "\n".join(lines + ["", summary_line(report)]) + "\n"


# ----- Markdown ----------------------------------------------------------------------------------
def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines; a cell's ``|`` escaped and its line breaks as spaces."""
    cells = lambda r: "| " + " | ".join(s.replace("|", "\\|").replace("\n", " ") for s in r) + " |"  # noqa: E731
    return [cells(header), "|" + "---|" * len(header)] + [cells(r) for r in rows]


def evidence_lines(e: dict) -> list[str]:
    status = item_status(e).upper()
    m = e["measurement"]
    n = f", n = {m['n']}" if m.get("n") is not None else ""
    out = [
        f"- **{e['name']}** ({e['kind']}{'' if e['required'] else ', optional'}): "
        f"{fmt_measurement(m)}{n}; needs {fmt_threshold(e['threshold'])}: **{status}**",
        f"  - measures: {e['definition']}",
        f"  - threshold: {e['threshold']['reason']}",
    ]
    if e.get("controls"):
        parts = [f"{name} {fmt_measurement(cm)} ({_control_words(cm)})" for name, cm in sorted(e["controls"].items())]
        out.append(f"  - controls: {'; '.join(parts)}")
    return out


def _control_words(m: dict) -> str:
    status = item_status(m)
    if status == "pass":
        return "passes: the item cannot tell them apart"
    if status == "fail":
        return "fails, as it should"
    return f"{status}: not shown to fail"


def markdown(report: dict) -> str:
    ck = report["checkpoint"]
    lines = [
        "# assignadd-verify report",
        "",
        f"- checkpoint: `{ck['path']}` ({ck['format']}{_step(ck)})",
        f"- SHA-256: `{ck['sha256']}`",
        f"- task ({report['task_source']}): " + ", ".join(f"{k} = {v}" for k, v in report["task"].items()),
        f"- seed {report['seed']}, pool size {report['n']}, device {report['device']}",
        f"- **{summary_line(report)}**",
    ]
    lines += [f"- {n}" for n in notes(report)]
    lines += [""] + _md_table(HEADER, summary_rows(report))
    if components_lines(report):
        lines += ["", "## Components", "", COMPONENTS_NOTE, ""] + [f"- {x}" for x in components_lines(report)]
    for c in report["claims"]:
        lines += _md_claim_heading(c, c["verdict"].upper()) + [f"Verdict: **{c['verdict']}**: {c['reason']}", ""]
        if c.get("components"):
            lines += [_read_components(c), ""]
        for e in c.get("evidence") or []:
            lines += evidence_lines(e)
        if c.get("controls"):
            lines += ["", "Controls: " + "; ".join(f"*{k}*: {v}" for k, v in sorted(c["controls"].items()))]
    if report.get("interfaces"):
        lines += ["", "## Interfaces", "", INTERFACE_NOTE, ""] + _md_table(INTERFACE_HEADER, interface_rows(report))
    for c in report.get("not_run") or []:
        lines += _md_claim_heading(c, "NOT RUN HERE") + [f"Needs {c['needs']}: run `{c['command']}`."]
    return "\n".join(lines) + "\n"


def _md_claim_heading(claim: dict, verdict: str) -> list[str]:
    """A claim's heading in report.md, its statement quoted under it."""
    return ["", f"## {claim['claim']} — {verdict} ({claim['spec']})", "", f"> {claim['statement']}", ""]


def _read_components(claim: dict) -> str:
    """ "Reads: previous-token head 0.1, fetching head 1.1" for a claim entry that names its components."""
    return "Reads: " + ", ".join(f"{ROLE_NAMES.get(r, r)} {site}" for r, site in claim["components"].items())


# ----- JUnit XML ---------------------------------------------------------------------------------
def junit_xml(report: dict, timings: dict | None = None) -> str:
    """One testcase per claim, classname ``assignadd.claims``: a failed or inconclusive claim is a
    <failure> (type says which), an errored one an <error>, a claim not run here <skipped>; the
    message is the one-line reason, the text the evidence lines."""
    timings = timings or {}
    claim_time = timings.get("claims", {})
    s = report["summary"]
    not_run = report.get("not_run") or []
    suite = ET.Element(
        "testsuite",
        {
            "name": "assignadd-verify",
            "tests": str(s["total"] + len(not_run)),
            "failures": str(len(s["failed"]) + len(s.get("inconclusive", []))),
            "errors": str(len(s["errors"])),
            "skipped": str(len(not_run)),
            "time": f"{sum(claim_time.values()):.3f}",
        },
    )
    props, ck = ET.SubElement(suite, "properties"), report["checkpoint"]
    for k, v in (("checkpoint", ck["path"]), ("sha256", ck["sha256"]), ("seed", report["seed"]), ("n", report["n"])):
        ET.SubElement(props, "property", {"name": k, "value": str(v)})

    def testcase(name: str, seconds: float) -> ET.Element:
        attrs = {"classname": "assignadd.claims", "name": name, "time": f"{seconds:.3f}"}
        return ET.SubElement(suite, "testcase", attrs)

    for c in report["claims"]:
        case = testcase(c["claim"], claim_time.get(c["claim"], 0.0))
        if c["verdict"] != "pass":
            tag = "failure" if c["verdict"] in ("fail", "inconclusive") else "error"
            message = c["reason"].splitlines()[0] if c["reason"] else c["verdict"]
            el = ET.SubElement(case, tag, {"message": message, "type": c["verdict"]})
            el.text = "\n".join(sum((evidence_lines(e) for e in c.get("evidence") or []), [c["reason"]]))
    for c in not_run:
        skipped = f"not run here: needs {c['needs']}; run: {c['command']}"
        ET.SubElement(testcase(c["claim"], 0.0), "skipped", {"message": skipped})
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ----- HTML --------------------------------------------------------------------------------------
# The pieces of the verify report's page that the series and sweep pages share.
def num(*children) -> H.Markup:
    """Numbers, in the tables' monospace."""
    return H.tag("span", *children, class_="num")


def meta(*children) -> H.Markup:
    """Words about a cell's content, in grey: a definition, a threshold's reason."""
    return H.tag("span", *children, class_="meta")


def meta_p(*children, **attrs) -> H.Markup:
    """A paragraph in grey: what a section shows, where the numbers come from."""
    return H.tag("p", *children, class_="meta", **attrs)


def bullets(items) -> H.Markup:
    return H.tag("ul", [H.tag("li", x) for x in items])


def claim_link(claim: str, section: str = "claim") -> H.Markup:
    """A claim's id, linking to its part of the page: ``#claim-<id>`` (or ``#<section>-<id>``)."""
    return H.tag("a", H.breakable(claim), href=f"#{section}-{claim}")


def page_head(title: str, lines: list, schema: str) -> list[H.Markup]:
    """A page's title and, under it, what it was made from: ``lines``, the last one followed by the schema of
    the page's document."""
    about = H.tag("div", H.join(lines, H.tag("br")), "schema ", H.tag("code", schema), class_="meta")
    return [H.tag("h1", title), about]


def _figure(fig) -> H.Markup:
    return H.figure(fig.key, fig.title, fig.caption, fig.png)


def evidence_table(
    evidence: list[dict], *, value, status, control_word, interval: str, result_class: str = "nowrap", note=None
) -> H.Markup:
    """A claim's evidence items as an HTML table: what is measured, the value with its interval, n, the
    threshold with its reason, the result, and the same statistic on each control. The one table of the
    verify report and of the series and sweep pages, which differ only in what they pass here:
    ``value(m)`` the text of a measurement, ``status(e, m)`` the result of item ``e``'s measurement ``m``
    (its own or a control's), ``control_word(e, m)`` the word after a control's value, ``interval`` the
    value column's header, ``note(m)`` a line under the result (or None)."""
    rows = []
    for e in evidence:
        m, threshold = e["measurement"], e["threshold"]
        controls = [
            H.join([H.breakable(k), f": {value(c)} ({control_word(e, c)})"])
            for k, c in sorted((e.get("controls") or {}).items())
        ]
        line = note(m) if note else None
        rows.append(
            [
                [H.tag("b", H.breakable(e["name"])), H.tag("br"), meta(e["definition"])],
                [e["kind"], None if e["required"] else [H.tag("br"), "(optional)"]],
                num(value(m)),
                num(fmt(m.get("n"))),
                [num(fmt_threshold(threshold)), H.tag("br"), meta(threshold["reason"])],
                [H.verdict(status(e, m)), [H.tag("br"), meta(line)] if line else None],
                H.join(controls, H.tag("br")) if controls else "-",
            ]
        )
    return H.table(
        ["evidence", "kind", f"value [{interval}]", "n", "threshold", "result", "controls"],
        rows,
        wide=True,
        cell_classes=["text", "nowrap", None, "nowrap", "text", result_class, "text"],
    )


def claim_heading(claim: str, verdict: str, spec: str) -> H.Markup:
    """A claim's ``h2``: its id, its verdict, its SPEC section; the anchor ``#claim-<id>``."""
    return H.tag("h2", claim, " ", H.verdict(verdict), " ", meta(spec), id=f"claim-{claim}")


def claim_section(claim: dict, table) -> list:
    """A claim as every page shows one (the verify report, the series and sweep pages): its id and verdict,
    the statement, the verdict's reason, ``table(evidence)`` and what each control is."""
    out = [
        claim_heading(claim["claim"], claim["verdict"], claim.get("spec", "")),
        H.tag("blockquote", claim.get("statement", "")),
        H.tag("p", "Verdict ", H.tag("b", claim["verdict"]), f": {claim['reason']}"),
    ]
    if claim.get("components"):
        out.append(meta_p(_read_components(claim)))
    if claim.get("evidence"):
        out.append(table(claim["evidence"]))
    if claim.get("controls"):
        controls = [[H.tag("i", k), f": {v}"] for k, v in sorted(claim["controls"].items())]
        out.append(meta_p("Controls: ", H.join(controls, "; ")))
    return out


def _evidence_table(e_list: list[dict]) -> H.Markup:
    return evidence_table(
        e_list,
        value=fmt_measurement,
        status=lambda e, m: item_status(e),
        control_word=lambda e, c: _control_words(c).split(":")[0],
        interval="95% CI",
    )


def _section(key: str, title: str, note: str, *content) -> list:
    """A section of the verify report's page after the summary: its heading, what it shows, its content."""
    return [H.tag("h2", title, id=key), meta_p(note), *content]


def html_page(report: dict, figures: list | None = None) -> str:
    """One self-contained page (``reports/html.py``: inline styles, figures as base64 PNG, no script,
    no network), every string from the report escaped where it enters."""
    figures = list(figures or [])
    ck = report["checkpoint"]
    about = [
        ["checkpoint ", H.tag("code", ck["path"]), f" ({ck['format']}{_step(ck)})"],
        ["SHA-256 ", H.tag("code", ck["sha256"])],
        f"task ({report['task_source']}): " + ", ".join(f"{k} = {v}" for k, v in report["task"].items()),
        f"seed {report['seed']}, pool size {report['n']}, device {report['device']}, ",
    ]
    body = page_head("assignadd-verify report", about, report["schema"])
    body += [H.tag("p", H.tag("b", summary_line(report)), class_="summary"), [meta_p(n) for n in notes(report)]]
    rows = [
        [claim_link(c["claim"]), H.verdict(c["verdict"]), r[2], num(r[3]), r[4]]
        for c, r in zip(report["claims"], summary_rows(report))
    ]
    for c in report.get("not_run") or []:
        run = ["run: ", H.tag("code", c["command"])]
        rows.append([claim_link(c["claim"]), H.verdict("not-run"), f"needs {c['needs']}", "-", run])
    body.append(H.table(HEADER, rows, cell_classes=["text", "nowrap", "text", "nowrap", "text"]))
    if components_lines(report):
        body += _section("components", "Components", COMPONENTS_NOTE, bullets(components_lines(report)))
    if report.get("interfaces"):
        table = H.table(INTERFACE_HEADER, interface_rows(report), cell_classes=["text", "nowrap", "nowrap", "nowrap"])
        body += _section("interfaces", "Interfaces", INTERFACE_NOTE, table)
    for c in report["claims"]:
        body += claim_section(c, _evidence_table) + [_figure(f) for f in figures if f.claim == c["claim"]]
    for c in report.get("not_run") or []:
        body += [
            claim_heading(c["claim"], "not-run", c["spec"]),
            H.tag("blockquote", c["statement"]),
            H.tag("p", f"Not run on one checkpoint: it needs {c['needs']}. Run ", H.tag("code", c["command"]), "."),
        ]
    claim_ids = {c["claim"] for c in report["claims"]}
    rest = [_figure(f) for f in figures if f.claim not in claim_ids]
    if rest:
        note = "Computed from the checkpoint's weights and activations, for claims not in this run."
        body += _section("model-figures", "Model figures", note, *rest)
    return H.page(f"assignadd-verify: {ck['path']}", *body)


def report_files(report: dict, figures: list, timings: dict) -> dict[str, str]:
    """The files of ``assignadd-verify --out``, by name: report.json, report.md, report.html (with
    ``figures``), junit.xml and timings.json."""
    return {
        "report.json": dumps(report),
        "report.md": markdown(report),
        "report.html": html_page(report, figures),
        "junit.xml": junit_xml(report, timings),
        "timings.json": dumps(clean_json(timings)),
    }
