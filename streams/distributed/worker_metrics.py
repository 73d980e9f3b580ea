"""A worker's own figures as Prometheus metrics, read from the app when scraped.

Faust's web server is off in gpufrag workers, so these are served by prometheus-client on a
port of their own: what was dead-lettered, released, recognised as redelivered, signalled, how
often kube-scheduler's verdict on a pending pod disagreed with gpufrag's, how much input is
held waiting for the sources' progress, and how far each input partition is past its commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

HELP = {
    "read": "Input messages handed to a stage (one read by two stages counts twice)",
    "dead_letters": "Messages sent to the dead-letter topic (malformed, or late)",
    "released": "Input items released in event-time order and processed",
    "redelivered": "Redelivered copies of items already processed, dropped",
    "read_twice": "Items read a second time while the first copy was still held (the rewind "
    "after a rebalance), dropped",
    "copies": "Records carrying an envelope already held (a publisher's resend after its "
    "producer was replaced), dropped",
    "signals": "Signals sent by the cluster view",
}


class WorkerCollector(Collector):
    def __init__(
        self,
        *,
        counters: Mapping[str, int],
        held: Callable[[], int],
        lag: Callable[[], Mapping[tuple[str, int], int]],
    ) -> None:
        self.counters = counters
        self.held = held
        self.lag = lag

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        for name, text in HELP.items():
            yield CounterMetricFamily(
                f"gpufrag_worker_{name}", text, value=self.counters.get(name, 0)
            )
        by_reason = CounterMetricFamily(
            "gpufrag_worker_dead_letters_by_reason",
            "Dead-lettered messages by the topic they came from and why (undecodable, late)",
            labels=["topic", "reason"],
        )
        for name, value in sorted(self.counters.items()):
            if name.startswith("dead_letters/"):
                topic, _, reason = name.removeprefix("dead_letters/").rpartition("/")
                by_reason.add_metric([topic, reason], value)
        yield by_reason
        disagreements = CounterMetricFamily(
            "gpufrag_explanation_disagreements",
            "kube-scheduler verdicts that disagreed with gpufrag's explanation of a pending "
            "pod, by the scheduler's reason",
            labels=["reason"],
        )
        for name, value in sorted(self.counters.items()):
            if name.startswith("disagreements/"):
                disagreements.add_metric([name.removeprefix("disagreements/")], value)
        yield disagreements
        yield GaugeMetricFamily(
            "gpufrag_worker_held_items",
            "Input items held until every source has reported progress past them",
            value=self.held(),
        )
        lag = GaugeMetricFamily(
            "gpufrag_worker_consumer_lag_messages",
            "Messages on an input partition past where the worker group would resume it (its "
            "committed offset): what a restart would read again, held input included",
            labels=["topic", "partition"],
        )
        for (topic, partition), n in sorted(self.lag().items()):
            lag.add_metric([topic, str(partition)], n)
        yield lag
