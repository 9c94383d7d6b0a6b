"""What the families' report sections are made of: figures as base64 PNG (matplotlib, no
display) and small key/value tables."""

from __future__ import annotations

import base64
import io

from signoff.printable import escape
from signoff.units import empty, label, readable


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display), imported at the first figure drawn: a
    run that draws none (a check or two, `signoff plan`, most of the suite's own runs) does not
    pay its import, 0.6-1.2 s of CPU in every run before."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def html_table(rows: dict) -> str:
    """Key/value rows, keys in words; a row with nothing to say (None, '', {}) left out."""
    body = "".join(f"<tr><th>{escape(label(k))}</th><td>{escape(readable(v))}</td></tr>"
                   for k, v in rows.items() if not empty(v))
    return f"<table class='so-table'>{body}</table>"


def img(b64: str, alt: str) -> str:
    """A figure shown in a report section (not folded in a result row)."""
    return f"<img class='so-plot' alt='{escape(alt, quote=True)}' src='data:image/png;base64,{b64}'>"
