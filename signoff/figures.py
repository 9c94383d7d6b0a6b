"""What the families' report sections are made of: figures as base64 PNG (matplotlib, no
display, mathtext off) and small key/value tables (signoff/templates/)."""

from __future__ import annotations

import base64
import io

from signoff.render import render
from signoff.units import empty, label, readable


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display), imported at the first figure drawn: a
    run that draws none (a check or two, `signoff plan`, most of the suite's own runs) does not
    pay its import, 0.6-1.2 s of CPU in every run before."""
    import matplotlib
    matplotlib.use("Agg")
    # labels, titles, legends and ticks carry hosts' strings (names, op names, interfaces): a `$` in
    # one must be drawn as a `$`, not parsed as mathtext (a ParseException cost report.html)
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt
    return plt


def png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def html_table(rows: dict) -> str:
    """Key/value rows, keys in words; a row with nothing to say (None, '', {}) left out."""
    return render("templates/kv_table.jinja2",
                  rows=[(label(k), readable(v)) for k, v in rows.items() if not empty(v)])


def img(b64: str, alt: str) -> str:
    """A figure shown in a report section (not folded in a result row)."""
    return render("templates/img.jinja2", alt=alt, b64=b64)
