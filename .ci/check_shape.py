"""Fail CI when a module or function in the packages or the tests grows past the agreed size.

Long modules and functions are where review misses bugs, so the limits are enforced
mechanically rather than left to taste. A function's body runs from its first statement
(a docstring counts) to its last line, so decorators and signatures, typer option
declarations included, are free; nested functions count towards their enclosing function
and are also checked on their own.

Run from anywhere: ``python .ci/check_shape.py``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("models", "connectors", "streams", "tests")
"""The product's packages and the tests: a 900-line test module hides what it checks as well as
a 900-line module hides a bug."""
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def module_files(root: Path) -> list[Path]:
    """Sorted so the report is stable between runs and easy to diff."""
    return sorted(path for package in PACKAGES for path in (root / package).rglob("*.py"))


def body_lines(node: FunctionNode) -> int:
    """Counted from the first statement so the signature never counts against the limit."""
    end = node.end_lineno if node.end_lineno is not None else node.body[-1].lineno
    return end - node.body[0].lineno + 1


def check_module(path: Path, shown: str) -> tuple[list[str], int]:
    """Return the module's violations and how many functions it holds."""
    source = path.read_text(encoding="utf-8")
    problems: list[str] = []
    line_count = len(source.splitlines())
    if line_count > MAX_MODULE_LINES:
        problems.append(f"{shown}: {line_count} lines (max {MAX_MODULE_LINES})")
    functions = [
        node
        for node in ast.walk(ast.parse(source, filename=str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for node in sorted(functions, key=lambda fn: fn.lineno):
        size = body_lines(node)
        if size > MAX_FUNCTION_LINES:
            problems.append(
                f"{shown}:{node.lineno}: function {node.name} body is {size} lines "
                f"(max {MAX_FUNCTION_LINES})"
            )
    return problems, len(functions)


def main() -> int:
    problems: list[str] = []
    files = module_files(ROOT)
    function_count = 0
    for path in files:
        found, count = check_module(path, path.relative_to(ROOT).as_posix())
        problems.extend(found)
        function_count += count
    for line in problems:
        print(line)
    if problems:
        print(f"check_shape: {len(problems)} violation(s)", file=sys.stderr)
        return 1
    print(
        f"check_shape: OK, {len(files)} modules and {function_count} functions within "
        f"{MAX_MODULE_LINES} module / {MAX_FUNCTION_LINES} function-body lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
