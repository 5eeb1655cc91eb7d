"""Write the bars of every claim from the claims themselves: each evidence item with its kind, whether it
decides, its bar, its definition and the bar's reason, read from the ``Evidence`` and ``Threshold``
objects the claim modules build (the one place each bar is stated).

One run rewrites two places from the same per-claim rendering (``render_claim``):

- ``docs/thresholds.md``, entirely: every claim's items and bars on one page;
- ``docs/claims/CLAIM_ID.md``, one page per claim, only between the markers
  ``<!-- generated:items CLAIM_ID -->`` and ``<!-- end generated -->``; everything outside them is kept
  byte for byte. Every claim (per checkpoint, over a series, over a sweep) must have its page, and each
  page exactly one block, naming its own claim.

The per-checkpoint claims' items are read from their declarations (``Hypothesis.items``), nothing
measured. ``learning_phases`` builds its items on a synthetic series with the three phases
and ``data_requirements`` on a synthetic sweep of both parameters: their definitions and bars do not
depend on the values either.

tests/test_thresholds_doc.py checks that the committed files are what this writes.

    python tools/thresholds_doc.py            # rewrite docs/thresholds.md and the blocks of docs/claims/
"""

from __future__ import annotations

import math
import re
import sys
from functools import lru_cache
from pathlib import Path

import torch

DOCS = Path(__file__).resolve().parent.parent / "docs"
DOC = DOCS / "thresholds.md"
CLAIMS = DOCS / "claims"

BEGIN = re.compile(r"^<!-- generated:items (?P<claim>\S+) -->$")
END = "<!-- end generated -->"
_MARKER = re.compile(r"^<!-- (generated|end generated)\b")


class DocError(ValueError):
    """A claim page's generated block does not match the registry (unknown, missing, malformed)."""


def registry() -> dict:
    """Every claim class by id, in the order the docs list them: the per-checkpoint claims, then the
    series claim, then the sweep claim."""
    from assignadd.hypotheses import REGISTRY
    from assignadd.hypotheses.data_requirements import SWEEP_REGISTRY
    from assignadd.hypotheses.learning_phases import SERIES_REGISTRY

    return {**REGISTRY, **SERIES_REGISTRY, **SWEEP_REGISTRY}


def page(claim: str) -> Path:
    """The claim's page, ``docs/claims/CLAIM_ID.md``."""
    return CLAIMS / f"{claim}.md"


def synthetic_series(spacing: int = 100, last: int = 20_000) -> list[dict]:
    """A series in which the three phases of ``learning_phases`` happen as the paper describes (addition
    near step 2,000, a sharp assignment jump near 5,000, restricted slots near 12,000), built from the
    claim's own phase curves. Only the items it builds are used here, not its verdict."""
    from assignadd.hypotheses.learning_phases import PHASES

    centre = {0: 2_000, 1: 5_000, 2: 12_000}
    width = {0: 300, 1: 40, 2: 300}
    records = []
    for step in range(0, last + 1, spacing):
        values = {}
        for i, phase in enumerate(PHASES):
            for name in phase.curve:
                values[name] = 1 / (1 + math.exp(-(step - centre[i]) / width[i]))
        records.append({"step": step, "values": values})
    return records


def synthetic_sweep() -> dict:
    """Scored points of both halves of ``data_requirements``: three seeds over the pre-registered grid,
    generalizing from the paper's value on. Only the items they build are used here."""
    from assignadd.hypotheses.data_requirements import METRICS, PAPER, PREREGISTERED_GRID, PointResult

    out = {}
    for param, grid in PREREGISTERED_GRID.items():
        out[param] = []
        for seed in (0, 1, 2):
            for value in grid:
                acc = 0.99 if value >= PAPER[param] else 0.5
                f, r = (value, 1.0) if param == "f" else (0.7, value)
                name = f"{param}={value:g}_seed={seed}"
                out[param].append(PointResult(name, param, value, seed, f, r, METRICS[param], acc, acc, acc, 1000))
    return out


@lru_cache(maxsize=1)
def claim_results() -> tuple:
    """Every claim's items, in ``registry()`` order: the per-checkpoint claims' as they declare them
    (``Hypothesis.items``, texts filled at the paper's components for the default n, 2000, the one
    reports use: some definitions name the pool size), nothing measured; the series claim's as it builds
    them on ``synthetic_series()``, the sweep claim's on ``synthetic_sweep()``."""
    from types import SimpleNamespace

    from assignadd.hypotheses import REGISTRY
    from assignadd.hypotheses.data_requirements import DataRequirements
    from assignadd.hypotheses.declaration import fill
    from assignadd.hypotheses.learning_phases import LearningPhases
    from assignadd.model.components import PAPER

    torch.set_num_threads(1)
    results = []
    for cid, cls in REGISTRY.items():
        fields = cls.fields(PAPER, 2000)
        rows = [
            SimpleNamespace(
                name=i.name,
                kind=i.kind.value,
                required=i.required,
                threshold=i.threshold,
                definition=fill(i.definition, fields),
            )
            for i in cls.items
        ]
        results.append(SimpleNamespace(claim=cid, evidence=rows, reason="declares no items"))
    results.append(LearningPhases().run_series(synthetic_series()))
    results.append(DataRequirements().run_results(synthetic_sweep()))
    empty = [f"{r.claim} ({r.reason})" for r in results if not r.evidence]
    if empty:
        raise RuntimeError("a claim built no evidence items, so its bars cannot be listed: " + "; ".join(empty))
    return tuple(results)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def module_path(claim: str) -> str:
    """The claim's module as a path in the package, e.g. ``hypotheses/identity_qk.py``."""
    return registry()[claim].__module__.split(".", 1)[1].replace(".", "/") + ".py"


def _bar(e) -> str:
    t = e.threshold
    return f"{t.bound} {t.direction} {t.value:g}"


SAME_REASON = "as the row above"


def render_claim(result) -> str:
    """One claim's items (name, kind, decides, bar, definition, reason) and its controls, as Markdown.
    The only full rendering of a claim's bars. A reason the item shares with the item before it (the
    parts of one family of items) is written once."""
    cls = registry()[result.claim]
    lines = ["| item | kind | decides | bar | definition | reason |", "|---|---|---|---|---|---|"]
    previous = None
    for e in result.evidence:
        reason = _cell(e.threshold.reason)
        lines.append(
            f"| `{e.name}` | {e.kind} | {'yes' if e.required else 'no'} | {_bar(e)} | "
            f"{_cell(e.definition)} | {SAME_REASON if reason == previous else reason} |"
        )
        previous = reason
    if cls.controls:
        lines += ["", "Controls: " + "; ".join(f"`{c}`: {d}" for c, d in sorted(cls.controls.items())) + "."]
    return "\n".join(lines) + "\n"


def render(results=None) -> str:
    """docs/thresholds.md: every claim's items and bars, one table per claim; definitions and reasons
    are on the claim's page."""
    reg = registry()
    results = claim_results() if results is None else results
    lines = [
        "# Thresholds",
        "",
        "Generated by `python tools/thresholds_doc.py` from the `Threshold` objects in `hypotheses/`: the bars",
        "are stated once, in code, and this page and the claim pages are checked against them",
        "(`tests/test_thresholds_doc.py`). An item *decides* when it is required; supporting items are shown",
        "in reports but never decide. A bar is compared with the lower bound of the item's interval for `>=`",
        "and the upper bound for `<=`. Each item's definition and the reason for its bar: the claim's page.",
        "",
    ]
    for r in results:
        lines += [
            f"## [`{r.claim}`](claims/{r.claim}.md) ({reg[r.claim].spec})",
            "",
            "| item | kind | decides | bar |",
            "|---|---|---|---|",
        ]
        lines += [f"| `{e.name}` | {e.kind} | {'yes' if e.required else 'no'} | {_bar(e)} |" for e in r.evidence]
        lines.append("")
    return "\n".join(lines)


def render_block(result) -> str:
    """What goes between a claim's markers on its page."""
    return (
        f"*Generated from `{module_path(result.claim)}` by `python tools/thresholds_doc.py`; edit the code, "
        f"not this block.*\n\n" + render_claim(result)
    )


def blocks(text: str) -> list[tuple[str, int, int]]:
    """The generated blocks of ``text``: (claim id, start, end) with text[start:end] the content between
    the begin marker's line and the end marker's line. Raises DocError on a malformed marker, a block
    left open, a nested block or an end marker without a begin."""
    found, open_claim, start, pos = [], None, 0, 0
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        bare = line.rstrip("\n")
        m = BEGIN.match(bare)
        if m:
            if open_claim is not None:
                raise DocError(f"line {n}: block for {m['claim']!r} opens inside the block for {open_claim!r}")
            open_claim, start = m["claim"], pos + len(line)
        elif bare == END:
            if open_claim is None:
                raise DocError(f"line {n}: {END} without a <!-- generated:items CLAIM_ID --> before it")
            found.append((open_claim, start, pos))
            open_claim = None
        elif _MARKER.match(bare):
            raise DocError(
                f"line {n}: malformed marker {bare!r}; expected '<!-- generated:items CLAIM_ID -->' "
                f"or {END!r} on a line of its own"
            )
        pos += len(line)
    if open_claim is not None:
        raise DocError(f"the block for {open_claim!r} is never closed with {END}")
    return found


def check_page(claim: str, found: list[tuple[str, int, int]]) -> None:
    """A claim's page holds exactly one block, and it names that claim."""
    name = f"claims/{claim}.md"
    ids = [c for c, _, _ in found]
    if not ids:
        raise DocError(
            f"{name}: no generated block; add '<!-- generated:items {claim} -->' and '{END}' lines to the page"
        )
    other = sorted({c for c in ids if c != claim})
    if other:
        raise DocError(f"{name}: generated block(s) for {', '.join(other)}; a page holds only its own claim's")
    if len(ids) > 1:
        raise DocError(f"{name}: more than one generated block for {claim}")


def check_pages(existing: set[str]) -> None:
    """Every claim has a page and every page is a claim's; ``existing``: the claim ids of the pages found."""
    reg = registry()
    missing = [c for c in reg if c not in existing]
    if missing:
        raise DocError(f"no page docs/claims/CLAIM_ID.md for claim(s) {', '.join(missing)}")
    unknown = sorted(existing - set(reg))
    if unknown:
        raise DocError(f"docs/claims/ has a page for unknown claim(s) {', '.join(unknown)}; known: {', '.join(reg)}")


def render_page(claim: str, text: str, results=None) -> str:
    """``text`` (the claim's page) with its generated block replaced by the claim's render; the rest
    unchanged."""
    results = claim_results() if results is None else results
    by_claim = {r.claim: r for r in results}
    found = blocks(text)
    check_page(claim, found)
    _, start, end = found[0]
    return text[:start] + render_block(by_claim[claim]) + text[end:]


def is_stale(claim: str, text: str, results=None) -> bool:
    """Whether the claim's block in ``text`` differs from what the code renders."""
    return render_page(claim, text, results) != text


def outside_blocks(text: str) -> str:
    """``text`` with the content of every generated block left out (the markers kept)."""
    pos, kept = 0, []
    for _, start, end in blocks(text):
        kept.append(text[pos:start])
        pos = end
    kept.append(text[pos:])
    return "".join(kept)


def read(path: Path) -> str:
    """A file's text exactly as stored (no newline translation)."""
    return path.read_bytes().decode("utf-8")


def committed_pages() -> dict[str, str]:
    """The claim pages as stored, by claim id; checks that every claim has one and no other page exists."""
    pages = {p.stem: read(p) for p in sorted(CLAIMS.glob("*.md"))}
    check_pages(set(pages))
    return pages


def main() -> None:
    from assignadd.fileio import atomic_write

    results = claim_results()
    pages = {c: render_page(c, text, results) for c, text in committed_pages().items()}  # fails before writing
    atomic_write(DOC, render(results))
    for claim, text in pages.items():
        atomic_write(page(claim), text)
    print(f"wrote {DOC} and the generated blocks of {len(pages)} pages in {CLAIMS}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except DocError as e:
        sys.exit(f"thresholds_doc: {e}")
