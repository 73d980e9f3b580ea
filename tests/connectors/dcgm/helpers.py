"""Shared by the DCGM tests: the fixture pages and a parse with a fixed scrape time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from connectors.dcgm import ParseResult, parse_exposition
from models import GpuSample

FIXTURES = Path(__file__).parent / "fixtures"
SCRAPED = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def page(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def parse(data: bytes | str, *, node: str | None = None) -> ParseResult:
    return parse_exposition(data, scraped_at=SCRAPED, default_node=node)


def by_gpu(result: ParseResult) -> dict[tuple[int, int | None], GpuSample]:
    return {(t.sample.gpu_index, t.sample.mig_instance): t.sample for t in result.samples}
