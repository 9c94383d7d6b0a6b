"""The sign-off sheet: every check acceptance/ defines, for every host (or pair) it applies to.

A run is complete when each entry was judged. The sheet is read from the test files' source
(not from what pytest collected), so no selection flag (-k, --deselect, --ignore-glob,
-o python_functions=...) can shrink it unnoticed."""

from __future__ import annotations

import ast
from pathlib import Path

from signoff.results import ALL

PER_HOST = "host"


def _fixtures(tree: ast.Module) -> dict[str, list[str]]:
    """name -> argument names, for every @pytest.fixture function of a module."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) \
                and any("fixture" in ast.unparse(d) for d in node.decorator_list):
            out[node.name] = [a.arg for a in node.args.args]
    return out


def _closure(args: list[str], fixtures: dict[str, list[str]]) -> set[str]:
    """Every fixture name a test's arguments reach."""
    seen, todo = set(), list(args)
    while todo:
        a = todo.pop()
        if a not in seen:
            seen.add(a)
            todo += fixtures.get(a, [])
    return seen


def _scope(args: list[str], fixtures: dict[str, list[str]], params) -> str | None:
    """The first parametrised fixture (`host` first, as plugin.pytest_generate_tests sees it)
    in the fixture closure, else None (one cluster-wide entry)."""
    reached = _closure(args, fixtures)
    return next((s for s in params if s in reached), None)


def checks(acceptance: Path, params=(PER_HOST,)) -> list[tuple[str, str | None]]:
    """(criterion, scope) for every test function of acceptance/test_*.py; `params` are the
    fixtures checks are parametrised by, in order."""
    conftest = acceptance / "conftest.py"
    shared = _fixtures(ast.parse(conftest.read_text())) if conftest.exists() else {}
    out = []
    for f in sorted(acceptance.glob("test_*.py")):
        tree = ast.parse(f.read_text())
        fixtures = {**shared, **_fixtures(tree)}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                out.append((node.name[len("test_"):],
                            _scope([a.arg for a in node.args.args], fixtures, params)))
    return out


def expected(acceptance: Path, cols: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(criterion, host column) of every entry the sheet holds: `cols` maps each parametrised
    fixture (host, pair, ...) to its ids."""
    cols = {**cols, None: [ALL]}
    return [(c, h) for c, scope in checks(acceptance, [k for k in cols if k]) for h in cols[scope]]
