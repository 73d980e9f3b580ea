"""One place where a watcher refuses an object: the mapping (handlers) and the reflector
(decode, unexpected failures, garbled watch lines) count, describe and dead-letter the same
way, so a refusal reads the same whichever layer met the problem."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.kube.objects import MappingError, identity_of, name_of, raw_text
from connectors.kube.watch.watch_metrics import KubeMetrics
from connectors.refusals import RefusalLog

__all__ = ["ObjectRefusals"]


class ObjectRefusals:
    """One per watched resource. An object that cannot be passed on is refused (counted,
    logged now and then, dead-lettered) and the watch goes on: one bad object must not stop the
    stream for the rest of the cluster. Refused again at each new version: a node's status
    update every few minutes repeats it, and the dead letter's id keeps identical repeats to
    one row."""

    def __init__(
        self,
        *,
        resource: str,
        metrics: KubeMetrics,
        log: RefusalLog,
        raw_of: Callable[[Any], Any],
    ) -> None:
        self.resource = resource
        self.metrics = metrics
        self.log = log
        self.raw_of = raw_of
        """The object as the API server sent it (the client's serializer)."""

    def refuse(self, obj: Any, *, reason: str, detail: str, metric_reason: str = "") -> None:
        """``metric_reason`` labels gpufrag_kube_errors_total (default ``object:<reason>``)."""
        rv = identity_of(obj)[1]
        self.refuse_raw(
            reason=reason,
            detail=f"{name_of(obj)} (resourceVersion {rv or '?'}): {detail}",
            raw=raw_text(self.raw_of(obj)),
            metric_reason=metric_reason,
        )

    def refuse_raw(
        self, *, reason: str, detail: str, raw: str | bytes, metric_reason: str = ""
    ) -> None:
        """What is not even an object (a watch line that is not JSON)."""
        self.metrics.errors.labels(self.resource, metric_reason or f"object:{reason}").inc()
        self.log.refuse(source=f"kube/{self.resource}", reason=reason, detail=detail, raw=raw)

    def report(self, obj: Any, exc: MappingError) -> None:
        """A mapping error: the object read, but not into gpufrag's models."""
        self.refuse(obj, reason="mapping", detail=f"{exc}; not emitted", metric_reason="mapping")
