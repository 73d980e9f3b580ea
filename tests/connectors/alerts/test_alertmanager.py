"""Against a real Alertmanager (Debian's prometheus-alertmanager on loopback): what gpufrag
posts is what Alertmanager holds, a resolution ends the alert, and an Alertmanager stopped
mid-run and started again (it keeps alerts in memory only) ends up with every alert."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from connectors.alerts import AlertmanagerSink
from tests.connectors.alerts.alerting import (
    OPENED,
    DeadLetters,
    dispatching,
    metric,
    namespace_storm,
    settings,
    storm,
    until,
)
from tests.connectors.alerts.alertmanager_proc import Alertmanager

pytestmark = pytest.mark.alertmanager


@pytest.fixture
async def am(tmp_path: Path) -> AsyncIterator[Alertmanager]:
    server = Alertmanager(tmp_path)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _by_node(alerts: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    out = {}
    for a in alerts:
        labels = a["labels"]
        assert isinstance(labels, dict)
        out[labels.get("node") or labels.get("namespace")] = a
    return out


async def test_posted_alerts_appear_with_their_labels_and_annotations(am: Alertmanager) -> None:
    s = settings(alertmanager_url=am.url)
    dead = DeadLetters()
    async with dispatching([AlertmanagerSink(am.url, s.resend_interval_s)], s, dead) as (d, _):
        d.submit(storm())
        d.submit(namespace_storm("team-a", "research"))

        async def both() -> bool:
            return len(await am.alerts()) == 2

        await until(both)
        got = _by_node(await am.alerts())
    node = got["gpu-h200-07"]
    assert node["labels"] == {
        "alertname": "oom_storm",
        "severity": "critical",
        "cluster": "test-cluster",
        "scope": "node",
        "node": "gpu-h200-07",
        "fingerprint": storm().fingerprint,
    }
    annotations = node["annotations"]
    assert isinstance(annotations, dict)
    assert annotations["summary"] == storm().summary
    assert annotations["runbook_url"] == "https://runbooks.example/gpufrag/oom_storm"
    assert "victims" in annotations["description"]
    assert node["startsAt"] == OPENED.isoformat().replace("+00:00", ".000Z")
    assert node["status"] == {"inhibitedBy": [], "silencedBy": [], "state": "active"}
    ns_labels = got["team-a"]["labels"]
    assert isinstance(ns_labels, dict)
    assert (ns_labels["namespace"], ns_labels["queue"], ns_labels["severity"]) == (
        "team-a",
        "research",
        "warning",
    )
    assert not dead.kept


async def test_a_resolved_signal_ends_its_alert(am: Alertmanager) -> None:
    s = settings(alertmanager_url=am.url)
    async with dispatching([AlertmanagerSink(am.url, s.resend_interval_s)], s, DeadLetters()) as (
        d,
        _,
    ):
        d.submit(storm())

        async def listed() -> bool:
            return len(await am.alerts()) == 1

        await until(listed)
        d.submit(storm(resolved_after_s=300))

        async def ended() -> bool:
            return await am.alerts() == []

        await until(ended)
        # nothing re-sends the open alert after its resolution
        assert not d.lanes[0].open
        assert await am.alerts() == []


async def test_an_alertmanager_restarted_mid_run_loses_no_alert(am: Alertmanager) -> None:
    s = settings(alertmanager_url=am.url)
    dead = DeadLetters()
    async with dispatching([AlertmanagerSink(am.url, s.resend_interval_s)], s, dead) as (d, reg):
        d.submit(storm("before-outage"))
        d.submit(storm("resolved-in-outage"))

        async def two() -> bool:
            return len(await am.alerts()) == 2

        await until(two)
        await am.stop()
        d.submit(storm("during-outage"))
        d.submit(storm("resolved-in-outage", resolved_after_s=60))
        await until(
            lambda: (
                metric(
                    reg,
                    "gpufrag_alerts_failed_posts_total",
                    sink="alertmanager",
                    reason="unreachable",
                )
                >= 2
            )
        )
        assert d.pending == 2  # nothing dropped while it is down
        await am.start()  # same port, empty memory

        async def back() -> bool:
            return set(_by_node(await am.alerts())) == {"before-outage", "during-outage"}

        await until(back)
    assert not dead.kept
