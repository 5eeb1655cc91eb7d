"""Matplotlib figures as PNG bytes: the one encoder of every figure in a report, a page or a doc.

The same figure gives the same bytes: the PNG carries no ``Software`` (matplotlib version) entry and no
timestamp. Two presets, for two kinds of page:

- ``REPORT_DPI`` (90), the figure's own canvas: the verify report's model and evidence figures, the
  mutation matrix and the docs' figures (``tools/heldout_curves.py``), each laid out by matplotlib's
  constrained or tight layout at a size chosen for its page;
- ``PAGE_DPI`` (100) with ``tight=True`` (the saved area cropped to what is drawn): the curves of the
  series and sweep pages.

No torch here: the series and sweep pages render from their JSON alone.
"""

from __future__ import annotations

import io

REPORT_DPI = 90
PAGE_DPI = 100


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig, *, dpi: int, tight: bool = False) -> bytes:
    """``fig`` as PNG bytes at ``dpi`` (cropped to what is drawn when ``tight``); the figure is closed."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight" if tight else None, metadata={"Software": None})
    pyplot().close(fig)
    return buf.getvalue()
