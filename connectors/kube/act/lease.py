"""One active actuator at a time, through a coordination.k8s.io/v1 Lease, the way client-go's
leader election does it.

Time is never compared across machines: a Lease held by someone else counts as expired when
this process has seen it unchanged for its leaseDurationSeconds, measured on its own monotonic
clock; the holder counts itself holder until ``renew_deadline_s`` after it *sent* its last
successful renewal. The server wrote that renewal after it was sent, and others start their
wait when they read it, later still, so with the deadline shorter than the duration (10 s of
15 s) the old holder has stopped before anyone else may start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from connectors.kube.act.lease_api import LeaseApi, LeaseRecord, LeaseUnavailable
from models import ActuatorSettings

__all__ = ["LeaseElector", "LeaseStore", "default_identity"]

log = logging.getLogger("connectors.kube")


class LeaseStore(Protocol):
    async def read(self) -> LeaseRecord | None: ...
    async def create(self, spec: dict[str, Any]) -> bool: ...
    async def replace(self, version: str, spec: dict[str, Any]) -> bool: ...


def default_identity() -> str:
    """Host name and a random part: two actuators on one host (or a restarted one) differ."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(at: datetime) -> str:
    # MicroTime wants exactly six fractional digits; isoformat() drops them at .000000.
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Acquires the Lease when it is free or expired, renews it every ``renew_interval_s``,
    and says at every moment whether this process may act (``holding``)."""

    def __init__(
        self,
        *,
        store: LeaseStore | None = None,
        api_client: Any = None,
        settings: ActuatorSettings,
        identity: str | None = None,
        on_lost: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if store is None:
            store = LeaseApi(api_client=api_client, settings=settings)
        self.store = store
        self.settings = settings
        self.identity = identity or settings.identity or default_identity()
        self.on_lost = on_lost
        self._monotonic = monotonic
        self._wall = wall
        self._held_until: float | None = None
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._acquired = asyncio.Event()

    def holding(self) -> bool:
        """True only until the renew deadline, even if the renewing task is stuck."""
        return self._held_until is not None and self._monotonic() < self._held_until

    async def wait_holding(self) -> None:
        """Returns once this process has acquired the Lease (it may have lost it since)."""
        await self._acquired.wait()

    def _lose(self, why: str) -> None:
        if self._held_until is None:
            return
        self._held_until = None
        self._acquired.clear()
        log.warning("actuator Lease lost (%s): enforcement stops", why)
        if self.on_lost is not None:
            self.on_lost(why)

    def _spec(self, previous: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
        spec = dict(previous or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if previous else 0
            )
        spec["holderIdentity"] = self.identity
        spec["leaseDurationSeconds"] = max(1, round(self.settings.lease_duration_s))
        spec["renewTime"] = _micro_time(now)
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One round; True when this process holds the Lease after it."""
        if self._held_until is not None and not self.holding():
            # A lapsed deadline is a loss even if this round renews: others may have acted.
            self._lose(f"not renewed within {self.settings.renew_deadline_s} s")
        sent = self._monotonic()
        record = await self.store.read()
        if record is None:
            ok = await self.store.create(self._spec(None, self._wall()))
            return self._after_write(ok, sent)
        if record.spec != self._observed:
            self._observed, self._observed_at = record.spec, sent
        holder = record.spec.get("holderIdentity")
        if holder and holder != self.identity:
            duration = float(record.spec.get("leaseDurationSeconds") or 0)
            if self._monotonic() < self._observed_at + duration:
                self._lose(f"held by {holder}")
                return False
        ok = await self.store.replace(record.version, self._spec(record.spec, self._wall()))
        return self._after_write(ok, sent)

    def _after_write(self, ok: bool, sent: float) -> bool:
        if not ok:  # someone else wrote first (409); the next read tells who
            return self.holding()
        if self._held_until is None:
            log.info("actuator Lease acquired by %s", self.identity)
        self._held_until = sent + self.settings.renew_deadline_s
        self._acquired.set()
        return True

    async def run(self, *, stop: asyncio.Event) -> None:
        """Until ``stop``: acquire, renew, and call ``on_lost`` when the Lease goes; then
        release it if held, so another actuator takes over at once."""
        s = self.settings
        while not stop.is_set():
            wait = s.renew_interval_s
            try:
                await asyncio.wait_for(self.try_acquire_or_renew(), s.request_timeout_s)
            except (LeaseUnavailable, TimeoutError) as exc:
                log.warning("actuator Lease: %s", exc)
                wait = s.renew_interval_s / 5
            if self._held_until is not None:
                # Wake at the deadline at the latest, so on_lost is called when it passes.
                wait = min(wait, max(0.0, self._held_until - self._monotonic()))
                if not self.holding():
                    self._lose(f"not renewed within {s.renew_deadline_s} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
        await self.release()

    async def release(self) -> None:
        """Give the Lease up (holder cleared, duration 1 s), as client-go does on shutdown."""
        if not self.holding():
            return
        self._held_until = None
        self._acquired.clear()
        with contextlib.suppress(LeaseUnavailable, TimeoutError):
            record = await asyncio.wait_for(self.store.read(), self.settings.request_timeout_s)
            if record is not None and record.spec.get("holderIdentity") == self.identity:
                spec = {**record.spec, "holderIdentity": None, "leaseDurationSeconds": 1}
                spec["renewTime"] = _micro_time(self._wall())
                await asyncio.wait_for(
                    self.store.replace(record.version, spec), self.settings.request_timeout_s
                )
