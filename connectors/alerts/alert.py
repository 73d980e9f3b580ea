"""A signal as an alert: the labels that route and group it, the words a person reads.

Labels are what Alertmanager matches routes, silences and inhibitions on, so they stay few and
low in cardinality (no counts, no times); everything else goes in the annotations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import orjson

from models import Scope, Signal
from models.settings import AlertSettings

__all__ = ["DESCRIPTION_MAX_CHARS", "Alert", "alert_of"]

DESCRIPTION_MAX_CHARS = 600
"""An unplaceable pod's evidence lists every blocking reason and near-miss node (2-4 KB of
JSON); a description is read on a phone or in a Slack line, so it stops at about 8 lines."""

_EVIDENCE_PLACES = ("node", "namespace", "queue")
"""Evidence keys that name where the signal is when its scope alone does not say (a pod's
node under ``near_memory_limit``)."""


@dataclass(frozen=True, slots=True)
class Alert:
    """One signal's state as every sink sends it; equal alerts are the same news."""

    fingerprint: str
    state: Literal["open", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    """The resolution time; ``None`` while the signal is open."""

    @property
    def resolved(self) -> bool:
        return self.state == "resolved"

    def alertmanager(self, *, now: datetime, open_for: timedelta) -> dict[str, object]:
        """Alertmanager's postable alert. An open one ends ``open_for`` after ``now``: without
        an end Alertmanager resolves it after its own resolve_timeout (5 min), and with one it
        resolves it at that time unless it is posted again."""
        ends = self.ends_at if self.ends_at is not None else now + open_for
        return {
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(ends),
        }

    def as_json(self) -> dict[str, object]:
        """The generic webhook's form: the state in words and no invented end."""
        return {
            "status": "resolved" if self.resolved else "firing",
            "fingerprint": self.fingerprint,
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": _iso(self.starts_at),
            "endsAt": None if self.ends_at is None else _iso(self.ends_at),
        }


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def alert_of(signal: Signal, settings: AlertSettings) -> Alert:
    labels = {
        "alertname": signal.kind,
        "severity": signal.severity.value,
        "cluster": settings.cluster,
        "scope": signal.scope.value,
        "fingerprint": signal.fingerprint,
    }
    for name, value in _places(signal).items():
        if value:  # Alertmanager drops empty labels anyway; "unknown" would group unrelated ones
            labels[name] = value
    annotations = {"summary": signal.summary, "description": _description(signal)}
    if settings.runbook_base_url:
        annotations["runbook_url"] = f"{settings.runbook_base_url.rstrip('/')}/{signal.kind}"
    return Alert(
        fingerprint=signal.fingerprint,
        state=signal.state,
        labels=labels,
        annotations=annotations,
        starts_at=signal.opened_at,
        ends_at=signal.resolved_at,
    )


def _places(signal: Signal) -> dict[str, str]:
    """node, namespace and queue from the scope id's shape (see the detectors: a GPU is
    ``node/index``, a namespace storm ``namespace[/queue]``, a pod ``namespace/name`` or
    ``namespace/gang:name``), then from the evidence for what the scope leaves open."""
    sid = signal.scope_id
    out: dict[str, str] = {}
    if signal.scope is Scope.NODE:
        out["node"] = sid
    elif signal.scope is Scope.GPU:
        out["node"] = sid.rsplit("/", 1)[0]
    elif signal.scope is Scope.QUEUE:
        out["queue"] = sid
    elif signal.scope is Scope.NAMESPACE:
        namespace, _, queue = sid.partition("/")
        out.update(namespace=namespace, queue=queue)
    elif signal.scope is Scope.POD and "/" in sid:
        out["namespace"] = sid.split("/", 1)[0]
    for key in _EVIDENCE_PLACES:
        value = signal.evidence.get(key)
        if not out.get(key) and isinstance(value, str):
            out[key] = value
    return out


def _description(signal: Signal) -> str:
    """The evidence as ``key: value`` lines, each value as compact JSON, cut to a readable
    length with a note of how much was left out."""
    lines = [
        f"{key}: {orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()}"
        for key, value in sorted(signal.evidence.items())
    ]
    text = "\n".join(lines) or "no evidence recorded"
    if len(text) > DESCRIPTION_MAX_CHARS:
        text = f"{text[:DESCRIPTION_MAX_CHARS]}... [{len(text) - DESCRIPTION_MAX_CHARS} chars cut]"
    return text
