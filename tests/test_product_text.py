"""The product describes the software and its measurements, never how it was built: no code comment,
docstring or document outside tests/ names the sessions, helpers or reviewers of its development. Dates
and commits are fine where a figure needs them. The product's own meanings of the words are allowed:
the module ``hypotheses/session.py`` (``hypotheses.session``) and pytest's fixture scope
``scope="session"``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import assignadd

ROOT = Path(assignadd.__file__).resolve().parent

PROCESS = re.compile(
    r"session [0-9]|this session|next session|earlier session|previous session|a helper|helpers?\b.*review"
    r"|referee|reviewer",
    re.IGNORECASE,
)
# the product's own names that contain the words: removed from a line before it is searched
OWN_MEANINGS = re.compile(r"""hypotheses[/.]session(\.py)?|scope\s*=\s*["']session["']""")


def _tracked_files() -> list[str]:
    """The repository's tracked .py and .md files outside tests/ and .ci/."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git clone of the repository")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py", "*.md"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    return [p for p in out.split("\0") if p and not p.startswith(("tests/", ".ci/"))]


def process_lines(text: str) -> list[str]:
    """The lines of ``text`` that speak of the development process."""
    return [line.strip() for line in text.splitlines() if PROCESS.search(OWN_MEANINGS.sub("", line))]


@pytest.mark.parametrize(
    "line",
    [
        "measured in session 9 (2026-12-02)",
        "the code of the previous session",
        "A referee's 63 mutants",
        "a helper, reading the code",
        "the helpers' review of the engine",
        "as the reviewer asked",
    ],
)
def test_the_check_sees_development_narration(line):
    assert process_lines(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        '@pytest.fixture(scope="session")',
        "from assignadd.hypotheses.session import task_for",
        "hypotheses/session.py forks the claim workers",
        "ActivationCache helpers such as decompose_resid",
    ],
)
def test_the_products_own_meanings_are_allowed(line):
    assert process_lines(line) == []


def test_no_tracked_file_outside_tests_narrates_its_development():
    found = []
    for rel in _tracked_files():
        path = ROOT / rel
        if not path.is_file():
            continue
        for line in process_lines(path.read_text(encoding="utf-8", errors="replace")):
            found.append(f"{rel}: {line[:120]}")
    assert found == [], "development-process words in the product:\n" + "\n".join(found)
