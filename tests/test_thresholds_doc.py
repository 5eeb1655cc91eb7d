"""docs/thresholds.md and the generated blocks of docs/hypotheses.md are rendered from the claims' own
Evidence and Threshold objects (tools/thresholds_doc.py) and must match them; a current bar is stated
nowhere else in docs/hypotheses.md."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "thresholds_doc.py"
FIX = "run: python tools/thresholds_doc.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("thresholds_doc", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(tool):
    return tool.claim_results()  # runs every claim once (tens of seconds); shared by the tests below


@pytest.fixture(scope="module")
def committed(tool):
    return tool.read(tool.HYPOTHESES)


def test_thresholds_page_matches_the_code(tool, results):
    assert tool.read(tool.DOC) == tool.render(results), FIX


def test_hypotheses_blocks_match_the_code(tool, results, committed):
    assert tool.stale_blocks(committed, results) == [], FIX
    assert tool.render_hypotheses(committed, results) == committed, FIX


def test_every_registered_claim_has_one_block(tool, committed):
    from assignadd.hypotheses import REGISTRY

    ids = [c for c, _, _ in tool.blocks(committed)]
    assert sorted(ids) == sorted(REGISTRY)
    tool.check_blocks(tool.blocks(committed))


def test_each_block_lists_every_item_with_its_bar(tool, results, committed):
    by_claim = {c: committed[start:end] for c, start, end in tool.blocks(committed)}
    for r in results:
        for e in r.evidence:
            t = e.threshold
            row = f"| `{e.name}` | {e.kind} | {'yes' if e.required else 'no'} | {t.bound} {t.direction} {t.value:g} |"
            assert row in by_claim[r.claim], f"{r.claim}: no row {row!r}"


def _first_block_bar(tool, text):
    """The first '| lower >= X |' bar inside the first generated block, and its offset in ``text``."""
    claim, start, end = tool.blocks(text)[0]
    m = re.search(r"\| (lower >=|upper <=) ([0-9.e+-]+) \|", text[start:end])
    assert m, f"no bar found in the block for {claim}"
    return claim, start + m.start(2), m.group(2)


def test_a_hand_edited_bar_inside_a_block_is_detected(tool, results):
    text = tool.render_hypotheses(tool.read(tool.HYPOTHESES), results)
    claim, at, value = _first_block_bar(tool, text)
    edited = text[:at] + f"{float(value) - 0.05:g}" + text[at + len(value) :]
    assert edited != text
    assert tool.stale_blocks(edited, results) == [claim]
    assert tool.render_hypotheses(edited, results) == text  # rewriting puts the code's bar back


def test_text_outside_the_blocks_is_kept_byte_for_byte(tool, results):
    text = tool.read(tool.HYPOTHESES)
    claim, start, end = tool.blocks(text)[0]
    edited = (
        "Hand-written line with a trailing space \n"
        + text[:start]
        + "stale content\n"
        + text[start:end]
        + text[end:]
        + "\nlast line without newline"
    )
    out = tool.render_hypotheses(edited, results)
    assert tool.outside_blocks(out) == tool.outside_blocks(edited)
    assert tool.stale_blocks(out, results) == []


def test_a_block_for_an_unknown_claim_fails_loudly(tool, results, committed):
    text = committed + "\n<!-- generated:items no_such_claim -->\n<!-- end generated -->\n"
    with pytest.raises(tool.DocError, match="unknown claim.*no_such_claim"):
        tool.render_hypotheses(text, results)


def test_a_registered_claim_without_a_block_fails_loudly(tool, results, committed):
    claim, start, end = tool.blocks(committed)[-1]
    begin = committed.rindex("<!-- generated:items", 0, start)
    text = committed[:begin] + committed[end + len(tool.END) :]
    with pytest.raises(tool.DocError, match=f"no generated block for registered claim.*{claim}"):
        tool.render_hypotheses(text, results)


@pytest.mark.parametrize(
    "broken, message",
    [
        ("<!-- generated:items identity_qk -->\nx\n", "never closed"),
        ("x\n<!-- end generated -->\n", "without"),
        ("<!-- generated:items  -->\n<!-- end generated -->\n", "malformed marker"),
    ],
)
def test_malformed_markers_fail_loudly(tool, broken, message):
    with pytest.raises(tool.DocError, match=message):
        tool.blocks(broken)


def test_a_claim_with_two_blocks_fails_loudly(tool, results, committed):
    text = committed + "\n<!-- generated:items identity_qk -->\n<!-- end generated -->\n"
    with pytest.raises(tool.DocError, match="more than one generated block for identity_qk"):
        tool.render_hypotheses(text, results)


BAR = re.compile(r"(≥|≤|>=|<=)\s*[0-9]")


def _bar_rows(text: str, names: set[str]) -> list[str]:
    """Table rows whose first cell is a generated item's name (`name` alone, or `name` followed by words
    and a bar such as '≥ 0.90' in the row): the form a hand-written bar table takes."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ", 1)[0][2:]
        name = first.split("`")[1]
        if name in names and (first.strip() == f"`{name}`" or BAR.search(line)):
            rows.append(line)
    return rows


def test_no_hand_written_bar_rows_outside_the_blocks(tool, results, committed):
    names = {e.name for r in results for e in r.evidence}
    assert _bar_rows(tool.outside_blocks(committed), names) == [], (
        "docs/hypotheses.md states an item's bar by hand; the current bars belong in the generated blocks"
    )


def test_the_bar_row_check_catches_a_hand_written_table(tool, results, committed):
    # The check above is only worth something if it would see the tables the blocks replaced.
    names = {e.name for r in results for e in r.evidence}
    old = (
        "| item | kind | statistic | threshold | why |\n|---|---|---|---|---|\n"
        "| `single_frequency_neurons` | observational | fraction of live neurons | ≥ 0.5 | a majority |\n"
        "| `ov2_additivity` (supporting, not required) | observational | mean_i cos | ≥ 0.70 | nulls |\n"
        "| `minimality[mlp_adds]` (0.956 → 0.000) | 1.018 [1.018, 1.018] | 1.014 |\n"
    )
    rows = _bar_rows(tool.outside_blocks(committed + old), names)
    assert [r.split(" | ")[0] for r in rows] == [
        "| `single_frequency_neurons`",
        "| `ov2_additivity` (supporting, not required)",
    ]
