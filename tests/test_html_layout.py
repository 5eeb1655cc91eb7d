"""report.html at 800 px in headless Chromium: nothing sticks out of the page, and tables fit their box.

Skipped where ``/usr/bin/chromium`` is missing (``make html-check`` runs it with the other browser test).
"""

from __future__ import annotations

import html
import json
import re

import pytest

from .test_verify_html import CHROMIUM, chromium, report_html  # noqa: F401 (report_html is a fixture)

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="headless Chromium not installed at /usr/bin/chromium (Debian: apt-get install -y chromium)",
)

PROBE = """<script>
window.addEventListener('load', function () {
  var page = document.documentElement;
  var wraps = Array.prototype.slice.call(document.querySelectorAll('.table-wrap'));
  var pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = JSON.stringify({
    viewport: window.innerWidth, page: page.scrollWidth,
    tables: wraps.map(function (w) { return [w.scrollWidth, w.clientWidth]; }),
    figures: Array.prototype.slice.call(document.images).map(function (i) { return i.getBoundingClientRect().right; })
  });
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.parametrize("width", [800, 1200])
def test_nothing_overflows_the_page_and_tables_fit_at(report_html, tmp_path, width):  # noqa: F811
    probe = tmp_path / "probe.html"
    probe.write_text(report_html.read_text().replace("</body>", PROBE + "</body>"))
    p = chromium(f"--window-size={width},2000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', p.stdout, re.S)
    assert found, f"the probe never ran (chromium exit {p.returncode}): {p.stderr[-2000:]}"
    layout = json.loads(html.unescape(found.group(1)))
    assert layout["page"] <= layout["viewport"], layout
    assert layout["tables"] and all(scroll <= client + 1 for scroll, client in layout["tables"]), layout
    assert max(layout["figures"]) <= layout["viewport"], layout
