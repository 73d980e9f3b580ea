"""dcgm-exporter as a GPU telemetry source: its Prometheus text parsed into GpuSamples, and a
scraper that polls exporters (fixed URLs, or the exporter pods found in Kubernetes) and emits
them as events."""

from connectors.dcgm.endpoints import Discovery, Endpoint
from connectors.dcgm.exposition import Rejected, RejectKind
from connectors.dcgm.kube_discovery import KubeExporterDiscovery
from connectors.dcgm.samples import ParseResult, TimedSample, parse_exposition
from connectors.dcgm.scraper import DcgmScraper

__all__ = [
    "DcgmScraper",
    "Discovery",
    "Endpoint",
    "KubeExporterDiscovery",
    "ParseResult",
    "RejectKind",
    "Rejected",
    "TimedSample",
    "parse_exposition",
]
