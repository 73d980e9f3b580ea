"""Which functions a user's own query may call, from the engine's own list of them.

Refused by name or category: the functions that reach past the store's rows (files, other
tables, dictionaries, the host, model services). Refused as unknown: any name the bundled
engine does not have, aggregate combinators (``sumIf``, ``uniqArrayIf``) and the parser's own
names aside. An unknown name fails on a chDB store anyway; on a server it could be one of the
server's own functions that this list has never been read for, so it is refused, not run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FunctionCatalogue", "FunctionRow"]

DENIED_CATEGORIES: Mapping[str, str] = {
    "Dictionary": "reads a dictionary",
    "Embedded Dictionary": "reads the engine's embedded dictionaries",
    "Introspection": "reads the engine's own memory",
    "AI": "calls a model service",
    "Internal": "is internal to the engine",
}
DENIED_NAMES: Mapping[str, str] = {
    "file": "reads a file",
    "joinGet": "reads another table",
    "joinGetOrNull": "reads another table",
    "hasColumnInTable": "reads another table or server",
    "showCertificate": "reads the server's certificate",
    "filesystemAvailable": "reads the host's disks",
    "filesystemCapacity": "reads the host's disks",
    "filesystemUnreserved": "reads the host's disks",
    "getServerSetting": "reads the server's configuration",
    "getMergeTreeSetting": "reads the server's configuration",
    "getMacro": "reads the server's configuration",
    "sleep": "waits instead of reading",
    "sleepEachRow": "waits instead of reading",
    "generateSerialID": "writes a counter in the coordination service",
    "catboostEvaluate": "loads a model file",
    "hostName": "reads the server's host",
    "FQDN": "reads the server's host",
    "getServerPort": "reads the server's configuration",
    "getOSKernelVersion": "reads the server's host",
    "serverUUID": "reads the server's identity",
}
"""Functions that reach past the store's rows. Table functions (``file``, ``url``, ``s3``,
``remote``, ``executable`` ...) are refused as a kind, not by name."""

PARSER_NAMES = frozenset({"lambda", "exists", "grouping"})
"""Names the parser writes for syntax (``x -> ...``, ``EXISTS (...)``, ``GROUPING(...)``) that
``system.functions`` does not list."""


@dataclass(frozen=True, slots=True)
class FunctionRow:
    """One row of ``system.functions``, as far as the judgement needs it."""

    name: str
    alias_to: str
    categories: str
    case_insensitive: bool
    aggregate: bool


@dataclass(frozen=True, slots=True)
class FunctionCatalogue:
    denied: Mapping[str, str]
    """Lower-case name -> why it is refused."""
    exact: frozenset[str]
    folded: frozenset[str]
    """Lower-cased names of the functions ClickHouse matches without case."""
    aggregates: frozenset[str]
    combinators: tuple[str, ...]
    """Suffixes that make an aggregate another aggregate (``If``, ``Array``, ``State``...),
    longest first."""

    @classmethod
    def of(cls, rows: list[FunctionRow], combinators: list[str]) -> FunctionCatalogue:
        denied = {name.lower(): why for name, why in DENIED_NAMES.items()}
        for row in rows:
            for category in row.categories.split(","):
                why = DENIED_CATEGORIES.get(category.strip())
                if why is not None:
                    denied[row.name.lower()] = why
        for row in rows:
            if row.alias_to and row.alias_to.lower() in denied:
                denied[row.name.lower()] = denied[row.alias_to.lower()]
        return cls(
            denied=denied,
            exact=frozenset(r.name for r in rows) | PARSER_NAMES,
            folded=frozenset(r.name.lower() for r in rows if r.case_insensitive),
            aggregates=frozenset(r.name for r in rows if r.aggregate),
            combinators=tuple(sorted(combinators, key=len, reverse=True)),
        )

    def refusal(self, name: str) -> str | None:
        """Why ``name`` may not be called, or None when it may."""
        why = self.denied.get(name.lower())
        if why is not None:
            return why
        if self._known(name):
            return None
        return "is not a function of the bundled ClickHouse engine, so gpufrag cannot vouch for it"

    def _known(self, name: str) -> bool:
        if name in self.exact or name.lower() in self.folded:
            return True
        base = name
        while True:  # strip combinators: uniqArrayIf -> uniqArray -> uniq
            suffix = next((c for c in self.combinators if base.endswith(c) and base != c), None)
            if suffix is None:
                return False
            base = base[: -len(suffix)]
            if base in self.aggregates or base.lower() in self.folded:
                return True
