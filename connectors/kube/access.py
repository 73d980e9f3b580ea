"""What the watchers, the exporter discovery and the actuator ask of the API server, as RBAC
permissions, and which of them the current user lacks, asked of the API server itself
(SelfSubjectAccessReview: the answer of the authorizer that will judge the real calls, so a
Role, a ClusterRole, an aggregated role or a webhook authorizer all count as they will).

The tables follow the calls the code makes: the watchers list and watch (``watch/api.py``);
discovery lists pods (``connectors/dcgm/kube_discovery.py``); the actuator reads a pod when an
eviction is refused with a conflict (``act/eviction.py``), evicts through ``pods/eviction``,
reads and patches nodes (``act/node_actions.py``) and reads, creates and updates its Lease
(``act/lease_api.py``). A change to those calls must change these tables."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s

from connectors.kube.watch.api import resource_types
from models import ActuatorSettings, KubeSettings
from models.settings import DcgmSettings

__all__ = [
    "AccessReviewError",
    "Permission",
    "actuator_permissions",
    "discovery_permissions",
    "lacking",
    "watcher_permissions",
]


@dataclass(frozen=True, slots=True)
class Permission:
    """One verb on one resource, where it is needed."""

    verb: str
    resource: str
    group: str = ""
    """"" for the core group."""
    subresource: str = ""
    namespace: str | None = None
    """For a namespaced resource: the one namespace, or None for every namespace."""
    namespaced: bool = True

    def describe(self) -> str:
        """As `kubectl auth can-i` takes it: ``create pods/eviction in all namespaces``."""
        name = self.resource + (f"/{self.subresource}" if self.subresource else "")
        name += f".{self.group}" if self.group else ""
        if not self.namespaced:
            return f"{self.verb} {name}"
        where = f"in namespace {self.namespace}" if self.namespace else "in all namespaces"
        return f"{self.verb} {name} {where}"

    def attributes(self) -> k8s.V1ResourceAttributes:
        return k8s.V1ResourceAttributes(
            verb=self.verb,
            group=self.group,
            resource=self.resource,
            subresource=self.subresource or None,
            # "" asks for all namespaces; a cluster-scoped resource ignores it
            namespace=(self.namespace or "") if self.namespaced else None,
        )


def watcher_permissions(settings: KubeSettings) -> list[Permission]:
    """list and watch on each resource the watchers follow (``settings.resources``), in the
    watched namespace (``settings.namespace``) or all of them; cluster-scoped ones (nodes,
    ClusterQueues, Volcano Queues) cluster-wide. Kueue and Volcano resources count whether or
    not their CRD is installed: the watchers ask for them again every ``missing_recheck_s``."""
    types = resource_types(settings)
    out = []
    for resource in settings.resources:
        t = types[resource]
        namespace = settings.namespace if t.namespaced else None
        out += [
            Permission(verb, t.plural, t.group, namespace=namespace, namespaced=t.namespaced)
            for verb in ("list", "watch")
        ]
    return out


def discovery_permissions(settings: DcgmSettings) -> list[Permission]:
    """dcgm-exporter discovery (``discover``): list pods in its namespace, or all of them."""
    if not settings.discover:
        return []
    return [Permission("list", "pods", namespace=settings.discover_namespace)]


def actuator_permissions(settings: ActuatorSettings) -> list[Permission]:
    """What an enforcing actuator calls: evictions in any namespace (the guardrails, not RBAC,
    keep it out of the protected ones), node reads and patches, its Lease in its namespace."""
    leases = "coordination.k8s.io"
    return [
        Permission("get", "pods"),
        Permission("create", "pods", subresource="eviction"),
        Permission("get", "nodes", namespaced=False),
        Permission("patch", "nodes", namespaced=False),
        *(
            Permission(verb, "leases", leases, namespace=settings.namespace)
            for verb in ("get", "create", "update")
        ),
    ]


class AccessReviewError(Exception):
    """The API server did not answer an access review (unreachable, or refused the review)."""


async def lacking(
    api_client: Any, permissions: list[Permission], *, timeout_s: float
) -> list[Permission]:
    """The permissions the API server denies to the client's user, in the order given.

    One review per permission, all at once (a full set is about 30 reviews; the API server
    answers each in milliseconds). A review that is not answered raises AccessReviewError,
    since then nothing is known about any of them."""
    api = k8s.AuthorizationV1Api(api_client)
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def allowed(permission: Permission) -> bool:
        body = k8s.V1SelfSubjectAccessReview(
            spec=k8s.V1SelfSubjectAccessReviewSpec(resource_attributes=permission.attributes())
        )
        review = await api.create_self_subject_access_review(body, _request_timeout=timeout)
        return bool(review.status and review.status.allowed)

    unique = list(dict.fromkeys(permissions))
    answers = await asyncio.gather(*(allowed(p) for p in unique), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, k8s.ApiException):
            raise AccessReviewError(
                f"the API server refused the access review: HTTP {answer.status} {answer.reason}"
            ) from answer
        if isinstance(answer, BaseException):
            raise AccessReviewError(_reason(answer, timeout_s)) from answer
    allowed_by = dict(zip(unique, answers, strict=True))
    return [p for p in permissions if not allowed_by[p]]


def _reason(exc: BaseException, timeout_s: float) -> str:
    """aiohttp's connection errors name the address; a timeout says nothing by itself."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return " ".join(str(exc).split()) or type(exc).__name__
