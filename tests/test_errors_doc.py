"""docs/errors.md documents every one-line error a user can see (issue "One owner per operation").

The messages are read from the source with ``ast``: the first argument of every ``exit_bad_input(...)``
and every ``CheckpointError(...)``, ``InterventionError(...)``, ``ParseError(...)`` and ``TaskError(...)``
in the package. Each message becomes a template: its constant text in order, with every placeholder
(an f-string field, or a non-literal such as ``str(e)``) free to match anything. The doc must hold a
line that matches the template, with the placeholders written as ``<name>``; so a new message, or a
reworded one, without a doc entry fails here.

Messages whose constant text is under ``MIN_CONSTANT`` characters say too little to look for; they
are listed in ``TOO_SHORT`` below (and checked to be exactly those), so a new short message is a
conscious decision too:

- data/tokens.py ``f"sequence {i}: {e}"``: a prefix on another ParseError (documented with to_tokens);
- ``exit_bad_input(str(e))`` in the CLIs: re-prints another error's message (a CheckpointError,
  TrainError, SweepError, SeriesError, ...), so it has no text of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "errors.md"
CALLEES = {"exit_bad_input", "CheckpointError", "InterventionError", "ParseError", "TaskError"}
SKIP_DIRS = {"tests", "bench", "tools", "__pycache__"}
MIN_CONSTANT = 12  # characters of constant text (runs of whitespace counted as one) a message needs

# (file, template with {} for placeholders) of the messages too short to look for; see the docstring.
TOO_SHORT = {
    ("data/tokens.py", "sequence {}: {}"),
    ("training/train_cli.py", "{}"),
    ("training/sweep_cli.py", "{}"),
    ("reports/sweep_report.py", "{}"),
    ("reports/report_cli.py", "{}"),
    ("reports/mutants_cli.py", "{}"),
    ("reports/verify_cli.py", "{}"),
    ("reports/population.py", "{}"),
}


def _source_files():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if any(part.startswith(".") or part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts[:-1]):
            continue
        yield rel.as_posix(), path


def _variants(node) -> list[list[str | None]]:
    """The message's possible forms, each a list of constant strings and None (a placeholder)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [[node.value]]
    if isinstance(node, ast.JoinedStr):
        return [[v.value if isinstance(v, ast.Constant) else None for v in node.values]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [a + b for a in _variants(node.left) for b in _variants(node.right)]
    if isinstance(node, ast.IfExp):
        return _variants(node.body) + _variants(node.orelse)
    return [[None]]


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def messages() -> list[tuple[str, int, str, list[str | None]]]:
    """(file, line, callee, parts) for every message form in the package."""
    found = []
    for rel, path in _source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            if isinstance(node, ast.Call) and _callee(node) in CALLEES and node.args:
                for parts in _variants(node.args[0]):
                    found.append((rel, node.lineno, _callee(node), parts))
    return found


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _template(parts) -> str:
    return "".join("{}" if p is None else p for p in parts)


def _constant_len(parts) -> int:
    return len(_norm("".join(p for p in parts if p is not None)).strip())


def _regex(parts) -> re.Pattern:
    return re.compile("".join(".*?" if p is None else re.escape(_norm(p)) for p in parts))


def test_the_scan_finds_every_kind_of_message():
    kinds = {callee for _, _, callee, _ in messages()}
    assert kinds == CALLEES
    assert len(messages()) > 100


def test_too_short_list_is_exact():
    short = {(rel, _template(parts)) for rel, _, _, parts in messages() if _constant_len(parts) < MIN_CONSTANT}
    assert short == TOO_SHORT


def test_every_error_message_has_a_doc_entry():
    lines = [_norm(line) for line in DOC.read_text(encoding="utf-8").splitlines()]
    missing = []
    for rel, lineno, callee, parts in messages():
        if _constant_len(parts) < MIN_CONSTANT:
            continue
        rx = _regex(parts)
        if not any(rx.search(line) for line in lines):
            missing.append(f"{rel}:{lineno} {callee}: {_template(parts)!r}")
    assert not missing, "docs/errors.md has no entry for:\n" + "\n".join(missing)
