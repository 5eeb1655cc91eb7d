"""report.html in a real browser: headless Chromium loads the one file, offline, and every figure decodes.

Run alone with ``python -m pytest tests/test_verify_html.py`` (``make html-check``). Set
``ASSIGNADD_SCREENSHOT=path.png`` to keep a screenshot of the page for a look by eye.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from assignadd.hypotheses import REGISTRY, register
from assignadd.model import AssignAddTransformer, save_checkpoint
from assignadd.reports.verify_cli import main

from .test_verify_cli import FAIL, PASS, _FakeFail, _FakePass

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
)

# Written into a copy of the page: after the load event, record every <img>'s decoded width in the DOM.
PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var pre = document.createElement('pre');
  pre.id = 'img-check';
  pre.textContent = JSON.stringify({n: imgs.length, loaded: imgs.length - bad.length,
                                    bad: bad.map(function (i) { return i.alt; }),
                                    widths: imgs.map(function (i) { return i.naturalWidth; })});
  document.body.appendChild(pre);
});
</script>"""


def chromium(*args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        return subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    for cls in (_FakePass, _FakeFail):
        register(cls)
    try:
        d = tmp_path_factory.mktemp("html")
        ckpt = d / "step_000100.pt"
        save_checkpoint(AssignAddTransformer(seed=3), ckpt, step=100)
        assert main([str(ckpt), "--only", f"{PASS},{FAIL}", "--out", str(d / "out"), "--quiet", "--n", "50"]) == 1
        return d / "out" / "report.html"
    finally:
        for cls in (_FakePass, _FakeFail):
            REGISTRY.pop(cls.id, None)


def test_every_figure_in_report_html_loads_in_headless_chromium(report_html, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(report_html.read_text().replace("</body>", PROBE + "</body>"))
    p = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="img-check">(.*?)</pre>', p.stdout, re.S)
    assert found, f"the probe never ran (chromium exit {p.returncode}): {p.stderr[-2000:]}"
    result = json.loads(html.unescape(found.group(1)))
    assert result["n"] == 7 + 2  # the model figures and one forest plot per claim with evidence
    assert result["bad"] == [] and result["loaded"] == result["n"]
    assert min(result["widths"]) >= 200


def test_report_html_renders_to_a_screenshot(report_html, tmp_path):
    shot = Path(os.environ.get("ASSIGNADD_SCREENSHOT") or tmp_path / "report.png")
    p = chromium("--window-size=1200,3000", f"--screenshot={shot}", report_html.as_uri())
    assert shot.exists(), f"no screenshot (chromium exit {p.returncode}): {p.stderr[-2000:]}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
