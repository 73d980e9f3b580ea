"""The Lease holder's own deadline, on a clock the test moves: renewals that keep failing end
the hold at ``renew_deadline_s`` after the last renewal was sent, before anyone else's wait of
``lease_duration_s`` can end; and ``holding`` turns false then even if nothing runs."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from connectors.kube import LeaseElector
from connectors.kube.act.lease_api import LeaseRecord, LeaseUnavailable
from models import ActuatorSettings

SETTINGS = ActuatorSettings(lease_duration_s=15, renew_deadline_s=10, renew_interval_s=2)


class Store:
    """One Lease in memory, with the API server's resourceVersion check; can be made to fail."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.failing = False
        self.writes = 0

    def _check(self) -> None:
        if self.failing:
            raise LeaseUnavailable("HTTP 503: the server is currently unable to handle it")

    async def read(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, spec: dict[str, Any]) -> bool:
        self._check()
        if self.record is not None:
            return False
        self.writes += 1
        self.record = LeaseRecord(version=str(self.writes), spec=spec)
        return True

    async def replace(self, version: str, spec: dict[str, Any]) -> bool:
        self._check()
        if self.record is None or self.record.version != version:
            return False
        self.writes += 1
        self.record = LeaseRecord(version=str(self.writes), spec=spec)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_failed_renewals_end_the_hold_at_the_deadline() -> None:
    store, clock, lost = Store(), Clock(), []
    a = LeaseElector(
        store=store, settings=SETTINGS, identity="a", monotonic=clock, on_lost=lost.append
    )
    assert await a.try_acquire_or_renew()
    clock.now += 2
    assert await a.try_acquire_or_renew()  # renewed: the deadline is now 1002 + 10
    store.failing = True

    clock.now = 1011.9
    assert a.holding()
    clock.now = 1012.0
    assert not a.holding()  # with no renewal round run at all
    assert lost == []
    with pytest.raises(LeaseUnavailable):  # the next round notices before it even reads
        await a.try_acquire_or_renew()
    assert lost == ["not renewed within 10.0 s"]


async def test_a_contender_waits_out_the_whole_duration() -> None:
    store, clock = Store(), Clock()
    a = LeaseElector(store=store, settings=SETTINGS, identity="a", monotonic=clock)
    b = LeaseElector(store=store, settings=SETTINGS, identity="b", monotonic=clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b starts its wait now (1000)

    clock.now = 1010.0
    assert not a.holding()  # a stopped at its deadline...
    clock.now = 1014.9
    assert not await b.try_acquire_or_renew()  # ...b still waits out the 15 s
    clock.now = 1015.0
    assert await b.try_acquire_or_renew()
    assert store.record is not None
    assert store.record.spec["holderIdentity"] == "b"
    assert store.record.spec["leaseTransitions"] == 1


async def test_the_run_loop_calls_on_lost_when_renewals_fail() -> None:
    store, lost = Store(), []
    settings = ActuatorSettings(lease_duration_s=1.5, renew_deadline_s=1.0, renew_interval_s=0.2)
    a = LeaseElector(store=store, settings=settings, identity="a", on_lost=lost.append)
    stop = asyncio.Event()
    run = asyncio.create_task(a.run(stop=stop))
    await asyncio.wait_for(a.wait_holding(), 20)
    store.failing = True
    deadline = asyncio.get_running_loop().time() + 20
    while not lost and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(run, 20)
    assert lost == ["not renewed within 1.0 s"]
    assert not a.holding()


def test_identities_differ_per_process_unless_configured() -> None:
    one = LeaseElector(store=Store(), settings=SETTINGS)
    two = LeaseElector(store=Store(), settings=SETTINGS)
    assert one.identity != two.identity
    assert one.identity.startswith(socket.gethostname())
    named = SETTINGS.model_copy(update={"identity": "gpufrag-0"})
    assert LeaseElector(store=Store(), settings=named).identity == "gpufrag-0"
