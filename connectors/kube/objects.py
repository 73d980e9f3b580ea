"""Small readers shared by the mappers: object identity for both kubernetes-asyncio models and
custom-resource dicts, taints and tolerations, and time stamps."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import ValidationError

from models import Taint, Toleration
from models.bounds import describe

__all__ = [
    "MappingError",
    "Undecodable",
    "aware",
    "get_path",
    "identity_of",
    "name_of",
    "raw_text",
    "refused_fields",
    "taints_of",
    "tolerations_of",
]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class MappingError(ValueError):
    """An object that cannot be read into gpufrag's models; the message names the field."""


def refused_fields(exc: ValidationError, *, where: str = "") -> MappingError:
    """The model's refusal as a MappingError naming every refused field (up to three), so a
    pod with a 10^17-core request says ``requests.cpu_milli`` and the limit, not a traceback."""
    text = describe(exc)
    return MappingError(f"{where}{text}" if not where else f"{where}: {text}")


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A listed or watched item the API client could not turn into its model: it keeps its
    place (key, resourceVersion) so the rest of the page goes on and a re-list does not retry
    the same version, and its raw form for the dead letter."""

    raw: dict[str, Any]
    error: str


_REPR = reprlib.Repr()
# 20 levels, not the default 6, so a refused pod's spec still shows; the level limit is what
# keeps a 1,000-deep object (which orjson refuses past 254) from a RecursionError
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 20, 4096, 4096
_REPR.maxdict = _REPR.maxlist = 200


def raw_text(obj: Any) -> str:
    """An object as JSON for a dead letter, whatever it is; never raises."""
    if isinstance(obj, Undecodable):
        obj = obj.raw
    try:
        if not isinstance(obj, dict) and hasattr(obj, "to_dict"):
            obj = obj.to_dict()
        return orjson.dumps(obj, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except Exception:  # ints past 64 bits, nesting past orjson's 254 levels: the repr
        return _shown(obj)


def _shown(obj: Any) -> str:
    try:
        return _REPR.repr(obj)
    except Exception:  # nothing printable: at least say what it was
        return f"<{type(obj).__name__} that cannot be printed>"


def get_path(obj: Any, *path: str) -> Any:
    """A nested value of a custom-resource dict, None where any step is missing."""
    cur = obj
    for step in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(step)
    return cur


def _meta(obj: Any) -> tuple[Any, Any, Any, Any]:
    """(uid, resourceVersion, namespace, name) of a model, a dict or an Undecodable; None for
    whatever is missing, since a refused object may lack any of them."""
    if isinstance(obj, Undecodable):
        obj = obj.raw
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return meta.get("uid"), meta.get("resourceVersion"), meta.get("namespace"), meta.get("name")
    meta = getattr(obj, "metadata", None)
    if meta is None:
        return None, None, None, None
    return meta.uid, meta.resource_version, meta.namespace, meta.name


def name_of(obj: Any) -> str:
    """ "namespace/name" (or the name) for messages: a uid says nothing to the reader."""
    _, _, namespace, name = _meta(obj)
    return f"{namespace}/{name}" if namespace else str(name or "?")


def identity_of(obj: Any) -> tuple[str, str]:
    """(store key, resourceVersion) of a model object or a custom-resource dict. The key is the
    uid, so an object deleted and recreated under the same name is two objects, as it is to
    the API server; namespace/name only when the uid is missing."""
    uid, rv, namespace, name = _meta(obj)
    key = uid or f"{namespace or ''}/{name or ''}"
    return str(key), str(rv or "")


def aware(value: Any) -> datetime | None:
    """A UTC datetime from a model's datetime or an API time string; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        # The API always sends UTC ("Z"); a naive value here can only be UTC.
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def taints_of(taints: Any) -> tuple[Taint, ...]:
    out = []
    for t in taints or []:
        if t.key and t.effect in _EFFECTS:
            out.append(Taint(key=t.key, value=t.value or None, effect=t.effect))
    return tuple(out)


def tolerations_of(tolerations: Any) -> tuple[Toleration, ...]:
    out = []
    for t in tolerations or []:
        operator = t.operator or "Equal"
        if operator not in ("Exists", "Equal"):
            continue
        effect = t.effect or None
        if effect is not None and effect not in _EFFECTS:
            continue
        out.append(
            Toleration(key=t.key or None, operator=operator, value=t.value or None, effect=effect)
        )
    return tuple(out)
