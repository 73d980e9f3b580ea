"""One resource's list and watch calls through kubernetes-asyncio's generated API, with the
responses left raw (``_preload_content=False``) so the reflector sees every status code: a
410 must re-list, a 404 means the CRD is not installed, anything else is retried."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s

from connectors.kube.objects import Undecodable
from connectors.kube.watch.model_decode import decode_model
from models import KubeResource, KubeSettings

__all__ = [
    "Gone",
    "KubeApiError",
    "NotServed",
    "Page",
    "ResourceClient",
    "ResourceType",
    "resource_types",
]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """Where a resource lives in the API and how its objects are decoded."""

    resource: KubeResource
    group: str
    """"" for the core group."""
    version: str
    plural: str
    kind: str
    namespaced: bool
    model: str | None = None
    """kubernetes-asyncio model name of one object ("V1Pod"); None: custom resource, a dict."""
    core_calls: tuple[str | None, str] | None = None
    """CoreV1Api method names (namespaced, cluster-wide) for built-in resources."""

    @property
    def describe(self) -> str:
        return f"{self.group or 'core'}/{self.version} {self.plural}"


DRA = "resource.k8s.io"


def resource_types(settings: KubeSettings) -> dict[KubeResource, ResourceType]:
    kueue, volcano = settings.kueue_version, settings.volcano_version
    r = KubeResource
    types = [
        ResourceType(
            r.PODS,
            "",
            "v1",
            "pods",
            "Pod",
            True,
            "V1Pod",
            ("list_namespaced_pod", "list_pod_for_all_namespaces"),
        ),
        ResourceType(r.NODES, "", "v1", "nodes", "Node", False, "V1Node", (None, "list_node")),
        ResourceType(
            r.EVENTS,
            "",
            "v1",
            "events",
            "Event",
            True,
            "CoreV1Event",
            ("list_namespaced_event", "list_event_for_all_namespaces"),
        ),
        ResourceType(
            r.RESOURCE_QUOTAS,
            "",
            "v1",
            "resourcequotas",
            "ResourceQuota",
            True,
            "V1ResourceQuota",
            ("list_namespaced_resource_quota", "list_resource_quota_for_all_namespaces"),
        ),
        ResourceType(r.KUEUE_WORKLOADS, "kueue.x-k8s.io", kueue, "workloads", "Workload", True),
        ResourceType(
            r.KUEUE_CLUSTER_QUEUES, "kueue.x-k8s.io", kueue, "clusterqueues", "ClusterQueue", False
        ),
        ResourceType(
            r.KUEUE_LOCAL_QUEUES, "kueue.x-k8s.io", kueue, "localqueues", "LocalQueue", True
        ),
        ResourceType(
            r.VOLCANO_POD_GROUPS, "scheduling.volcano.sh", volcano, "podgroups", "PodGroup", True
        ),
        ResourceType(r.VOLCANO_QUEUES, "scheduling.volcano.sh", volcano, "queues", "Queue", False),
        # DRA's objects are read as the API server's JSON (connectors/kube/dra/decode.py)
        ResourceType(r.RESOURCE_SLICES, DRA, "v1", "resourceslices", "ResourceSlice", False),
        ResourceType(r.DEVICE_CLASSES, DRA, "v1", "deviceclasses", "DeviceClass", False),
        ResourceType(r.RESOURCE_CLAIMS, DRA, "v1", "resourceclaims", "ResourceClaim", True),
        ResourceType(
            r.RESOURCE_CLAIM_TEMPLATES,
            DRA,
            "v1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            True,
        ),
        ResourceType(r.DEVICE_TAINT_RULES, DRA, "v1", "devicetaintrules", "DeviceTaintRule", False),
    ]
    return {t.resource: t for t in types}


class KubeApiError(Exception):
    """A non-success answer from the API server (status code and its Status message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


class Gone(KubeApiError):
    """410: the resourceVersion (or continue token) is older than the server keeps."""


class NotServed(KubeApiError):
    """404 on the collection: the API server does not serve this resource (no CRD)."""


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Any]
    resource_version: str
    continue_token: str | None


def _status_message(body: bytes) -> str:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode(errors="replace")
    if isinstance(data, dict):
        return str(data.get("message") or data.get("reason") or "")[:300]
    return ""


def error_for(status: int, body: bytes) -> KubeApiError:
    message = _status_message(body)
    if status == 410:
        return Gone(status, message)
    if status == 404:
        return NotServed(status, message)
    return KubeApiError(status, message)


class ResourceClient:
    """List and watch one resource, with the configured namespace and selectors."""

    def __init__(
        self,
        *,
        api_client: Any,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        request_timeout_s: float,
    ) -> None:
        self.api_client = api_client
        self.rtype = rtype
        self.namespace = namespace if rtype.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.request_timeout_s = request_timeout_s

    async def _call(self, **kwargs: Any) -> aiohttp.ClientResponse:
        if self.label_selector:
            kwargs["label_selector"] = self.label_selector
        if self.field_selector:
            kwargs["field_selector"] = self.field_selector
        kwargs["_preload_content"] = False
        t = self.rtype
        if t.core_calls is not None:
            core = k8s.CoreV1Api(self.api_client)
            namespaced, cluster_wide = t.core_calls
            if self.namespace is not None and namespaced is not None:
                response = await getattr(core, namespaced)(self.namespace, **kwargs)
            else:
                response = await getattr(core, cluster_wide)(**kwargs)
        else:
            custom = k8s.CustomObjectsApi(self.api_client)
            if self.namespace is not None:
                response = await custom.list_namespaced_custom_object(
                    t.group, t.version, self.namespace, t.plural, **kwargs
                )
            else:
                # /apis/<group>/<version>/<plural>: all namespaces for a namespaced resource.
                response = await custom.list_cluster_custom_object(
                    t.group, t.version, t.plural, **kwargs
                )
        assert isinstance(response, aiohttp.ClientResponse)
        return response

    def decode(self, raw: dict[str, Any]) -> Any:
        """One object from its JSON: a kubernetes-asyncio model (the one the client's own
        ``deserialize`` builds, at a fraction of its cost), or the dict for CRDs."""
        if self.rtype.model is None:
            return raw
        return decode_model(raw, self.rtype.model)

    def raw_of(self, obj: Any) -> Any:
        """The object as the API server wrote it (camelCase, no nulls), for a dead letter:
        the model's own ``to_dict`` is snake_case and full of nulls nobody sent."""
        if isinstance(obj, Undecodable):
            return obj.raw
        if isinstance(obj, dict):
            return obj
        try:
            return self.api_client.sanitize_for_serialization(obj)
        except Exception:  # a half-built model: raw_text falls back to what it can show
            return obj

    def read(self, raw: Any) -> Any:
        """``decode``, or an ``Undecodable`` keeping the item's place: one object the client
        cannot read must not cost the page (up to ``page_size`` objects) it came in."""
        if not isinstance(raw, dict):
            return Undecodable(raw={"item": raw}, error=f"not an object: {type(raw).__name__}")
        try:
            return self.decode(raw)
        except Exception as exc:
            return Undecodable(raw=raw, error=f"{type(exc).__name__}: {exc}")

    async def list_page(self, *, limit: int, continue_token: str | None) -> Page:
        kwargs: dict[str, Any] = {
            "limit": limit,
            "_request_timeout": aiohttp.ClientTimeout(total=self.request_timeout_s),
        }
        if continue_token:
            kwargs["_continue"] = continue_token
        response = await self._call(**kwargs)
        async with response:
            body = await response.read()
            if response.status != 200:
                raise error_for(response.status, body)
        data = orjson.loads(body)
        meta = data.get("metadata") or {}
        items = [self.read(item) for item in data.get("items") or []]
        return Page(
            items=items,
            resource_version=str(meta.get("resourceVersion") or ""),
            continue_token=meta.get("continue") or None,
        )

    async def watch(self, *, resource_version: str, timeout_s: int) -> aiohttp.ClientResponse:
        """An open watch stream from ``resource_version``; the caller reads and releases it."""
        response = await self._call(
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_s,
            _request_timeout=aiohttp.ClientTimeout(
                total=None,
                connect=self.request_timeout_s,
                # A stream silent for longer than the server's own timeout is a dead one.
                sock_read=timeout_s + self.request_timeout_s,
            ),
        )
        if response.status != 200:
            async with response:
                body = await response.read()
            raise error_for(response.status, body)
        return response
