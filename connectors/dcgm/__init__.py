"""dcgm-exporter as a GPU telemetry source: its Prometheus text parsed into GpuSamples, and a
scraper that polls exporters and emits them as events."""

from connectors.dcgm.endpoints import Discovery, Endpoint
from connectors.dcgm.exposition import Rejected, RejectKind
from connectors.dcgm.samples import ParseResult, TimedSample, parse_exposition
from connectors.dcgm.scraper import DcgmScraper

__all__ = [
    "DcgmScraper",
    "Discovery",
    "Endpoint",
    "ParseResult",
    "RejectKind",
    "Rejected",
    "TimedSample",
    "parse_exposition",
]
