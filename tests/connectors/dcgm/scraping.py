"""Shared by the scraper tests: a sink that keeps what is emitted, a condition wait with a
deadline (never a fixed sleep), and a scraper run for the length of a block."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry

from connectors.dcgm.scraper import DcgmScraper
from models import Envelope

__all__ = ["Sink", "metric", "running", "until"]


class Sink:
    def __init__(self) -> None:
        self.envs: list[Envelope] = []

    async def __call__(self, env: Envelope) -> None:
        self.envs.append(env)


def metric(reg: CollectorRegistry, name: str, url: str, **labels: str) -> float:
    return reg.get_sample_value(name, {"endpoint": url, **labels}) or 0.0


async def until(cond: Callable[[], bool], *, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


@asynccontextmanager
async def running(scraper: DcgmScraper) -> AsyncIterator[asyncio.Task[None]]:
    stop = asyncio.Event()
    task = asyncio.create_task(scraper.run(stop=stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
