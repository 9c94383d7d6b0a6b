"""What the families' report sections are made of: figures as base64 PNG (matplotlib, no
display) and small key/value tables."""

from __future__ import annotations

import base64
import io
from html import escape

import matplotlib

from signoff.units import empty, label, readable

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402,F401 - the families draw with it


def png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def html_table(rows: dict) -> str:
    """Key/value rows, keys in words; a row with nothing to say (None, '', {}) left out."""
    body = "".join(f"<tr><th>{escape(label(k))}</th><td>{escape(readable(v))}</td></tr>"
                   for k, v in rows.items() if not empty(v))
    return f"<table class='so-table'>{body}</table>"


def img(b64: str, alt: str) -> str:
    """A figure shown in a report section (not folded in a result row)."""
    return f"<img class='so-plot' alt='{escape(alt, quote=True)}' src='data:image/png;base64,{b64}'>"
