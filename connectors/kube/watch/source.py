"""The Kubernetes source: one reflector per enabled resource, all emitting through one
``emit`` callback, with their metrics on the registry passed in."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from connectors.kube.dra.decode import allocation_node
from connectors.kube.dra.dra_view import DraView
from connectors.kube.objects import get_path
from connectors.kube.watch.api import ResourceClient, resource_types
from connectors.kube.watch.dra_handlers import DraHandler, NodeHandler
from connectors.kube.watch.handlers import (
    Clock,
    Emit,
    EventHandler,
    GangIndex,
    Handler,
    ModelHandler,
    PodHandler,
    PodState,
    queue_payload,
)
from connectors.kube.watch.nodes import node_from_kube
from connectors.kube.watch.object_refusals import ObjectRefusals
from connectors.kube.watch.queue_objects import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    pod_group_from_dict,
    quota_from_kube,
    volcano_queue_from_dict,
    workload_from_dict,
)
from connectors.kube.watch.reflector import Reflector, ReflectorOptions
from connectors.kube.watch.watch_metrics import KubeMetrics
from connectors.refusals import RefusalLog
from models import KubeResource, KubeSettings, Node, QueueObject

__all__ = ["KubeSource"]

_QUEUE_MAPPERS = {
    KubeResource.RESOURCE_QUOTAS: quota_from_kube,
    KubeResource.KUEUE_WORKLOADS: workload_from_dict,
    KubeResource.KUEUE_CLUSTER_QUEUES: cluster_queue_from_dict,
    KubeResource.KUEUE_LOCAL_QUEUES: local_queue_from_dict,
    KubeResource.VOLCANO_POD_GROUPS: pod_group_from_dict,
    KubeResource.VOLCANO_QUEUES: volcano_queue_from_dict,
}
_DRA_KINDS = {
    KubeResource.RESOURCE_SLICES: "ResourceSlice",
    KubeResource.DEVICE_CLASSES: "DeviceClass",
    KubeResource.RESOURCE_CLAIMS: "ResourceClaim",
    KubeResource.RESOURCE_CLAIM_TEMPLATES: "ResourceClaimTemplate",
    KubeResource.DEVICE_TAINT_RULES: "DeviceTaintRule",
}


def _utc_now() -> datetime:
    return datetime.now(UTC)


class KubeSource:
    """Watches the configured resources until stopped; ``reflectors`` exposes each one's
    store and sync state (for health checks and tests)."""

    def __init__(
        self,
        *,
        api_client: Any,
        settings: KubeSettings,
        emit: Emit,
        registry: CollectorRegistry,
        refusals: RefusalLog,
        clock: Clock = _utc_now,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = KubeMetrics(registry)
        self.gangs = GangIndex()
        self.clock = clock
        rng = rng or random.Random()
        options = ReflectorOptions(
            page_size=settings.page_size,
            watch_timeout_s=settings.watch_timeout_s,
            backoff_initial_s=settings.backoff_initial_s,
            backoff_max_s=settings.backoff_max_s,
            missing_recheck_s=settings.missing_recheck_s,
        )
        types = resource_types(settings)
        self._pods: PodHandler | None = None
        self._nodes: NodeHandler | None = None
        self.dra = DraView()
        self.reflectors: dict[KubeResource, Reflector[Any]] = {}
        for resource in dict.fromkeys(settings.resources):
            client = ResourceClient(
                api_client=api_client,
                rtype=types[resource],
                namespace=settings.namespace,
                label_selector=settings.label_selectors.get(resource),
                field_selector=settings.field_selectors.get(resource),
                request_timeout_s=settings.request_timeout_s,
            )
            errors = ObjectRefusals(
                resource=resource.value, metrics=self.metrics, log=refusals, raw_of=client.raw_of
            )
            self.reflectors[resource] = Reflector(
                client=client,
                handler=self._handler(resource, errors),
                emit=emit,
                options=options,
                metrics=self.metrics,
                rng=random.Random(rng.random()),
                refusals=errors,
            )

    def _handler(self, resource: KubeResource, errors: ObjectRefusals) -> Handler[Any]:
        source, clock = self.settings.source, self.clock
        if resource is KubeResource.PODS:
            self._pods = PodHandler(
                gangs=self.gangs.lookup, source=source, clock=clock, errors=errors, dra=self.dra
            )
            return self._pods
        if resource is KubeResource.EVENTS:
            reasons = frozenset(self.settings.event_reasons)
            return EventHandler(reasons=reasons, source=source, clock=clock, errors=errors)
        if resource is KubeResource.NODES:
            pool_label = self.settings.pool_label

            def node(obj: Any, now: datetime) -> Node:
                return node_from_kube(obj, pool_label=pool_label, now=now)

            self._nodes = NodeHandler(
                mapper=node, view=self.dra, source=source, clock=clock, errors=errors
            )
            return self._nodes
        if resource in _DRA_KINDS:
            return DraHandler(
                kind=_DRA_KINDS[resource], view=self.dra, errors=errors, on_change=self._dra_changed
            )
        mapper = _QUEUE_MAPPERS[resource]

        def queue(obj: Any, now: datetime) -> QueueObject | None:
            del now
            return mapper(obj)

        return ModelHandler[QueueObject](
            mapper=queue,
            payload=queue_payload,
            source=source,
            clock=clock,
            errors=errors,
            on_change=self._gang_changed if resource is KubeResource.VOLCANO_POD_GROUPS else None,
        )

    async def _gang_changed(self, old: QueueObject | None, new: QueueObject | None) -> None:
        """Keep the gang index current and give already-known pods of the group its size."""
        current = new or old
        if current is None or (
            old is not None and new is not None and old.min_member == new.min_member
        ):
            return  # status changes of a PodGroup do not concern its pods
        key = (current.namespace or "default", current.name)
        if new is None or new.min_member is None:
            self.gangs.min_members.pop(key, None)
            size = 1
        else:
            self.gangs.min_members[key] = new.min_member
            size = new.min_member
        pods = self.reflectors.get(KubeResource.PODS)
        if pods is not None and self._pods is not None:
            await pods.restate(self._pods.regang(key[0], key[1], size))

    async def _dra_changed(
        self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        """Lay DRA's view over the nodes and pods the change can concern. A slice: its node
        (every node when it names none: a pool's counters can complete any node's pool) and
        every pod with claims (their cards are numbered by the node's devices, and a pending
        claim is read against every device). A claim: its node, the pods bound there (a
        claim that carves a GPU into MIG shapes renumbers the node's cards) and the pods
        naming it. A class or taint rule: every node and every pod with claims."""
        nodes: set[str] | None = None
        names: set[tuple[str, str]] | None = None
        if kind == "ResourceSlice":
            nodes = {n for o in (old, new) if o and (n := get_path(o, "spec", "nodeName"))}
            if not nodes:
                nodes = None  # a pool's node-less slice (its counters) can complete any node
        elif kind in ("ResourceClaim", "ResourceClaimTemplate"):
            nodes = {n for o in (old, new) if o and (n := allocation_node(o))}
            names = {
                (
                    get_path(o, "metadata", "namespace") or "default",
                    str(get_path(o, "metadata", "name")),
                )
                for o in (old, new)
                if o
            }
        nodes_reflector = self.reflectors.get(KubeResource.NODES)
        if nodes_reflector is not None and self._nodes is not None and nodes != set():
            await nodes_reflector.restate(self._nodes.relay(nodes))
        pods = self.reflectors.get(KubeResource.PODS)
        if pods is None or self._pods is None:
            return

        def wanted(state: PodState) -> bool:
            base = state.base
            if base is None:
                return False
            if kind == "ResourceSlice":
                return True  # a pending request is read against every node's devices
            if names is None:
                return nodes is None
            if nodes and base.node in nodes:
                return True
            return any((base.namespace, name) in names for _, name in state.claims)

        await pods.restate(self._pods.reclaim(wanted))

    def listed(self) -> bool:
        """Every resource has been listed once: the view is whole (a readiness answer)."""
        return all(r.synced.is_set() for r in self.reflectors.values())

    async def run(self, *, stop: asyncio.Event) -> None:
        """Run every reflector until ``stop`` is set. The API server being down, at start or
        later, is retried inside each reflector; this returns only on stop."""
        await asyncio.gather(*(r.run(stop=stop) for r in self.reflectors.values()))
