"""The runner's internal messages on Kafka: bindings, peaks, profile deltas (and the quota
refusals that travel with them), cluster reports, dead letters.

JSON with a ``type`` and a ``v`` (version) field; profiles and tasks travel as their pydantic
JSON, so a consumer validates what it reads exactly as the models define it.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

from models import Envelope, NodeProfile, SchedulerEvent, TaskProfile, from_json
from models.analysis import InstantReport
from models.progress import SourceProgress
from streams.instants import OrderKey
from streams.profiles.join import (
    Binding,
    NodeProfileUpdate,
    PeakReport,
    QuotaRefused,
    TaskProfileUpdate,
)

VERSION = 1
Message = Binding | PeakReport | NodeProfileUpdate | TaskProfileUpdate | QuotaRefused


class DecodeError(ValueError):
    """A message that is not one of ours, or not of this version."""


def _dump(model: TaskProfile | NodeProfile | None) -> Any:
    return None if model is None else model.model_dump(mode="json")


def encode(msg: Message, *, order: OrderKey | None) -> bytes:
    """``order`` is the message's place in the source order (None only for a quota refusal
    with no event order: see its caller)."""
    at = msg.at.isoformat()
    if isinstance(msg, Binding):
        body: dict[str, Any] = {
            "type": "binding",
            "node": msg.node,
            "key": msg.key,
            "task": _dump(msg.task),
        }
    elif isinstance(msg, PeakReport):
        body = {"type": "peak", "key": msg.key, "node": msg.node, "used_mib": msg.used_mib}
    elif isinstance(msg, NodeProfileUpdate):
        body = {"type": "node", "name": msg.name, "profile": _dump(msg.profile)}
    elif isinstance(msg, QuotaRefused):
        body = {"type": "quota_refused", "event": msg.event.model_dump(mode="json")}
    else:
        body = {"type": "task", "key": msg.key, "profile": _dump(msg.profile)}
    body["v"] = VERSION
    body["at"] = at
    if order is not None:
        body["order"] = [
            order.at.isoformat(),
            order.source,
            order.seq,
            order.id,
            order.rank,
            order.sub,
        ]
    return orjson.dumps(body)


def encode_progress(progress: SourceProgress) -> bytes:
    return progress.model_dump_json().encode()


def _progress(body: Any, data: bytes) -> SourceProgress | None:
    if isinstance(body, dict) and body.get("kind") == "progress":
        return SourceProgress.model_validate_json(data)
    return None


def decode_input(data: bytes) -> Envelope | SourceProgress:
    """An input topic's record: an event, or a source's progress report."""
    if data.startswith(b'{"kind"'):
        progress = _progress(orjson.loads(data), data)
        if progress is not None:
            return progress
    return from_json(Envelope, data)


def decode(data: bytes) -> tuple[Message, OrderKey | None] | SourceProgress:
    """An internal topic's record: a message with its order, or a stage's progress report."""
    try:
        body = orjson.loads(data)
        progress = _progress(body, data)
        if progress is not None:
            return progress
        if body.get("v") != VERSION:
            raise DecodeError(f"unsupported message version {body.get('v')!r}")
        at = datetime.fromisoformat(body["at"])
        raw_order = body.get("order")
        order = None
        if raw_order is not None:
            o_at, source, seq, id_, rank, sub = raw_order
            order = OrderKey(datetime.fromisoformat(o_at), seq, source, id_, rank, sub)
        return _message(body, at), order
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError(f"{type(exc).__name__}: {exc}") from None


def _message(body: dict[str, Any], at: datetime) -> Message:
    kind = body["type"]
    if kind == "binding":
        task = body["task"]
        return Binding(
            body["node"],
            body["key"],
            None if task is None else TaskProfile.model_validate(task),
            at,
        )
    if kind == "peak":
        return PeakReport(body["key"], body["node"], float(body["used_mib"]), at)
    if kind == "node":
        p = body["profile"]
        return NodeProfileUpdate(
            body["name"], None if p is None else NodeProfile.model_validate(p), at
        )
    if kind == "task":
        p = body["profile"]
        return TaskProfileUpdate(
            body["key"], None if p is None else TaskProfile.model_validate(p), at
        )
    if kind == "quota_refused":
        return QuotaRefused(SchedulerEvent.model_validate(body["event"]), at)
    raise DecodeError(f"unknown message type {kind!r}")


_REPORT = TypeAdapter(InstantReport)


def encode_report(report: InstantReport) -> bytes:
    """The cluster view's report on one instant (the embedded runner's ``InstantReport``):
    pydantic's JSON of the dataclass, its explanations' tasks as their model JSON."""
    return _REPORT.dump_json(report)


def decode_report(data: bytes) -> InstantReport:
    try:
        return _REPORT.validate_json(data)
    except ValidationError:
        raise
    except Exception as exc:
        raise DecodeError(f"{type(exc).__name__}: {exc}") from None


def describe_error(exc: Exception) -> str:
    """One line naming what is wrong; for a validation error, the fields and their problems."""
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(x) for x in e['loc']) or '(message)'}: {e['msg']}"
            for e in exc.errors()[:4]
        ]
        more = exc.error_count() - len(parts)
        return (
            f"invalid {exc.title}: " + "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
        )
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"


def dead_letter(*, reason: str, topic: str, partition: int, offset: int, raw: bytes) -> bytes:
    try:
        text: str | None = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return orjson.dumps(
        {
            "reason": reason,
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "value": text,
            "value_b64": None if text is not None else base64.b64encode(raw).decode(),
        }
    )
