"""The DRA kinds by name: which decoder reads each, and where the book keeps it. The watchers
and the snapshot reader go through here, so both read an object the same way."""

from __future__ import annotations

from typing import Any

from connectors.kube.dra.decode import (
    claim_from_dict,
    device_class_from_dict,
    slice_from_dict,
    taint_rule_from_dict,
    template_from_dict,
)
from connectors.kube.dra.device_book import DraBook
from connectors.kube.objects import MappingError, get_path

__all__ = ["DRA_KINDS", "forget", "record"]

DRA_KINDS = frozenset(
    {"ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"}
)


def _key(raw: dict[str, Any]) -> str:
    name = get_path(raw, "metadata", "name")
    if not isinstance(name, str) or not name:
        raise MappingError("metadata.name is missing")
    namespace = get_path(raw, "metadata", "namespace")
    return f"{namespace}/{name}" if namespace else name


def record(book: DraBook, kind: str, raw: dict[str, Any]) -> str:
    """Read one object into the book; returns its key. MappingError names what is wrong."""
    key = _key(raw)
    if kind == "ResourceSlice":
        book.put_slice(slice_from_dict(raw), name=key)
    elif kind == "DeviceClass":
        book.classes[key] = device_class_from_dict(raw)
    elif kind == "ResourceClaim":
        book.claims[key] = claim_from_dict(raw)
    elif kind == "ResourceClaimTemplate":
        book.templates[key] = template_from_dict(raw)
    elif kind == "DeviceTaintRule":
        book.rules[key] = taint_rule_from_dict(raw)
    else:
        raise MappingError(f"{kind} is not a DRA kind")
    return key


def forget(book: DraBook, kind: str, key: str) -> None:
    if kind == "ResourceSlice":
        book.put_slice(None, name=key)
    else:
        stores: dict[str, dict[str, Any]] = {
            "DeviceClass": book.classes,
            "ResourceClaim": book.claims,
            "ResourceClaimTemplate": book.templates,
            "DeviceTaintRule": book.rules,
        }
        stores[kind].pop(key, None)
