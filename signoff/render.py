"""Every HTML fragment signoff writes (report.html's cover and sections, each check's row extras,
the cells it puts in pytest-html's rows) comes from a Jinja2 template with autoescape on, as
pytest-html renders its own page: Python hands the templates plain data (host names, messages,
figures as the host said them), the templates hold every tag, so a host's string is text unless a
template marks it safe, and a new section has nothing to forget. Markup only for fragments
rendered here (a section inside the page, a plot's caption and its PNG as a data URI).

Templates: signoff/templates/*.jinja2 (the report's own), signoff/<family>/*.jinja2 (a family's
section and row extras), named by their path under signoff/. Every value a template shows passes
printable() (signoff.printable): a host's control characters are visible escapes there too."""

from __future__ import annotations

import html
import re
from pathlib import Path

import jinja2
from jinja2.ext import Extension
from markupsafe import Markup

from signoff.printable import printable

PKG = Path(__file__).resolve().parent


class _Compact(Extension):
    """A template's line breaks and the indentation after them are no output: the templates are
    laid out to be read, the page stays as compact as it was written before (a space wanted at a
    line's end is written before the line break)."""

    def preprocess(self, source, name, filename=None):
        return re.sub(r"\n[ \t]*", "", source)


def _finalize(value):
    """What every {{ value }} shows: ours (Markup) as it is; anything else as printable text,
    escaped as html.escape escapes it (quotes too: the page's bytes as they were before the
    templates); None as nothing (never 'None' on a page). Autoescape stays on behind it."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(printable(value, lines=True), quote=True))


_LOCAL = re.compile(r"[\w.\-\[\]]+(?:/[\w.\-\[\]]+)*")


def local_href(value) -> str:
    """A link's target as the report may hold it: a file of the report dir, by a relative path of
    plain names (never a scheme: a host's 'javascript:' is no link, autoescape does not stop a
    URL scheme); anything else is '#'."""
    text = str(value or "")
    return text if _LOCAL.fullmatch(text) and ".." not in text.split("/") else "#"


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(PKG)), autoescape=True, finalize=_finalize,
                         undefined=jinja2.StrictUndefined, extensions=[_Compact], keep_trailing_newline=False)


ENV.filters["local_href"] = local_href


def render(template: str, /, **data) -> Markup:
    """`template` (its path under signoff/, e.g. 'templates/cover.jinja2') with `data`."""
    return Markup(ENV.get_template(template).render(**data))


def extra(name: str, content) -> Markup:
    """A check's HTML row extra (the attach fixture): its name as a heading, then `content`, a
    rendered fragment (a plain string is shown as text)."""
    return render("templates/extra.jinja2", name=name, content=content)


def failed(what: str, error: str) -> Markup:
    """What a page shows in place of a part that could not be drawn (signoff/recorder.py)."""
    return render("templates/failed.jinja2", what=what, error=error)
