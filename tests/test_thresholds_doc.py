"""docs/thresholds.md is generated from the claims' own Threshold objects and must match them."""
from __future__ import annotations

import importlib.util
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "thresholds_doc.py"


def test_thresholds_page_matches_the_code():
    spec = importlib.util.spec_from_file_location("thresholds_doc", TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.DOC.read_text() == tool.render(), "run: python tools/thresholds_doc.py"
