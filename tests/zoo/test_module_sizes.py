"""The house's plan in numbers: no module of layers/, training/ or zoo/ over 450 lines and no
function over 80 lines of body (its docstring excluded), so that each file has one concern
and each function can be read at once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p for folder in ("layers", "training", "zoo")
                 for p in (ROOT / folder).rglob("*.py"))
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line."""
    body = function.body
    if (len(body) > 1 and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        body = body[1:]
    return function.end_lineno - body[0].lineno + 1


def test_every_package_is_read():
    names = {p.relative_to(ROOT).parts[0] for p in MODULES}
    assert names == {"layers", "training", "zoo"} and len(MODULES) > 80


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MAX_MODULE_LINES
    long = [f"{node.name} ({body_lines(node)} lines)" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and body_lines(node) > MAX_FUNCTION_LINES]
    assert long == []


def test_body_lines_skips_the_docstring():
    source = 'def f():\n    """Doc.\n\n    More.\n    """\n    x = 1\n    return x\n'
    function = ast.parse(source).body[0]
    assert body_lines(function) == 2
