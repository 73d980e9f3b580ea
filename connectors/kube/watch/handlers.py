"""What each watched resource turns into: a handler maps one object (given what was emitted for
it before) to its new state and the envelopes that state change produces. The reflector keeps
the state per object; handlers hold no per-object memory of their own, so the store is the
only thing that grows, and only with the cluster."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import ValidationError

from connectors.kube.dra.decode import claim_names_of
from connectors.kube.dra.dra_view import DraView
from connectors.kube.dra.overlay import ClaimUse
from connectors.kube.objects import MappingError, refused_fields
from connectors.kube.watch.failed_create import is_quota_refusal
from connectors.kube.watch.object_refusals import ObjectRefusals
from connectors.kube.watch.pods import GangLookup, oom_kills, pod_from_kube
from connectors.kube.watch.scheduling import event_count, event_time, oom_event, scheduler_event
from models import (
    Envelope,
    Frozen,
    GangRef,
    Node,
    NodeEvent,
    PayloadModel,
    Pod,
    PodEvent,
    QueueEvent,
    QueueObject,
    SchedulingEvent,
)

log = logging.getLogger(__name__)

__all__ = [
    "Clock",
    "Emit",
    "EventHandler",
    "GangIndex",
    "Handler",
    "ModelHandler",
    "PodHandler",
    "PodState",
    "node_payload",
    "queue_payload",
]


S = TypeVar("S")
M = TypeVar("M", bound=Frozen)
Change = Literal["upsert", "delete"]
Emit = Callable[[Envelope], Awaitable[None]]
Clock = Callable[[], datetime]


class Handler(Protocol[S]):
    async def upsert(self, obj: Any, prev: S | None) -> tuple[S | None, list[Envelope]]:
        """New state of an added or changed object, and what to emit for the change."""
        ...

    async def delete(self, prev: S) -> list[Envelope]:
        """What to emit when an object with this state is gone."""
        ...


def node_payload(change: Change, node: Node) -> PayloadModel:
    return NodeEvent(change=change, node=node)


def queue_payload(change: Change, queue: QueueObject) -> PayloadModel:
    return QueueEvent(change=change, queue=queue)


class ModelHandler(Generic[M]):
    """Objects that map to one full-state model (nodes, quotas, queues): emit an upsert when
    the model changed, a delete when the object is gone or stops mapping to anything (a quota
    that no longer limits GPUs). Changes the model does not see (status heartbeats) emit
    nothing."""

    def __init__(
        self,
        *,
        mapper: Callable[[Any, datetime], M | None],
        payload: Callable[[Change, M], PayloadModel],
        source: str,
        clock: Clock,
        errors: ObjectRefusals,
        on_change: Callable[[M | None, M | None], Awaitable[None]] | None = None,
    ) -> None:
        self.mapper: Callable[[Any, datetime], M | None] = mapper
        self.payload: Callable[[Change, M], PayloadModel] = payload
        self.source = source
        self.clock = clock
        self.errors = errors
        self.on_change: Callable[[M | None, M | None], Awaitable[None]] | None = on_change

    def _env(self, change: Change, model: M) -> Envelope:
        return Envelope.wrap(
            self.payload(change, model), event_time=self.clock(), source=self.source
        )

    async def upsert(self, obj: Any, prev: M | None) -> tuple[M | None, list[Envelope]]:
        try:
            new = self.mapper(obj, self.clock())
        except MappingError as exc:
            self.errors.report(obj, exc)
            return prev, []
        if new == prev:
            return prev, []
        if self.on_change is not None:
            await self.on_change(prev, new)
        if new is None:
            assert prev is not None
            return None, [self._env("delete", prev)]
        return new, [self._env("upsert", new)]

    async def delete(self, prev: M) -> list[Envelope]:
        if self.on_change is not None:
            await self.on_change(prev, None)
        return [self._env("delete", prev)]


class GangIndex:
    """Volcano PodGroup sizes by (namespace, name), for the pods that name their group: a pod
    carries only the group's name, its PodGroup the size. Holds live PodGroups only."""

    def __init__(self) -> None:
        self.min_members: dict[tuple[str, str], int] = {}

    def lookup(self, namespace: str, name: str) -> int | None:
        return self.min_members.get((namespace, name))


@dataclass(frozen=True, slots=True)
class PodState:
    pod: Pod | None
    """What was last emitted for the pod (None if it could not be read)."""
    ooms: frozenset[str]
    """OOM kills the pod status still shows, already emitted: a kill is emitted once, not on
    every later update or re-list of the pod."""
    base: Pod | None = None
    """The pod as its object says, before its DRA claims were laid over it."""
    claims: tuple[ClaimUse, ...] = ()


class PodHandler:
    """Pods: full-state upserts when the pod's model changes, and one OOMKilled scheduling
    event per container run the status reports as OOM killed."""

    def __init__(
        self,
        *,
        gangs: GangLookup,
        source: str,
        clock: Clock,
        errors: ObjectRefusals,
        dra: DraView | None = None,
    ) -> None:
        self.gangs = gangs
        self.source = source
        self.clock = clock
        self.errors = errors
        self.dra = dra

    def _env(self, payload: PayloadModel, at: datetime) -> Envelope:
        return Envelope.wrap(payload, event_time=at, source=self.source)

    def _with_claims(self, pod: Pod, claims: tuple[ClaimUse, ...], obj: Any) -> Pod:
        if not claims or self.dra is None:
            return pod
        try:
            return self.dra.pod(pod, claims)
        except MappingError as exc:
            if obj is not None:
                self.errors.report(obj, exc)
            return pod

    async def upsert(self, obj: Any, prev: PodState | None) -> tuple[PodState, list[Envelope]]:
        now = self.clock()
        out: list[Envelope] = []
        pod = prev.pod if prev is not None else None
        base = prev.base if prev is not None else None
        claims = prev.claims if prev is not None else ()
        try:
            base = pod_from_kube(obj, gangs=self.gangs, now=now)
        except MappingError as exc:
            self.errors.report(obj, exc)
        else:
            claims = claim_names_of(obj)
            mapped = self._with_claims(base, claims, obj)
            if mapped != pod:
                # The upsert goes first: an OOM of a pod nobody has heard of is dropped.
                out.append(self._env(PodEvent(change="upsert", pod=mapped), now))
            pod = mapped
        kills = oom_kills(obj)
        seen = prev.ooms if prev is not None else frozenset()
        meta = obj.metadata
        for kill in kills:
            if kill.identity in seen:
                continue
            event = oom_event(
                kill,
                namespace=meta.namespace or "default",
                name=meta.name,
                uid=meta.uid or "",
                node=obj.spec.node_name if obj.spec else None,
            )
            # Stamped with the kill's own time, so the same kill seen again after a restart of
            # gpufrag gets the same envelope id and deduplicates downstream.
            try:
                out.append(self._env(SchedulingEvent(event=event), kill.finished_at or now))
            except ValidationError as exc:  # a kill time past any clock: refuse the kill only
                self.errors.report(obj, refused_fields(exc, where=f"OOM kill of {kill.container}"))
        ooms = frozenset(k.identity for k in kills)
        return PodState(pod=pod, ooms=ooms, base=base, claims=claims), out

    async def delete(self, prev: PodState) -> list[Envelope]:
        if prev.pod is None:
            return []
        return [self._env(PodEvent(change="delete", pod=prev.pod), self.clock())]

    def regang(
        self, namespace: str, group: str, min_member: int
    ) -> Callable[[PodState], tuple[PodState, list[Envelope]]]:
        """A restate function giving pods of one Volcano PodGroup its current size."""

        def change(state: PodState) -> tuple[PodState, list[Envelope]]:
            pod = state.pod
            if (
                pod is None
                or pod.gang is None
                or pod.namespace != namespace
                or pod.gang.name != group
                or pod.gang.min_member == min_member
            ):
                return state, []
            gang = {"gang": GangRef(name=group, min_member=min_member)}
            new = pod.model_copy(update=gang)
            base = state.base.model_copy(update=gang) if state.base is not None else None
            env = self._env(PodEvent(change="upsert", pod=new), self.clock())
            return PodState(pod=new, ooms=state.ooms, base=base, claims=state.claims), [env]

        return change

    def reclaim(
        self, wanted: Callable[[PodState], bool]
    ) -> Callable[[PodState], tuple[PodState, list[Envelope]]]:
        """A restate function laying the claims over the pods ``wanted`` picks again, after
        a claim, class or slice they depend on changed."""

        def change(state: PodState) -> tuple[PodState, list[Envelope]]:
            if not state.claims or state.base is None or not wanted(state):
                return state, []
            try:
                new = self._with_claims(state.base, state.claims, None)
            except Exception:  # one pod's overlay must not stop the rest of the restate
                log.exception("DRA claims of %s could not be laid over it", state.base.key)
                return state, []
            if new == state.pod:
                return state, []
            env = self._env(PodEvent(change="upsert", pod=new), self.clock())
            return PodState(pod=new, ooms=state.ooms, base=state.base, claims=state.claims), [env]

        return change


class EventHandler:
    """Kubernetes Events with one of the configured reasons, and controllers' FailedCreate
    Events that say a ResourceQuota refused the pod (whatever the reasons: refused work has
    no pod, so that Event is its only trace). The state is the occurrence count already
    emitted, so a repeat (count 3 -> 5) emits count 2 and a re-list emits nothing new; other
    Events are kept (as a count) only to tell changes from replays."""

    def __init__(
        self, *, reasons: frozenset[str], source: str, clock: Clock, errors: ObjectRefusals
    ) -> None:
        self.reasons = reasons
        self.source = source
        self.clock = clock
        self.errors = errors

    async def upsert(self, obj: Any, prev: int | None) -> tuple[int, list[Envelope]]:
        try:
            count = event_count(obj)
        except MappingError as exc:
            self.errors.report(obj, exc)
            return prev or 0, []
        if obj.reason not in self.reasons and not is_quota_refusal(obj.reason, obj.message):
            return count, []
        new = count - prev if prev is not None else count
        if new <= 0:
            return max(count, prev or 0), []
        try:
            event = scheduler_event(obj, count=new)
            at = event_time(obj, now=self.clock())
            env = Envelope.wrap(SchedulingEvent(event=event), event_time=at, source=self.source)
        except ValidationError as exc:
            self.errors.report(obj, refused_fields(exc))
            return count, []
        except (MappingError, ValueError) as exc:
            self.errors.report(obj, MappingError(str(exc)))
            return count, []
        return count, [env]

    async def delete(self, prev: int) -> list[Envelope]:
        return []  # an Event expiring says nothing about the cluster
