"""The package's shape: small functions. A function body of more than 80 lines wants splitting,
except a Typer command's, whose options are its signature (one per line)."""

from __future__ import annotations

import ast
from pathlib import Path

import eval_pipeline

PACKAGE = Path(eval_pipeline.__file__).parent
MAX_LINES = 80


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated ``@app.command(...)``: a Typer command."""
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(call, ast.Attribute) and call.attr == "command":
            return True
    return False


def long_functions(root: Path = PACKAGE) -> list[str]:
    """``file:line name (N lines)`` of every function longer than :data:`MAX_LINES`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_command(node):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_80_lines() -> None:
    assert long_functions() == []


def test_the_check_finds_a_long_function_and_spares_a_command(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n@app.command()\ndef cmd():\n{body}", "utf-8")
    assert long_functions(tmp_path) == [f"{tmp_path.name}/long.py:1 long ({MAX_LINES + 1} lines)"]
