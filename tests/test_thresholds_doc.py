"""docs/thresholds.md and the generated block of each claim page (docs/claims/CLAIM_ID.md) are rendered
from the claims' own declarations and Threshold objects (tools/thresholds_doc.py) and must match them; a
current bar is stated nowhere else on a claim page or in docs/hypotheses.md."""

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
    return tool.claim_results()  # the declared items, and the series and sweep claims on synthetic data


@pytest.fixture(scope="module")
def pages(tool):
    return tool.committed_pages()


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_every_claim_is_listed_series_and_sweep_claims_included(tool, results):
    from assignadd.hypotheses import REGISTRY

    ids = [r.claim for r in results]
    assert ids == list(tool.registry())
    assert set(REGISTRY) < set(ids)
    assert {"learning_phases", "data_requirements"} <= set(ids)


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_thresholds_page_matches_the_code(tool, results):
    assert tool.read(tool.DOC) == tool.render(results), FIX


def test_every_claim_has_one_page_with_its_own_block(tool, pages):
    assert sorted(pages) == sorted(tool.registry())
    for claim, text in pages.items():
        assert [c for c, _, _ in tool.blocks(text)] == [claim]


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_claim_pages_match_the_code(tool, results, pages):
    stale = [c for c, text in pages.items() if tool.is_stale(c, text, results)]
    assert stale == [], FIX


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_each_block_lists_every_item_with_its_bar(tool, results, pages):
    for r in results:
        _, start, end = tool.blocks(pages[r.claim])[0]
        block = pages[r.claim][start:end]
        for e in r.evidence:
            t = e.threshold
            row = f"| `{e.name}` | {e.kind} | {'yes' if e.required else 'no'} | {t.bound} {t.direction} {t.value:g} |"
            assert row in block, f"{r.claim}: no row {row!r}"


def _first_block_bar(tool, text):
    """The first '| lower >= X |' bar inside the page's block, and its offset in ``text``."""
    claim, start, end = tool.blocks(text)[0]
    m = re.search(r"\| (lower >=|upper <=) ([0-9.e+-]+) \|", text[start:end])
    assert m, f"no bar found in the block for {claim}"
    return claim, start + m.start(2), m.group(2)


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_a_hand_edited_bar_inside_a_block_is_detected(tool, results, pages):
    text = pages["identity_qk"]
    claim, at, value = _first_block_bar(tool, text)
    edited = text[:at] + f"{float(value) - 0.05:g}" + text[at + len(value) :]
    assert edited != text
    assert tool.is_stale(claim, edited, results)
    assert tool.render_page(claim, edited, results) == text  # rewriting puts the code's bar back


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_text_outside_the_block_is_kept_byte_for_byte(tool, results, pages):
    text = pages["shared_residual"]
    _, start, end = tool.blocks(text)[0]
    edited = (
        "Hand-written line with a trailing space \n"
        + text[:start]
        + "stale content\n"
        + text[start:end]
        + text[end:]
        + "\nlast line without newline"
    )
    out = tool.render_page("shared_residual", edited, results)
    assert tool.outside_blocks(out) == tool.outside_blocks(edited)
    assert not tool.is_stale("shared_residual", out, results)


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_a_page_with_another_claims_block_fails_loudly(tool, results, pages):
    text = pages["identity_qk"].replace("generated:items identity_qk", "generated:items shared_residual")
    with pytest.raises(tool.DocError, match="identity_qk.md: generated block.*shared_residual"):
        tool.render_page("identity_qk", text, results)


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_a_page_without_a_block_fails_loudly(tool, results, pages):
    text = pages["identity_qk"]
    _, start, end = tool.blocks(text)[0]
    begin = text.rindex("<!-- generated:items", 0, start)
    with pytest.raises(tool.DocError, match="identity_qk.md: no generated block"):
        tool.render_page("identity_qk", text[:begin] + text[end + len(tool.END) :], results)


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_a_page_with_two_blocks_fails_loudly(tool, results, pages):
    text = pages["identity_qk"] + "\n<!-- generated:items identity_qk -->\n<!-- end generated -->\n"
    with pytest.raises(tool.DocError, match="more than one generated block for identity_qk"):
        tool.render_page("identity_qk", text, results)


def test_a_missing_or_unknown_page_fails_loudly(tool):
    ids = set(tool.registry())
    with pytest.raises(tool.DocError, match="no page docs/claims/CLAIM_ID.md for claim.*identity_qk"):
        tool.check_pages(ids - {"identity_qk"})
    with pytest.raises(tool.DocError, match="unknown claim.*no_such_claim"):
        tool.check_pages(ids | {"no_such_claim"})


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


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_no_hand_written_bar_rows_outside_the_blocks(tool, results, pages):
    names = {e.name for r in results for e in r.evidence}
    for claim, text in pages.items():
        assert _bar_rows(tool.outside_blocks(text), names) == [], (
            f"docs/claims/{claim}.md states an item's bar by hand; the current bars belong in the generated block"
        )
    index = tool.read(tool.DOCS / "hypotheses.md")
    assert _bar_rows(index, names) == [], "docs/hypotheses.md states an item's bar by hand"


@pytest.mark.slow
@pytest.mark.xdist_group("thresholds_doc_results")
def test_the_bar_row_check_catches_a_hand_written_table(tool, results, pages):
    # The check above is only worth something if it would see the tables the blocks replaced.
    names = {e.name for r in results for e in r.evidence}
    old = (
        "| item | kind | statistic | threshold | why |\n|---|---|---|---|---|\n"
        "| `single_frequency_neurons` | observational | fraction of live neurons | ≥ 0.5 | a majority |\n"
        "| `ov2_additivity` (supporting, not required) | observational | mean_i cos | ≥ 0.70 | nulls |\n"
        "| `minimality[mlp_adds]` (0.956 → 0.000) | 1.018 [1.018, 1.018] | 1.014 |\n"
    )
    rows = _bar_rows(tool.outside_blocks(pages["fourier_neurons"] + old), names)
    assert [r.split(" | ")[0] for r in rows] == [
        "| `single_frequency_neurons`",
        "| `ov2_additivity` (supporting, not required)",
    ]
