"""Which ``GPUFRAG_*`` environment variables are settings, and the nearest one to a typo.

pydantic-settings reads only the names it knows: ``GPUFRAG_STORE_BATCH_ROWS`` (one underscore)
or ``GPUFRAG_NOPE`` were ignored without a word, and the run went on with the defaults. Names
below a known group (``GPUFRAG_STORE__BATCH``) are already refused by the groups' extra=forbid;
this finds the rest, and names the setting a typo most likely meant.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterator, Mapping

from pydantic import BaseModel

__all__ = ["NOT_SETTINGS", "PREFIX", "nearest_setting", "unknown_names", "unreadable_json"]

PREFIX = "GPUFRAG_"
NOT_SETTINGS = frozenset(
    {
        "GPUFRAG_TEST_KAFKA",
        "GPUFRAG_TEST_KAFKA_SECURITY",
        "GPUFRAG_TEST_APISERVER",
        "GPUFRAG_TEST_ALERTMANAGER_BIN",
        "GPUFRAG_TEST_WORKERS",
        "GPUFRAG_KAFKA_DIR",
        "GPUFRAG_APISERVER_DIR",
        "GPUFRAG_APISERVER_AUTHZ",
        "GPUFRAG_APISERVER_WATCH_CACHE_SIZES",
        "GPUFRAG_SCHEDULER_WEIGHT",
        "GPUFRAG_SCHEDULER_TIMEOUT",
        "GPUFRAG_SCHEDULER_PRIORITIZE",
        "GPUFRAG_SCHEDULER_MANAGED",
        "GPUFRAG_SCHEDULER_IGNORED",
        "GPUFRAG_CACHE_DIR",
        "GPUFRAG_PARITY_NODES",
        "GPUFRAG_FUZZ_SEED",
        "GPUFRAG_FUZZ_EXAMPLES",
        "GPUFRAG_SOAK",
        "GPUFRAG_SOAK_MINUTES",
        "GPUFRAG_SOAK_SEED",
    }
)
"""``GPUFRAG_*`` names that are not settings and are left alone: the local Kafka and
kube-apiserver scripts' (deploy/local), and the test suite's (tests/, .ci/run)."""

_DELIMITER = "__"


def _groups(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """Field name -> its group class (None for a value: a number, a list, a dict...)."""
    out: dict[str, type[BaseModel] | None] = {}
    for name, field in model.model_fields.items():
        kind = field.annotation
        out[name] = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
    return out


def _paths(model: type[BaseModel], prefix: str) -> Iterator[str]:
    for name, group in _groups(model).items():
        path = f"{prefix}{name.upper()}"
        yield path
        if group is not None:
            yield from _paths(group, path + _DELIMITER)


def unknown_names(model: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """The ``GPUFRAG_*`` names in ``environ`` that reach no group or setting of ``model`` and
    are not in NOT_SETTINGS (case-insensitive, as pydantic-settings reads them), sorted. A name
    below a known group (``GPUFRAG_STORE__BATCH``) is the group's to refuse (extra=forbid)."""
    found = []
    for key in environ:
        upper = key.upper()
        if not upper.startswith(PREFIX) or upper in NOT_SETTINGS:
            continue
        head = upper[len(PREFIX) :].partition(_DELIMITER)[0]
        if head.lower() not in model.model_fields:
            found.append(key)
    return sorted(found)


def nearest_setting(model: type[BaseModel], name: str) -> str | None:
    """The setting's full variable name closest to ``name``, if any is close."""
    paths = [p[len(PREFIX) :] for p in _paths(model, PREFIX)]
    wanted = name.upper().removeprefix(PREFIX)
    # Underscores are what a typo most often gets wrong (GPUFRAG_STORE_BATCH_ROWS)...
    squashed = {p.replace("_", ""): p for p in paths}
    if wanted.replace("_", "") in squashed:
        return PREFIX + squashed[wanted.replace("_", "")]
    # ...then a setting named in the wrong group (one moved to another group keeps its name).
    leaf = wanted.rpartition(_DELIMITER)[2]
    same_leaf = [p for p in paths if p.rpartition(_DELIMITER)[2] == leaf]
    if same_leaf:
        return PREFIX + difflib.get_close_matches(wanted, same_leaf, n=1, cutoff=0)[0]
    close = difflib.get_close_matches(wanted, paths, n=1, cutoff=0.6)
    return PREFIX + close[0] if close else None


def _is_structured(kind: object) -> bool:
    """Is the field read from the environment as JSON (a group, a list, a dict)?"""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return any(_is_structured(arg) for arg in typing.get_args(kind))
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return True
    return origin in (tuple, list, dict, set, frozenset)


def unreadable_json(
    model: type[BaseModel], field: str, environ: Mapping[str, str]
) -> tuple[str, str] | None:
    """The variable under the top-level ``field`` whose value should be JSON and is not, and
    why: pydantic-settings names only the top-level field ("error parsing value for field
    kube"), not which of its variables was wrong."""
    wanted = PREFIX + field.upper()
    for key, value in sorted(environ.items()):
        upper = key.upper()
        if upper != wanted and not upper.startswith(wanted + _DELIMITER):
            continue
        if not _is_structured(_annotation(model, upper[len(PREFIX) :])):
            continue
        try:
            json.loads(value)
        except ValueError as exc:
            return key, str(exc).split(":")[0][:80]
    return None


def _annotation(model: type[BaseModel], name: str) -> object:
    head, _, rest = name.partition(_DELIMITER)
    field = model.model_fields.get(head.lower())
    if field is None:
        return None
    kind = field.annotation
    if rest and isinstance(kind, type) and issubclass(kind, BaseModel):
        return _annotation(kind, rest)
    return kind
