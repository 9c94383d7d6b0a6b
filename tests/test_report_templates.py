"""Every HTML fragment of the report comes from a Jinja2 template with autoescape on (issue 51
item 4): no HTML in signoff/ or acceptance/ is built by formatting a value into a string, and a
host's collective op name is text in its row's collectives table. matplotlib's mathtext is off
(item 5): a `$` in a host's string is drawn as a `$`, never parsed, never a failed report."""

from __future__ import annotations

import ast
import base64
import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TAG = re.compile(r"<\s*/?\s*(a|b|i|p|br|hr|td|tr|th|li|ul|ol|div|span|img|pre|code|h[1-6]|table|thead|tbody|"
                 r"details|summary|small|sup|sub|style|script|svg|em|strong|section|iframe|link|meta|form|"
                 r"input)\b", re.I)
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>$x^{2$"


def _html(node) -> bool:
    """A string constant (or an f-string's constant part) holding an HTML tag."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(TAG.search(node.value))


def built_html(tree) -> list[int]:
    """Lines that build HTML around a value: an f-string with a tag and a {value}; '<tag>'.format(),
    '<tag>' % value; '<tag>' + value (or value + '<tag>'); ''.join of such pieces is caught by
    the pieces themselves."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in n.values) \
                and any(_html(v) for v in n.values):
            out.append(n.lineno)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format" \
                and _html(n.func.value):
            out.append(n.lineno)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and _html(n.left):
            out.append(n.lineno)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (_html(n.left) or _html(n.right)) \
                and not (isinstance(n.left, ast.Constant) and isinstance(n.right, ast.Constant)):
            out.append(n.lineno)
    return sorted(set(out))


def test_the_grep_finds_each_way_of_building_html_around_a_value():
    src = ("a = f'<td>{x}</td>'\nb = '<li>{}</li>'.format(x)\nc = '<b>%s</b>' % x\nd = '<p>' + x\n"
           "e = x + '</p>'\nok1 = f'expected <= {x}'\nok2 = '<td></td>'\nok3 = 'a' + x\n")
    assert built_html(ast.parse(src)) == [1, 2, 3, 4, 5]


def test_no_html_in_signoff_or_the_sheet_is_built_by_formatting_a_value():
    found = {}
    for f in sorted([*(ROOT / "signoff").rglob("*.py"), *(ROOT / "acceptance").glob("*.py")]):
        lines = built_html(ast.parse(f.read_text()))
        if lines:
            found[str(f.relative_to(ROOT))] = lines
    assert found == {}, f"HTML built by formatting a value (use a template, signoff/render.py): {found}"


def test_every_template_ships_in_an_installed_copy():
    """setup.py's package_data names every *.jinja2 under signoff/ (an installed copy that lacks
    one cannot write report.html)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    data = next(n.value for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "package_data")
    globs = ast.literal_eval(data)["signoff"]
    templates = [str(p.relative_to(ROOT / "signoff")) for p in (ROOT / "signoff").rglob("*.jinja2")]
    assert templates and all(any(fnmatch.fnmatch(t, g) for g in globs) for t in templates), (templates, globs)


def test_a_hosts_collective_op_name_is_text_in_its_collectives_table():
    """Issue 51 item 4: probe_allreduce's `ops` keys are the host's words; the row extra of
    acceptance/test_interconnect.py's collectives checks showed them as markup."""
    from html import escape

    from signoff.interconnect import plots
    rows = [{"bytes": 1 << 20, "busbw": 1.5, "correct": True}]
    got = str(plots.collectives_table({"rows": rows, "ops": {"allgather": rows, HOSTILE: rows}}))
    assert "<script" not in got and "<img" not in got, got
    assert f"<th>{escape(HOSTILE)} busbw GB/s</th>" in got and "<th>all-gather busbw GB/s</th>" in got, got
    assert got.count("<td>1.50</td>") == 3 and "<td>1M</td>" in got, got


def test_a_row_extra_titles_its_name_and_shows_plain_text_as_text():
    """The attach fixture's html extra: its name and any plain string are text; only our own
    rendered fragments (Markup) are markup."""
    from signoff import render
    got = str(render.extra(HOSTILE, HOSTILE))
    assert "<script" not in got and got.startswith("<div><b>&lt;img") and got.count("&lt;script&gt;") == 2
    table = render.render("templates/pre.jinja2", text="x\x1b[2Ky")
    assert str(render.extra("topo", table)) == "<div><b>topo</b><pre>x\\x1b[2Ky</pre></div>"


def _png_ok(b64: str) -> None:
    assert base64.b64decode(b64).startswith(b"\x89PNG")


MULTI = {"criterion": "multinode_allreduce", "host": "all hosts", "status": "PASS", "measured": 1.0,
         "unit": "GB/s"}


def test_a_dollar_in_a_hosts_strings_is_drawn_not_parsed_as_mathtext():
    """Issue 51 item 5: an op name of the multi-node collectives (network/report.py) in the
    chart's legend raised matplotlib's mathtext ParseException, and report.html was lost."""
    from signoff.interconnect import plots
    from signoff.network.report import network_section
    rows = [{"bytes": 1 << 20, "busbw": 1.5, "correct": True},
            {"bytes": 1 << 21, "busbw": 2.0, "correct": True}]
    recs = [MULTI, {"criterion": "multinode_collectives_correct", "host": "all hosts", "status": "PASS",
             "details": {"ops": {"allgather": rows, "$x^{2$": rows, "a$b": rows}}}]
    got = str(network_section(recs))
    assert "collectives across nodes beside the all-reduce" in got
    _png_ok(re.search(r"base64,([^'\"]+)", got).group(1))
    _png_ok(plots.busbw_hosts({"$\\frac{$": rows, "b$": rows}, 1.0, 1 << 20))
    _png_ok(plots.collectives_chart("$h$", {"$\\sqrt{$": rows}, None, "$t{"))
    _png_ok(plots.p2p_heatmap("$h{$", 2, {"0-1": 1.0, "1-0": 1.0}, "$x{"))


def test_a_section_whose_rail_names_are_not_numbers_still_draws():
    """A host's rail keys ('rails': {'alltoall': {'x': rows}}) were sorted as int(): a ValueError
    that cost report.html; they are names, drawn in their order."""
    from signoff.network.report import network_section
    rows = [{"bytes": 1 << 20, "busbw": 1.5, "correct": True}]
    recs = [MULTI, {"criterion": "multinode_collectives_correct", "host": "all hosts", "status": "PASS",
             "details": {"ops": {"allgather": rows}, "rails": {"alltoall": {"<b>x$": rows, "1": rows}}}}]
    got = str(network_section(recs))
    assert "collectives across nodes beside the all-reduce" in got and "<b>x" not in got


@pytest.mark.parametrize("value", ["<script>alert(1)</script>", "' onmouseover='alert(1)", "\x1b[2K"])
def test_a_value_is_text_in_every_place_a_template_puts_it(value):
    """Element text and attribute values (single-quoted in our templates) alike."""
    from signoff import report
    recs = [{"test": "t", "criterion": "gpu_temp", "host": "h1", "status": "FAIL", "measured": 99,
             "unit": value, "expected": value, "source": value, "message": f"h1: {value}"}]
    html = str(report.summary_table(recs))
    assert "<script" not in html and "onmouseover='" not in html and "\x1b" not in html, html
    assert re.search(r"title='[^']*'", html), html


@pytest.mark.parametrize("href", ["javascript:alert(document.domain)", " javascript:alert(1)",
                                  "JaVaScRiPt:alert(1)", "data:text/html,<script>x</script>",
                                  "https://example.com/x", "//example.com/x", "../../etc/passwd",
                                  "dcgm/../../x.json", "/etc/passwd"])
def test_a_link_leads_only_to_a_file_of_the_report_dir(href):
    """A link a host's document could name (the DCGM row's raw JSON: a host printing `raw` kept
    it on 83b76b7) goes nowhere but a file beside report.html: autoescape stops no URL scheme."""
    from signoff.render import render
    page = str(render("templates/link.jinja2", href=href, text="dcgm/lab1.json"))
    assert page == "<a href='#'>dcgm/lab1.json</a>", page
    assert str(render("templates/link.jinja2", href="dcgm/lab1.json", text="x")) == \
        "<a href='dcgm/lab1.json'>x</a>"
