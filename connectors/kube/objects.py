"""Small readers shared by the mappers: object identity for both kubernetes-asyncio models and
custom-resource dicts, taints and tolerations, and time stamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from models import Taint, Toleration

__all__ = [
    "MappingError",
    "aware",
    "get_path",
    "identity_of",
    "taints_of",
    "tolerations_of",
]

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class MappingError(ValueError):
    """An object that cannot be read into gpufrag's models; the message names the field."""


def get_path(obj: Any, *path: str) -> Any:
    """A nested value of a custom-resource dict, None where any step is missing."""
    cur = obj
    for step in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(step)
    return cur


def identity_of(obj: Any) -> tuple[str, str]:
    """(store key, resourceVersion) of a model object or a custom-resource dict. The key is the
    uid, so an object deleted and recreated under the same name is two objects, as it is to
    the API server; namespace/name only when the uid is missing."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        namespace, name = meta.get("namespace"), meta.get("name")
    else:
        meta = obj.metadata
        uid, rv = meta.uid, meta.resource_version
        namespace, name = meta.namespace, meta.name
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
