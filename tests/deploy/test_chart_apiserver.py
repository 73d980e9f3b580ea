"""The chart's objects against the real kube-apiserver (RBAC authorization, as apiserver.sh runs
it): every value set accepted by a server-side dry run, the embedded set applied for real and
read back, and each ServiceAccount's rights proven by SubjectAccessReview."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.chart import VALUE_SETS, Helm
from tests.deploy.kube_http import Kube

pytestmark = [pytest.mark.deploy, pytest.mark.apiserver]

CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding")


def _release(helm: Helm, kube: Kube, value_set: str) -> tuple[str, list[dict[str, Any]]]:
    """A fresh namespace, and the value set rendered into it (names unique per run: the
    session's API server is shared, and a namespace never finishes terminating there)."""
    namespace = f"gf-{value_set[:10]}-{uuid.uuid4().hex[:6]}"
    kube.namespace(namespace)
    return namespace, helm.render(
        value_set, release=f"r{uuid.uuid4().hex[:6]}", namespace=namespace
    )


def _subset_mismatches(want: Any, got: Any, path: str = "") -> list[str]:
    """Where `got` lacks or differs from what `want` sets (the server adds defaults)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: {got!r} is not a map"]
        return [
            m for k, v in want.items() for m in _subset_mismatches(v, got.get(k), f"{path}.{k}")
        ]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: {got!r} != {want!r}"]
        return [
            m
            for i, (w, g) in enumerate(zip(want, got, strict=False))
            for m in _subset_mismatches(w, g, f"{path}[{i}]")
        ]
    return [] if want == got else [f"{path}: {got!r} != {want!r}"]


@pytest.fixture(scope="module")
def applied(helm: Helm, kube: Kube) -> Iterator[dict[str, tuple[str, list[dict[str, Any]]]]]:
    """The embedded and the enforcing value sets applied for real, cluster-scoped objects
    deleted afterwards."""
    done: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    try:
        for value_set in ("embedded", "actuator-enforce"):
            namespace, objects = _release(helm, kube, value_set)
            done[value_set] = (namespace, objects)
            for obj in objects:
                status, body = kube.create(obj, dry_run=False)
                assert status == 201, f"{obj['kind']}/{obj['metadata']['name']}: {body}"
        yield done
    finally:
        for _, objects in done.values():
            for obj in objects:
                if obj["kind"] in CLUSTER_SCOPED:
                    kube.delete(obj)


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_object_passes_a_server_side_dry_run(helm: Helm, kube: Kube, value_set: str) -> None:
    _, objects = _release(helm, kube, value_set)
    refused = []
    for obj in objects:
        status, body = kube.create(obj, dry_run=True)
        if status != 201:
            refused.append(
                f"{obj['kind']}/{obj['metadata']['name']}: {status} {body.get('message')}"
            )
    assert not refused, "\n".join(refused)
    assert len(objects) >= 5


def test_the_embedded_release_is_stored_as_rendered(kube: Kube, applied: dict[str, Any]) -> None:
    _, objects = applied["embedded"]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(
        [
            "Deployment",
            "ServiceAccount",
            "Service",
            "PersistentVolumeClaim",
            "ClusterRole",
            "ClusterRoleBinding",
            "NetworkPolicy",
        ]
    )
    for obj in objects:
        stored = kube.read(obj)
        want = {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}
        want["metadata"] = {
            k: obj["metadata"][k] for k in ("name", "labels") if k in obj["metadata"]
        }
        mismatches = _subset_mismatches(want, stored)
        assert not mismatches, f"{obj['kind']}/{obj['metadata']['name']}: {mismatches}"


def _service_account(objects: list[dict[str, Any]], component: str) -> tuple[str, str]:
    (sa,) = [
        o
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"].endswith(f"-{component}")
    ]
    return sa["metadata"]["namespace"], sa["metadata"]["name"]


def test_the_actuator_may_evict_and_hold_its_lease_but_not_delete(
    kube: Kube, applied: dict[str, Any]
) -> None:
    namespace, objects = applied["actuator-enforce"]
    sa = _service_account(objects, "actuate")
    allowed = [
        dict(verb="create", resource="pods", subresource="eviction", namespace="team-a"),
        dict(verb="get", resource="pods", namespace="team-a"),
        dict(verb="patch", resource="nodes", name="gpu-node-1"),
        dict(verb="create", group="coordination.k8s.io", resource="leases", namespace=namespace),
        dict(
            verb="update",
            group="coordination.k8s.io",
            resource="leases",
            namespace=namespace,
            name="gpufrag-actuator",
        ),
    ]
    refused = [
        dict(verb="delete", resource="pods", namespace="team-a"),
        dict(verb="get", resource="secrets", namespace=namespace),
        dict(verb="list", resource="secrets", namespace="team-a"),
        dict(verb="delete", resource="nodes", name="gpu-node-1"),
        dict(
            verb="update",
            group="coordination.k8s.io",
            resource="leases",
            namespace=namespace,
            name="someone-elses",
        ),
        dict(verb="create", group="coordination.k8s.io", resource="leases", namespace="team-a"),
        dict(verb="create", resource="pods", namespace="team-a"),
    ]
    assert [a for a in allowed if not kube.can(sa, **a)] == []
    assert [a for a in refused if kube.can(sa, **a)] == []


def test_the_watchers_may_read_but_not_change(kube: Kube, applied: dict[str, Any]) -> None:
    reads = [
        dict(verb="list", resource="pods"),
        dict(verb="watch", resource="nodes"),
        dict(verb="list", resource="events", namespace="team-a"),
        dict(verb="watch", group="kueue.x-k8s.io", resource="workloads"),
        dict(verb="list", group="scheduling.volcano.sh", resource="podgroups"),
        dict(verb="watch", group="resource.k8s.io", resource="resourceslices"),
        dict(verb="list", group="resource.k8s.io", resource="resourceclaims", namespace="team-a"),
        dict(verb="list", group="resource.k8s.io", resource="devicetaintrules"),
    ]
    changes = [
        dict(verb="create", group="resource.k8s.io", resource="devicetaintrules"),
        dict(verb="update", group="resource.k8s.io", resource="resourceclaims", namespace="team-a"),
        dict(verb="patch", resource="nodes", name="gpu-node-1"),
        dict(verb="create", resource="pods", subresource="eviction", namespace="team-a"),
        dict(verb="delete", resource="pods", namespace="team-a"),
        dict(verb="get", resource="secrets", namespace="team-a"),
    ]
    for value_set, component in (("embedded", "embedded"), ("actuator-enforce", "watch")):
        sa = _service_account(applied[value_set][1], component)
        assert [a for a in reads if not kube.can(sa, **a)] == [], value_set
        assert [a for a in changes if kube.can(sa, **a)] == [], value_set


def test_the_kafka_only_components_have_no_rights(kube: Kube, applied: dict[str, Any]) -> None:
    _, objects = applied["actuator-enforce"]
    for component in ("worker", "sink"):
        sa = _service_account(objects, component)
        assert not kube.can(sa, verb="list", resource="pods"), component
        assert not kube.can(sa, verb="get", resource="secrets", namespace=sa[0]), component
