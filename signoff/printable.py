"""Text a host wrote (a probe's stderr, a process name, an OS or CPU string, a version), made inert
wherever signoff says it: the party being signed off controls those bytes, and the terminal,
report.md and report.html must show only what signoff decided.

printable(): control characters (ESC, CR, BS, a line break in a one-line message, DEL, C1) and
the Unicode controls that reorder or break text (bidi overrides, line separators) become visible
escapes, as Python writes them (\\x1b[1A): never dropped, so the provider sees what the host printed.
report.html's templates apply it to every value they show (signoff/render.py), then escape it."""

from __future__ import annotations

import re

# C0 but tab, DEL, C1; bidi embeddings, overrides and isolates (text shown in another order),
# the line and paragraph separators (a line break to a browser or terminal), BOM
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_UNSAFE_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _visible(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text, lines: bool = False) -> str:
    """`text` with every control character as a visible escape ('\\x1b', '\\n', '\\u202e');
    `lines`: line breaks kept (a page, where they are white space)."""
    return (_UNSAFE_LINES if lines else _UNSAFE).sub(_visible, str(text))

