"""Names a reader cannot confuse: no two product modules share a file name, no two exported
classes share a name.

A reader who meets ``metrics.py`` in a traceback, a diff or a search result, or ``Gate`` in a
signature, should not have to look up which of several it is. A module is named for what it
holds (``alert_metrics.py``, not a fourth ``metrics.py``); where a name must stay shared for now
the pair is listed below with its reason, and the test fails once the pair no longer collides,
so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("models", "connectors", "streams")

NOT_NAMES = {"__init__.py", "__main__.py"}
"""Python's own file names, the same in every package by design."""

COMMANDS = "streams/app/commands"
"""One module per CLI command, named after the command it implements (``gpufrag whatif`` is
``commands/whatif.py``): a name shared with the module the command runs is the point."""

ALLOWED: dict[frozenset[str], str] = {}
"""Pairs of modules that may still share a file name, each with its reason."""


def product_modules() -> list[Path]:
    return sorted(p for name in PRODUCT for p in (ROOT / name).rglob("*.py"))


def shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def modules_by_file_name() -> dict[str, set[str]]:
    by_name: dict[str, set[str]] = defaultdict(set)
    for path in product_modules():
        if path.name in NOT_NAMES or shown(path.parent) == COMMANDS:
            continue
        by_name[path.name].add(shown(path))
    return by_name


def test_no_two_product_modules_share_a_file_name() -> None:
    shared = [frozenset(paths) for paths in modules_by_file_name().values() if len(paths) > 1]
    assert len(product_modules()) > 100
    bad = sorted(", ".join(sorted(paths)) for paths in shared if paths not in ALLOWED)
    assert not bad, "name each module for what it holds:\n" + "\n".join(bad)


def test_every_allowed_pair_still_collides() -> None:
    shared = {frozenset(paths) for paths in modules_by_file_name().values() if len(paths) > 1}
    stale = sorted(", ".join(sorted(pair)) for pair in ALLOWED if pair not in shared)
    assert not stale, "no longer shared, drop from ALLOWED:\n" + "\n".join(stale)


def exported_classes(path: Path) -> list[str]:
    """Top-level classes without a leading underscore."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    ]


def test_no_two_exported_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in product_modules():
        for name in exported_classes(path):
            where[name].append(shown(path))
    assert len(where) > 100
    bad = sorted(f"{name}: {', '.join(paths)}" for name, paths in where.items() if len(paths) > 1)
    assert not bad, "give each class a name of its own:\n" + "\n".join(bad)
