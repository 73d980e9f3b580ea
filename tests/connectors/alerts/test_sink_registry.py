"""Sink kinds by name, and a sink that is not HTTP: the settings switch sinks on (a URL, or a
name in ``sinks``), an unknown or unconfigured name is refused with what is known, and the
dispatcher gives any sink its retries, timeout, dead letters and start/stop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from connectors.alerts import Alert, SinkNotConfigured, sinks_from
from models.component_registry import UnknownComponent
from tests.connectors.alerts.alerting import DeadLetters, dispatching, settings, storm, until


def test_a_name_nobody_registered_is_refused_with_the_known_ones() -> None:
    with pytest.raises(UnknownComponent) as caught:
        sinks_from(settings(sinks=("pager",)))
    assert str(caught.value).startswith("unknown alert sink 'pager' (known: alertmanager, slack")


def test_a_built_in_sink_named_without_its_url_is_refused() -> None:
    with pytest.raises(SinkNotConfigured, match="'slack' is named in GPUFRAG_ALERTS__SINKS"):
        sinks_from(settings(sinks=("slack",)))
    named = sinks_from(settings(sinks=("webhook",), webhook_url="http://w"))
    assert [s.name for s in named] == ["webhook"]


@dataclass
class ListSink:
    """Keeps what it is sent; fails the first ``failures`` sends, or hangs when ``hang``."""

    failures: int = 0
    hang: bool = False
    name: str = "list"
    resends: bool = False
    max_batch: int = 10
    got: list[tuple[str, str]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    async def start(self) -> None:
        self.calls.append("start")

    async def send(self, alerts: Sequence[Alert], *, now: datetime) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("disk on fire")
        self.got += [(a.labels["node"], "resolved" if a.resolved else "firing") for a in alerts]

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_a_sink_that_is_not_http_gets_retries_and_start_and_stop() -> None:
    sink = ListSink(failures=2)
    async with dispatching([sink], settings(), DeadLetters()) as (d, _):
        d.submit(storm("n1"))
        await until(lambda: bool(sink.got))
        d.submit(storm("n1", resolved_after_s=5))
        await until(lambda: len(sink.got) == 2)
    assert sink.got == [("n1", "firing"), ("n1", "resolved")]
    assert sink.calls == ["start", "stop"]


@pytest.mark.parametrize(
    ("sink", "detail"),
    [
        (ListSink(failures=10**6), "RuntimeError: disk on fire"),
        (ListSink(hang=True), "no answer within the timeout"),
    ],
    ids=["raises", "hangs"],
)
async def test_a_sink_that_fails_or_hangs_is_bounded_and_dead_lettered(
    sink: ListSink, detail: str
) -> None:
    dead = DeadLetters()
    async with dispatching([sink], settings(give_up_after_s=0.3, timeout_s=0.1), dead) as (d, _):
        d.submit(storm("n1"))
        await until(lambda: len(dead.kept) == 1)
    assert (dead.kept[0].source, dead.kept[0].reason) == ("alerts/list", "sink_down")
    assert dead.kept[0].detail.endswith(detail), dead.kept[0].detail
