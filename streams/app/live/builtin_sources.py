"""The built-in live sources, each registered with one line, as an extension's would be: the
Kubernetes watchers, the dcgm-exporter scraper, and the NVML sampler."""

from __future__ import annotations

from connectors.dcgm import Endpoint
from connectors.dcgm.kube_discovery import KubeExporterDiscovery
from connectors.dcgm.scraper import DcgmScraper
from connectors.gpu.podresources import kubelet_assignments
from connectors.gpu.sampler import NvmlSampler
from connectors.kube import KubeSource
from connectors.live_stage import Emit
from models import EventKind
from streams.app.live.source_registry import LIVE_SOURCES, LiveSource, Runnable, SourceContext

__all__ = ["GPU_KINDS", "KUBE_KINDS"]

KUBE_KINDS = (EventKind.POD, EventKind.NODE, EventKind.SCHEDULER, EventKind.QUEUE)
GPU_KINDS = (EventKind.GPU_SAMPLE,)


async def kube_source(ctx: SourceContext) -> LiveSource:
    client = await ctx.kube_client()
    kube = ctx.settings.kube

    def build(emit: Emit) -> Runnable:
        return KubeSource(
            api_client=client,
            settings=kube,
            emit=emit,
            registry=ctx.registry,
            refusals=ctx.refusals,
        )

    return LiveSource(f"{kube.source}@{ctx.host}", KUBE_KINDS, build)


async def dcgm_source(ctx: SourceContext) -> LiveSource:
    d, plan = ctx.settings.dcgm, ctx.plan
    discovery: KubeExporterDiscovery | None = None
    if plan.dcgm_discover:
        discovery = KubeExporterDiscovery(
            api_client=await ctx.kube_client(),
            label_selector=d.discover_selector,
            namespace=d.discover_namespace,
            fallback_port=d.discover_port,
            request_timeout_s=ctx.settings.kube.request_timeout_s,
            page_size=ctx.settings.kube.page_size,
        )

    def build(emit: Emit) -> Runnable:
        return DcgmScraper(
            endpoints=[Endpoint(url) for url in plan.dcgm],
            discovery=discovery,
            discovery_interval_s=d.discover_interval_s,
            emit=emit,
            registry=ctx.registry,
            refusals=ctx.refusals,
            interval_s=d.interval_s,
            timeout_s=d.timeout_s,
            backoff_initial_s=d.backoff_initial_s,
            backoff_max_s=max(d.backoff_max_s, d.backoff_initial_s),
            max_body_bytes=d.max_page_bytes,
            min_timestamp=d.min_timestamp,
        )

    return LiveSource(f"dcgm@{ctx.host}", GPU_KINDS, build)


async def nvml_source(ctx: SourceContext) -> LiveSource:
    node, nv = ctx.plan.nvml_node or ctx.settings.nvml.node or ctx.host, ctx.settings.nvml

    def build(emit: Emit) -> Runnable:
        return NvmlSampler(
            node=node,
            interval_s=nv.interval_s,
            on_no_gpu="idle",
            emit=emit,
            refusals=ctx.refusals,
            pod_resources=kubelet_assignments(nv),
        )

    return LiveSource(f"nvml@{node}", GPU_KINDS, build)


LIVE_SOURCES.register("kube", kube_source)
LIVE_SOURCES.register("dcgm", dcgm_source)
LIVE_SOURCES.register("nvml", nvml_source)
