"""dcgm-exporter as a GPU telemetry source: its Prometheus text parsed into GpuSamples, and a
scraper that polls exporters (fixed URLs, or the exporter pods found in Kubernetes) and emits
them as events.

The package exports the parser; the scraper and the Kubernetes discovery (aiohttp,
kubernetes-asyncio) are imported from their modules, so `gpufrag dcgm-parse` and the rest of the
CLI do not load the HTTP and Kubernetes clients.
"""

from connectors.dcgm.endpoints import Discovery, Endpoint
from connectors.dcgm.exposition import Rejected, RejectKind
from connectors.dcgm.samples import ParseResult, TimedSample, parse_exposition

__all__ = [
    "Discovery",
    "Endpoint",
    "ParseResult",
    "RejectKind",
    "Rejected",
    "TimedSample",
    "parse_exposition",
]
