"""The soak's input, with its pods in a kube-apiserver of the soak's own so that the actuator's
evictions are real.

The events are the trace's, built as `gpufrag replay` and `gpufrag publish` build them. Every
pod they name is created in the API server (unbound: no kubelet runs here), and each pod event
then carries the uid the server gave the pod, because the actuator evicts with the uid as a
precondition: an eviction of a pod the events describe with another uid would be refused with a
409 and never reach the pod. Both runners read the same file, so both see the same uids.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import CoreV1Api, V1Namespace, V1ObjectMeta

from connectors.kube import api_client_for
from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import Envelope, KubeSettings, PodEvent, SchedulingEvent, to_json
from streams.app.lifecycle.settings_load import load_settings
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode

PodKey = tuple[str, str]
"""Namespace and name."""

CREATING_AT_ONCE = 16
"""Pod creations in flight together: about 20 s for the whole trace's 8,000 pods here, where
one at a time took minutes."""


def trace_events(*, node_limit: int | None, storms: int, seed: int) -> list[Envelope]:
    """The bundled trace under the FGD protocol with ``storms`` OOM storms injected, as
    `gpufrag replay --seed SEED --inject-oom-storms STORMS [--node-limit N]` replays it."""
    settings = load_settings()
    pods = bundled_pods_path()
    sim = SimulatedCluster(
        read_nodes(bundled_nodes_path(), settings=settings.trace),
        read_pods(pods, settings=settings.trace),
        trace=settings.trace,
        oom_storm=settings.detectors.oom_storm,
        options=ReplayOptions(
            mode=TraceMode.FGD,
            seed=seed,
            node_limit=node_limit,
            source=f"trace:{pods.stem}",
            inject_oom_storms=storms,
        ),
    )
    return list(sim.events())


def pods_of(envs: Iterable[Envelope]) -> set[PodKey]:
    payloads = (e.payload for e in envs)
    return {(p.pod.namespace, p.pod.name) for p in payloads if isinstance(p, PodEvent)}


async def create_pods(kubeconfig: Path, pods: set[PodKey]) -> dict[PodKey, str]:
    """Each pod created in its namespace (the namespaces first); the uids the server gave."""
    client = await api_client_for(KubeSettings(kubeconfig=str(kubeconfig)))
    core = CoreV1Api(client)
    try:
        for ns in sorted({ns for ns, _ in pods}):
            await core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=ns)))
        at_once = asyncio.Semaphore(CREATING_AT_ONCE)

        async def create(key: PodKey) -> tuple[PodKey, str]:
            ns, name = key
            body: Any = {  # the client takes a plain dict as well as a V1Pod
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"app": "soak"}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/soak:1"}]},
            }
            async with at_once:
                created = await core.create_namespaced_pod(ns, body)
            return key, str(created.metadata.uid)

        return dict(await asyncio.gather(*(create(k) for k in sorted(pods))))
    finally:
        await client.close()


def with_uids(envs: Iterable[Envelope], uids: dict[PodKey, str]) -> list[Envelope]:
    """The events with each pod's uid (and a scheduler event's pod uid) the server's."""
    out: list[Envelope] = []
    for env in envs:
        p = env.payload
        if isinstance(p, PodEvent):
            pod = p.pod.model_copy(update={"uid": uids[(p.pod.namespace, p.pod.name)]})
            env = env.model_copy(update={"payload": p.model_copy(update={"pod": pod})})
        elif isinstance(p, SchedulingEvent) and p.event.pod_name:
            key = (p.event.pod_namespace or "default", p.event.pod_name)
            if key in uids:
                event = p.event.model_copy(update={"pod_uid": uids[key]})
                env = env.model_copy(update={"payload": p.model_copy(update={"event": event})})
        out.append(env)
    return out


def write_events(path: Path, envs: Iterable[Envelope]) -> Path:
    path.write_bytes(b"".join(to_json(e) + b"\n" for e in envs))
    return path


async def pods_gone(kubeconfig: Path, pods: set[PodKey]) -> set[PodKey]:
    """Those of ``pods`` the server no longer holds, or holds only as terminating (no kubelet
    confirms a graceful deletion here)."""
    client = await api_client_for(KubeSettings(kubeconfig=str(kubeconfig)))
    core = CoreV1Api(client)
    try:
        present: set[PodKey] = set()
        for ns in sorted({ns for ns, _ in pods}):
            listed = await core.list_namespaced_pod(ns)
            present |= {
                (ns, str(item.metadata.name))
                for item in listed.items
                if item.metadata.deletion_timestamp is None
            }
        return pods - present
    finally:
        await client.close()
