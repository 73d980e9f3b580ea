"""Named analytical queries: `.sql` files whose header declares their parameters.

A header line ``-- param: limit UInt32 = 20`` declares a parameter, its ClickHouse type and an
optional default (``latest`` for run_id means the latest finished run). Values are converted and
checked here, then bound by the driver as server-side parameters: never pasted into the SQL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

PARAM_LINE = re.compile(r"^--\s*param:\s*(\w+)\s+(\w+)(?:\s*=\s*(.+?))?\s*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
CONVERTERS: dict[str, Callable[[str], object]] = {
    "String": str,
    "UInt32": lambda v: _int(v, 0, 2**32 - 1),
    "UInt64": lambda v: _int(v, 0, 2**64 - 1),
    "Int64": lambda v: _int(v, -(2**63), 2**63 - 1),
    "Float64": lambda v: _float(v),
    "DateTime64": datetime.fromisoformat,
}


class QueryError(ValueError):
    """A named query or its parameters cannot be used as given."""


_ASCII_INT = re.compile(r"[+-]?[0-9]+")
_ASCII_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _int(text: str, lo: int, hi: int) -> int:
    # Python's int() also takes other scripts' digits (full-width U+FF11 U+FF10 is 10),
    # "1_000" and surrounding blanks: what the user typed must be what the query gets.
    if not _ASCII_INT.fullmatch(text):
        raise ValueError("use ASCII digits 0-9 only")
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(f"outside {lo}..{hi}")
    return value


def _float(text: str) -> float:
    if not _ASCII_FLOAT.fullmatch(text):
        raise ValueError("use ASCII digits 0-9, a decimal point and an exponent only")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return value


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str
    default: str | None


@dataclass(frozen=True, slots=True)
class NamedQuery:
    name: str
    description: str
    params: tuple[Param, ...]
    sql: str


def parse_query(name: str, text: str) -> NamedQuery:
    params: list[Param] = []
    description: list[str] = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        m = PARAM_LINE.match(line)
        if m:
            pname, ptype, default = m.groups()
            if ptype not in CONVERTERS:
                raise QueryError(f"query {name}: parameter {pname} has unsupported type {ptype}")
            params.append(Param(pname, ptype, default))
        else:
            description.append(line.lstrip("-").strip())
    return NamedQuery(name, " ".join(description).strip(), tuple(params), text)


def load_queries(directory: Path) -> dict[str, NamedQuery]:
    if not directory.is_dir():
        raise QueryError(f"named queries not found: {directory} is not a directory")
    out = {}
    for path in sorted(directory.glob("*.sql")):
        out[path.stem] = parse_query(path.stem, path.read_text(encoding="utf-8"))
    return out


def bind(
    query: NamedQuery, given: Mapping[str, str], *, latest_run: Callable[[], str | None]
) -> dict[str, object]:
    """Every declared parameter, converted to its type; unknown or missing ones are refused."""
    declared = {p.name: p for p in query.params}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(declared) or "none"
        raise QueryError(f"query {query.name} has no parameter {unknown[0]!r} (it takes: {known})")
    values: dict[str, object] = {}
    # given values are checked before defaults are resolved: a typo is reported as such, not
    # hidden behind a missing run
    for p in sorted(query.params, key=lambda p: p.name not in given):
        raw = given.get(p.name, p.default)
        if raw == "latest" and p.name == "run_id" and p.name not in given:
            raw = latest_run()
            if raw is None:
                raise QueryError("the store has no runs yet; run `gpufrag replay` first")
        if raw is None:
            raise QueryError(f"query {query.name} needs --param {p.name}=<{p.type}>")
        try:
            values[p.name] = CONVERTERS[p.type](raw)
        except ValueError as exc:
            raise QueryError(f"--param {p.name}={raw!r} is not a valid {p.type}: {exc}") from None
    return values


def parse_param_options(options: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not NAME.match(key):
            raise QueryError(f"--param {opt!r} is not of the form name=value")
        if key in out:
            raise QueryError(f"--param {key} given twice")
        out[key] = value
    return out
