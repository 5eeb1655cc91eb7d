"""One page template and one stylesheet for the HTML reports, with escaping by construction.

A page is built from ``tag(...)`` calls: every string that reaches the page is escaped where it enters,
and only ``Markup`` (what this module's functions return) passes through as HTML. So a claim's reason,
a checkpoint path or a figure caption can hold ``<``, ``&`` or quotes and still reads as text.

    page("assignadd-verify: ck.pt", tag("h1", "Report"), table(["claim", "verdict"], [["x", verdict("pass")]]))

The pages are self-contained: the stylesheet is inline, figures are base64 PNG, no script, no link to the
network. The stylesheet keeps every page readable at 800 px: identifiers wrap after their underscores,
long formulas anywhere, short words and numbers never; a table still too wide scrolls inside its own
box, and figures shrink to the width.
"""

from __future__ import annotations

import base64
import html
from typing import Iterable

STYLESHEET = """
*{box-sizing:border-box}
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1200px;margin:24px auto;
padding:0 16px;color:#222;line-height:1.45;overflow-wrap:break-word}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{font-size:1.05em;margin:1.2em 0 .3em}
.table-wrap{max-width:100%;overflow-x:auto;margin:.6em 0}
table{border-collapse:collapse;font-size:.92em;max-width:100%}
table.wide{width:100%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
td.text,.meta{overflow-wrap:anywhere}td.nowrap{white-space:nowrap}
th{background:#f3f5f7}
.pass{color:#116329;font-weight:bold}.fail{color:#b3261e;font-weight:bold}
.inconclusive{color:#7a5d00;font-weight:bold}.error{color:#8a4b00;font-weight:bold}
.not-run{color:#555;font-weight:bold}
.meta{color:#555;font-size:.92em}.meta code{font-size:.95em}
.summary{font-size:1.15em;margin:.6em 0}
figure{margin:.8em 0 1.2em;display:inline-block;vertical-align:top;max-width:100%}
figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#444;max-width:640px}
blockquote{margin:.4em 0;padding:.3em .8em;border-left:4px solid #d0d7de;color:#333;background:#fafbfc}
code{background:#f3f5f7;padding:0 3px;border-radius:3px}
.num{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.95em}
@media (max-width:900px){body{margin:12px auto;padding:0 8px}th,td{padding:3px 5px}}
"""

VERDICT_CLASSES = ("pass", "fail", "inconclusive", "error", "not-run")


class Markup(str):
    """A string of HTML this module built; any other string is text, escaped where it enters a page."""

    __slots__ = ()


def escape(x) -> Markup:
    """Text as HTML (``<`` to ``&lt;``, quotes too); ``Markup`` unchanged; None as nothing."""
    if x is None:
        return Markup("")
    if isinstance(x, Markup):
        return x
    return Markup(html.escape(str(x), quote=True))


def _children(children) -> Markup:
    """Text escaped, Markup as it is, any other iterable (a list, a generator) flattened."""
    nested = [_children(c) if hasattr(c, "__iter__") and not isinstance(c, str) else escape(c) for c in children]
    return Markup("".join(nested))


def tag(name: str, /, *children, **attrs) -> Markup:
    """``<name attrs>children</name>``. Attribute names: ``class_`` for ``class``, ``_`` for ``-``;
    a None or False value leaves the attribute out, True writes it bare. Children may be text
    (escaped), Markup, None (nothing) or lists of these."""
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        parts.append(key if value is True else f'{key}="{escape(value)}"')
    opening = "<" + " ".join(parts) + ">"
    if name in ("img", "meta", "br", "link"):
        return Markup(opening)
    return Markup(f"{opening}{_children(children)}</{name}>")


def join(parts: Iterable, sep="") -> Markup:
    """The parts (text escaped) joined by ``sep`` (text escaped too, unless Markup)."""
    return Markup(escape(sep).join(_children([p]) for p in parts))


def breakable(text: str) -> Markup:
    """An identifier (``restricted_slot_generalization``) that may wrap after its underscores and slashes."""
    return Markup(escape(text).replace("_", "_<wbr>").replace("/", "/<wbr>"))


def verdict(v: str) -> Markup:
    """A verdict word, coloured by its class: PASS, FAIL, INCONCLUSIVE, ERROR, NOT RUN."""
    cls = v if v in VERDICT_CLASSES else "error"
    return tag("span", v.replace("-", " ").upper(), class_=cls)


def table(header: list, rows: Iterable[list], *, cell_classes: list | None = None, wide: bool = False) -> Markup:
    """A table in a box that scrolls sideways when the page is narrower than the table."""
    body = []
    for row in rows:
        cells = [
            tag("td", cell, class_=(cell_classes[i] if cell_classes and i < len(cell_classes) else None))
            for i, cell in enumerate(row)
        ]
        body.append(tag("tr", cells))
    inner = tag(
        "table",
        tag("thead", tag("tr", [tag("th", h) for h in header])),
        tag("tbody", body),
        class_="wide" if wide else None,
    )
    return tag("div", inner, class_="table-wrap")


def figure(key: str, title: str, caption, png: bytes | None) -> Markup:
    """A figure as a base64 PNG with its caption (text or Markup); a paragraph when there is no image."""
    if not png:
        return tag("p", tag("b", title), ": ", caption, class_="meta", id=f"fig-{key}")
    data = base64.b64encode(png).decode("ascii")
    return tag(
        "figure",
        tag("img", alt=title, src=f"data:image/png;base64,{data}"),
        tag("figcaption", tag("b", f"{title}."), " ", caption),
        id=f"fig-{key}",
    )


def page(title: str, *body) -> str:
    """The whole document: doctype, inline stylesheet, the body parts in order."""
    head = tag(
        "head",
        tag("meta", charset="utf-8"),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("title", title),
        tag("style", Markup(STYLESHEET)),
    )
    return "<!DOCTYPE html>\n" + tag("html", head, tag("body", list(body)), lang="en") + "\n"
