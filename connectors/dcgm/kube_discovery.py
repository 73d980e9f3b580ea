"""Exporters found as Kubernetes pods: dcgm-exporter runs as a DaemonSet, so its pods come and
go with GPU nodes, and a static URL list goes stale the day a node is added or replaced.

Each discovery round lists the exporter pods afresh (paged) rather than watching them: the
scraper asks once a minute, a list of one pod per GPU node is small, and a lister has no
resourceVersion, reconnect or 410 state to get wrong. Any failure raises, so the scraper counts
it and keeps scraping the set it found last (an API server outage must not stop telemetry).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import aiohttp

from connectors.dcgm.endpoints import Endpoint

__all__ = [
    "CHART_SELECTOR",
    "DEFAULT_PORT",
    "OPERATOR_SELECTOR",
    "KubeExporterDiscovery",
    "pod_endpoint",
]

log = logging.getLogger(__name__)

OPERATOR_SELECTOR = "app=nvidia-dcgm-exporter"
"""The label the NVIDIA GPU Operator puts on its dcgm-exporter DaemonSet's pods."""
CHART_SELECTOR = "app.kubernetes.io/name=dcgm-exporter"
"""The label dcgm-exporter's own Helm chart puts on them (unless ``nameOverride`` is set)."""
DEFAULT_PORT = 9400
"""dcgm-exporter's default listen port (``:9400``), for pods that declare no container port."""
METRICS_PORT_NAME = "metrics"
"""The container port name both the operator and the Helm chart give the exporter's port."""


def _port_of(pod: Any, fallback: int) -> int:
    """The named ``metrics`` port wins: a pod with sidecars may declare other ports first."""
    first: int | None = None
    for c in pod.spec.containers or ():
        for p in c.ports or ():
            if p.container_port is None:
                continue
            if p.name == METRICS_PORT_NAME:
                return int(p.container_port)
            if first is None:
                first = int(p.container_port)
    return first if first is not None else fallback


def pod_endpoint(pod: Any, *, fallback_port: int = DEFAULT_PORT) -> Endpoint | None:
    """The exporter endpoint of one pod (a kubernetes-asyncio ``V1Pod``), or None when it cannot
    answer: not Running (its IP may be gone or reused), no IP yet, or being deleted (a
    terminating exporter is on its way out and its replacement will be listed)."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    if status is None or spec is None or status.phase != "Running" or not status.pod_ip:
        return None
    if meta is not None and meta.deletion_timestamp is not None:
        return None
    ip = str(status.pod_ip)
    host = f"[{ip}]" if ":" in ip else ip  # an IPv6 literal must be bracketed in a URL
    port = _port_of(pod, fallback_port)
    return Endpoint(url=f"http://{host}:{port}/metrics", node=spec.node_name or None)


class KubeExporterDiscovery:
    """A ``Discovery`` over the dcgm-exporter pods a label selector finds.

    The endpoint's node is the pod's ``spec.nodeName``, so the lines of an exporter run with
    ``--no-hostname`` are still attributed to the node the watchers know (a ``Hostname`` label,
    where there is one, still wins, as for static URLs).
    """

    def __init__(
        self,
        *,
        api_client: Any,
        label_selector: str = OPERATOR_SELECTOR,
        namespace: str | None = None,
        fallback_port: int = DEFAULT_PORT,
        request_timeout_s: float = 30.0,
        page_size: int = 500,
    ) -> None:
        """``api_client`` is a kubernetes-asyncio ``ApiClient`` the caller owns and closes
        (``gpufrag watch`` shares the watchers' one). ``namespace`` None lists all namespaces,
        which needs a ClusterRole; set it to the exporter's namespace to need only a Role."""
        if not label_selector.strip():
            raise ValueError("label_selector must not be empty: it would scrape every pod")
        if not 1 <= fallback_port <= 65535:
            raise ValueError("fallback_port must be a TCP port")
        if request_timeout_s <= 0:
            raise ValueError("request_timeout_s must be positive")
        if page_size < 1:
            raise ValueError("page_size must be positive")
        self.api_client = api_client
        self.label_selector = label_selector
        self.namespace = namespace
        self.fallback_port = fallback_port
        self.request_timeout_s = request_timeout_s
        self.page_size = page_size
        self._warned_empty = False

    async def endpoints(self) -> Sequence[Endpoint]:
        # Imported here: the parser and a scraper with static URLs must not pay for loading
        # kubernetes-asyncio's hundreds of models (``gpufrag dcgm-parse`` starts noticeably
        # slower with them).
        from kubernetes_asyncio import client as k8s

        core = k8s.CoreV1Api(self.api_client)
        found: list[Endpoint] = []
        matched = 0
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "label_selector": self.label_selector,
                "limit": self.page_size,
                "_request_timeout": aiohttp.ClientTimeout(total=self.request_timeout_s),
            }
            if token:
                kwargs["_continue"] = token
            if self.namespace is not None:
                page = await core.list_namespaced_pod(self.namespace, **kwargs)
            else:
                page = await core.list_pod_for_all_namespaces(**kwargs)
            for pod in page.items or ():
                matched += 1
                ep = pod_endpoint(pod, fallback_port=self.fallback_port)
                if ep is not None:
                    found.append(ep)
            token = page.metadata._continue if page.metadata is not None else None
            if not token:
                break
        self._log_empty(matched)
        return found

    def _log_empty(self, matched: int) -> None:
        """Once per spell: a selector that matches nothing (a chart install, whose label the
        default does not match) would otherwise scrape nothing without a word."""
        if matched == 0 and not self._warned_empty:
            where = f"namespace {self.namespace}" if self.namespace else "any namespace"
            log.warning(
                "DCGM exporter discovery: no pod matches %r in %s (the GPU Operator labels "
                "them %r, the dcgm-exporter Helm chart %r)",
                self.label_selector,
                where,
                OPERATOR_SELECTOR,
                CHART_SELECTOR,
            )
        self._warned_empty = matched == 0
