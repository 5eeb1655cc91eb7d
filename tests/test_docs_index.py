"""docs/README.md indexes every page, and every relative link in the README and docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return sorted([ROOT / "README.md", *DOCS.rglob("*.md")])


def test_every_relative_link_resolves():
    broken = []
    for page in _pages():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "links to nothing: " + "; ".join(broken)


def test_the_index_lists_every_page_and_folder_of_docs():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = {(DOCS / t.split("#", 1)[0]).resolve() for t in LINK.findall(index)}
    top = [p for p in DOCS.iterdir() if p.name != "README.md" and (p.is_dir() or p.suffix == ".md")]
    missing = sorted(p.name for p in top if p.resolve() not in linked)
    assert not missing, f"docs/README.md does not list: {', '.join(missing)}"
