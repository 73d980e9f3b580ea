"""Label and field selectors as the API server reads them (the subset gpufrag's watchers and
tests use: equality, inequality, set-based in/notin, exists/!exists; field selectors on the
fields the API server supports for each resource, anything else is a 400 as there)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FieldRequirement",
    "LabelRequirement",
    "SelectorError",
    "matches_fields",
    "matches_labels",
    "parse_field_selector",
    "parse_label_selector",
]

_KEY = r"[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")

COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
FIELDS_BY_PLURAL = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.schedulerName",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "nodes": frozenset({"spec.unschedulable"}),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
}


class SelectorError(ValueError):
    """A selector the API server would reject with 400 Bad Request."""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        match self.op:
            case "exists":
                return has
            case "!exists":
                return not has
            case "=":
                return has and value == self.values[0]
            case "!=":
                return not has or value != self.values[0]
            case "in":
                return has and value in self.values
            case "notin":
                return not has or value not in self.values
        raise AssertionError(self.op)


def _split_terms(text: str) -> list[str]:
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str | None) -> list[LabelRequirement]:
    out: list[LabelRequirement] = []
    for term in _split_terms(text or ""):
        if m := _SET.match(term):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            out.append(LabelRequirement(m.group(1), m.group(2), values))
        elif m := _EQ.match(term):
            op = "=" if m.group(2) in ("=", "==") else "!="
            out.append(LabelRequirement(m.group(1), op, (m.group(3),)))
        elif m := _EXISTS.match(term):
            out.append(LabelRequirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {term!r}")
    return out


def matches_labels(reqs: list[LabelRequirement], obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    path: str
    equal: bool
    value: str


def parse_field_selector(text: str | None, *, plural: str) -> list[FieldRequirement]:
    out: list[FieldRequirement] = []
    allowed = COMMON_FIELDS | FIELDS_BY_PLURAL.get(plural, frozenset())
    for term in _split_terms(text or ""):
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if m is None:
            raise SelectorError(f"invalid field selector term {term!r}")
        path = m.group(1)
        if path not in allowed:
            raise SelectorError(f"field label not supported: {path}")
        out.append(FieldRequirement(path, m.group(2) != "!=", m.group(3)))
    return out


def _field(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for step in path.split("."):
        cur = cur.get(step) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if cur is None:
        return "false" if path == "spec.unschedulable" else ""
    if isinstance(cur, dict):  # "source" on events selects by source.component
        return str(cur.get("component") or "")
    return str(cur)


def matches_fields(reqs: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    return all((_field(obj, r.path) == r.value) == r.equal for r in reqs)
