"""The domain metrics: what the cluster looks like and what the acting step did, as
Prometheus families named by the metrics contract (docs/metrics.md).

The gauges come from the latest cluster report (``InstantReport`` with its breakdown), so
every gauge of one scrape describes one event-time instant, the one
``gpufrag_cluster_report_timestamp_seconds`` names; a pool, model or reason that is gone
from the report is gone from the scrape. The counters count audit records as they pass.
Values are read when scraped (a custom collector), so an emission costs a few assignments.

Hosts: the embedded runner's ``metrics`` output (``watch``, ``replay``), the Faust worker's
cluster stage (each evaluated instant, in process), and the actuator (the records of what
it carried out).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from models import Action, ActionOutcome
from models.analysis import BlockReason, InstantReport
from streams.pipeline import InstantOutput
from streams.runner.embedded import Emission, Failure

__all__ = ["ActionTally", "ActionsCollector", "DomainMetrics", "domain_metrics_for"]

NONE = "none"
"""The label value of a node with no pool or no GPU model: an empty value reads as no label."""
STATES = ("allocated", "idle", "stranded", "unhealthy")


class ActionTally:
    """Audit records by kind, mode and outcome, and gate refusals by the limit's name."""

    def __init__(self) -> None:
        self.actions: Counter[tuple[str, str, str]] = Counter()
        self.refusals: Counter[str] = Counter()

    def count(self, action: Action) -> None:
        self.actions[(str(action.kind), action.mode.value, action.outcome.value)] += 1
        rule = action.evidence.get("refused_rule")
        if action.outcome is ActionOutcome.REFUSED and isinstance(rule, str):
            # only the gate's refusals carry a rule; the actuator's own (no Lease) do not
            self.refusals[rule] += 1

    def families(self) -> Iterator[Metric]:
        actions = CounterMetricFamily(
            "gpufrag_actions",
            "Audit records of actions, by kind, mode (dry_run, enforce) and outcome",
            labels=["kind", "mode", "outcome"],
        )
        for labels, n in sorted(self.actions.items()):
            actions.add_metric(list(labels), n)
        yield actions
        refusals = CounterMetricFamily(
            "gpufrag_guardrail_refusals",
            "Actions the gate refused, by the guardrail that refused them",
            labels=["rule"],
        )
        for rule, n in sorted(self.refusals.items()):
            refusals.add_metric([rule], n)
        yield refusals


class ActionsCollector(Collector):
    """The action counters alone: the actuator's, for the records of what it carried out."""

    def __init__(self, tally: ActionTally) -> None:
        self.tally = tally

    def collect(self) -> Iterator[Metric]:
        yield from self.tally.families()


class DomainMetrics(Collector):
    """The latest report's gauges, the breaker's state and the action counters; an output of
    the embedded runner (``take``) and the worker's per-instant hook (``observe``)."""

    def __init__(self) -> None:
        self.latest: InstantReport | None = None
        self.breaker_open: bool | None = None
        self.tally = ActionTally()
        self.actuator_breakers: list[Callable[[], bool]] = []
        """The breakers of the actuators this process acts through (``actuator_breaker.py``):
        the gauge is 1 while the gate's or any of theirs is open."""

    def observe(self, instant: InstantOutput) -> None:
        for action in instant.actions:
            self.tally.count(action)
        if instant.report is not None:
            self.latest = instant.report
        self.breaker_open = instant.breaker_open

    async def take(self, item: Emission) -> None:
        for instant in item.instants:
            self.observe(instant)

    async def dead_letter(self, failure: Failure) -> None:
        del failure  # counted by the stage metrics and stored by the store output

    def collect(self) -> Iterator[Metric]:
        yield from self.tally.families()
        if self.breaker_open is not None or self.actuator_breakers:
            is_open = bool(self.breaker_open) or any(b() for b in self.actuator_breakers)
            yield GaugeMetricFamily(
                "gpufrag_circuit_breaker_open",
                "1 while the circuit breaker (the gate's or the actuator's) holds enforcement "
                "back, else 0",
                value=1.0 if is_open else 0.0,
            )
        if self.latest is not None:
            yield from _report_families(self.latest)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _report_families(report: InstantReport) -> Iterator[Metric]:
    s = report.summary
    yield _gauge(
        "gpufrag_cluster_report_timestamp_seconds",
        "Event time of the cluster report the other gpufrag gauges describe (POSIX s)",
        report.at.timestamp(),
    )
    yield _gauge(
        "gpufrag_cluster_fragmentation_gpus",
        "Idle GPU the expected workload cannot use (the FGD fragmentation amount), in GPUs",
        s.frag_gpus,
    )
    yield _gauge(
        "gpufrag_cluster_fragmentation_ratio",
        "Fragmented share of the idle GPU, 0..1",
        s.frag_ratio_pct / 100.0,
    )
    b = report.breakdown
    if b is None:
        return  # a report without its breakdown: the figures above are all it has
    gpus = GaugeMetricFamily(
        "gpufrag_gpus",
        "GPUs by pool, GPU model and state; the states add up to the cards",
        labels=["pool", "gpu_model", "state"],
    )
    for g in b.gpus:
        values = (g.allocated, g.idle, g.stranded, g.unhealthy)
        for state, value in zip(STATES, values, strict=True):
            gpus.add_metric([g.pool or NONE, g.gpu_model or NONE, state], value)
    yield gpus
    pending = GaugeMetricFamily(
        "gpufrag_pending_unplaceable_pods",
        "Pending pods that fit the cluster's free total but no node, by their most common "
        "blocking reason",
        labels=["reason"],
    )
    # every reason, 0 included: an alert on one reads a value, not an absent series
    reasons = dict.fromkeys((r.value for r in BlockReason), 0) | dict(b.unplaceable)
    for reason, n in sorted(reasons.items()):
        pending.add_metric([reason], n)
    yield pending
    signals = GaugeMetricFamily(
        "gpufrag_signals_open", "Open signals by kind and severity", labels=["kind", "severity"]
    )
    for kind, severity, n in b.signals_open:
        signals.add_metric([kind, severity], n)
    yield signals
    yield _gauge("gpufrag_oom_storms_open", "OOM storms open now", b.oom_storms_open)
    yield _gauge(
        "gpufrag_oom_storm_kills",
        "OOM kills counted in the open storms (a kill may count in a card's, a node's and a "
        "namespace's storm)",
        b.oom_storm_kills,
    )
    yield _gauge(
        "gpufrag_idle_whole_gpus", "Healthy whole cards with nothing on them", b.idle_whole_gpus
    )


_ATTACHED: weakref.WeakKeyDictionary[CollectorRegistry, DomainMetrics] = weakref.WeakKeyDictionary()


def domain_metrics_for(registry: CollectorRegistry) -> DomainMetrics:
    """The registry's one collector, registered on first use: a command that builds its
    outputs again (a restarted live pipeline) keeps its counters instead of failing on a
    duplicate family."""
    found = _ATTACHED.get(registry)
    if found is None:
        found = _ATTACHED[registry] = DomainMetrics()
        registry.register(found)
    return found
