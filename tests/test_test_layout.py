"""The test suite's own layout: what tests share lives in helper modules, never in a test.

A test module that imports another one runs (or at least collects) the other's tests' setup in
its own process, ties the two files together and hides what is shared; a conftest is pytest's
to load, not a module to import. Shared code goes in a helper module named for what it holds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# A module name whose last part is a test module or a conftest: tests.app.test_x, conftest.
FORBIDDEN = re.compile(r"(?:^|\.)(?:test_\w+|\w+_test|conftest)$")
# The same inside code given as a string (a subprocess's `python -c`).
IN_STRING = re.compile(r"\b(?:from|import)\s+([\w.]*(?:test_\w+|\w+_test|conftest))\b")


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])


def _imported(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, module) for every module an import names, relative ones made absolute."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            # `from tests.app import test_x` imports the module test_x too
            found += [(node.lineno, base)]
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(node.lineno, m) for m in IN_STRING.findall(node.value)]
    return found


def offending_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(TESTS.parent)}:{line}: imports {module}"
        for line, module in _imported(tree, _package_of(path))
        if FORBIDDEN.search(module)
    ]


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    # this module is left out: its own check below names forbidden imports in a string
    files = sorted(p for p in TESTS.rglob("*.py") if p != Path(__file__).resolve())
    assert len(files) > 20
    bad = [line for path in files for line in offending_imports(path)]
    assert not bad, "move what is shared into a helper module:\n" + "\n".join(bad)


def test_the_check_sees_every_form_of_the_import() -> None:
    code = (
        "import tests.app.test_replay_pipeline\n"
        "from tests.app.test_report_render import make_report_data\n"
        "from tests.app import test_report_browser\n"
        "from tests.conftest import REPO_ROOT\n"
        "from . import conftest\n"
        "from .test_watch import x\n"
        "CODE = 'from tests.app.test_report_render import make_report_data'\n"
        "from tests.app.pipeline_helpers import gpufrag\n"
        "from tests.paths import REPO_ROOT as R\n"
        "import pytest\n"
    )
    found = [m for _, m in sorted(_imported(ast.parse(code), "tests.app")) if FORBIDDEN.search(m)]
    assert found == [
        "tests.app.test_replay_pipeline",
        "tests.app.test_report_render",
        "tests.app.test_report_browser",
        "tests.conftest",
        "tests.app.conftest",
        "tests.app.test_watch",
        "tests.app.test_report_render",  # inside the string
    ]
