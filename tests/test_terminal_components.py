"""``assignadd-verify``'s terminal names the components the claims found, on one line under the table:
from report.json's ``components`` on a variant, from the located components on the paper's layout (which
report.json leaves out). Pure rendering: no model, no torch."""

from __future__ import annotations

from assignadd.reports import render

from .test_verify_report import claim, report

PAPER = {  # Located.to_dict() on the paper's layout: one candidate per role
    "previous_token_head": {
        "found": "0.0",
        "score": 0.974861,
        "runner_up": None,
        "runner_up_score": None,
        "candidates": 1,
        "silent_heads": 0,
        "how": "searched",
    },
    "fetching_head": {
        "found": "1.0",
        "score": 0.72502,
        "runner_up": None,
        "runner_up_score": None,
        "candidates": 1,
        "silent_heads": 0,
        "how": "searched",
    },
    "adding_mlp": {
        "found": "1",
        "score": 0.9605,
        "runner_up": None,
        "runner_up_score": None,
        "candidates": 1,
        "silent_heads": 0,
        "how": "searched",
    },
}
TWO_HEADS = {
    **PAPER,
    "previous_token_head": {
        "found": "0.1",
        "score": 0.975118,
        "runner_up": "0.0",
        "runner_up_score": 0.193919,
        "candidates": 2,
        "silent_heads": 0,
        "how": "searched",
    },
    "fetching_head": {
        "found": "1.1",
        "score": 0.73983,
        "runner_up": "1.0",
        "runner_up_score": 0.12564,
        "candidates": 2,
        "silent_heads": 1,
        "how": "searched",
    },
}


def test_the_papers_layout_is_one_short_line():
    assert render.components_line(PAPER) == (
        "components (layer.head from 0): previous-token head 0.0 (score 0.975), fetching head 1.0 (score 0.725), "
        "adding MLP 1 (score 0.961); one candidate each"
    )


def test_a_variant_names_each_runner_up_with_its_score():
    assert render.components_line(TWO_HEADS) == (
        "components (layer.head from 0): previous-token head 0.1 (score 0.975; runner-up 0.0 at 0.194), "
        "fetching head 1.1 (score 0.74; runner-up 1.0 at 0.126; 1 silent head left out), adding MLP 1 (score 0.961)"
    )


def test_given_components_say_so():
    given = {role: {**r, "score": None, "candidates": 1, "how": "given"} for role, r in PAPER.items()}
    assert render.components_line(given) == (
        "components (layer.head from 0): previous-token head 0.0 (given with --components), fetching head 1.0 "
        "(given with --components), adding MLP 1 (given with --components)"
    )


def test_the_line_sits_under_the_table_from_the_report_or_else_from_the_located_components():
    r = report([claim("a", "pass")])
    assert "components" not in render.terminal_table(r)  # the report dict alone, naming none: no line
    lines = render.terminal_table(r, PAPER).splitlines()
    at = lines.index(render.components_line(PAPER))
    assert at == 2 + len(render.summary_rows(r)) + 1 and lines[at - 1] == lines[at + 1] == ""  # under the table
    r["components"] = TWO_HEADS  # a variant: report.json names them, and they win
    assert render.components_line(TWO_HEADS) in render.terminal_table(r, PAPER)
    assert render.components_line(PAPER) not in render.terminal_table(r, PAPER)
