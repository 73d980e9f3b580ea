"""The cases `gpufrag bench` knows: name -> the module and function that measure it.

Kept as names, like the command table in ``streams/app/cli.py``: a case's module is imported
only when the case runs (`sink` loads chDB, `kafka` aiokafka and Faust), so ``--case cli``
measures the CLI without paying for the rest.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from streams.app.bench.figures import Figure
from streams.app.bench.runner import Context


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    module: str
    """In streams.app.bench."""
    function: str
    summary: str
    baseline: str

    def load(self) -> Callable[[Context], list[Figure]]:
        module = importlib.import_module(f"streams.app.bench.{self.module}")
        run: Callable[[Context], list[Figure]] = getattr(module, self.function)
        return run


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            "cli",
            "process_cases",
            "cli",
            "gpufrag --help and gpufrag sql --list, fresh process",
            "python -c pass",
        ),
        Case(
            "view",
            "view_case",
            "view",
            "full evaluation and one capacity change, at two cluster sizes",
            "one pass over the node list",
        ),
        Case(
            "experiment",
            "experiment_case",
            "experiment",
            "seconds per policy and seed (random, best-fit, fgd) on the bundled trace",
            "loading the trace",
        ),
        Case(
            "ingest",
            "ingest_case",
            "ingest",
            "events/s through decode, validate, join and detectors (embedded runner)",
            "orjson.loads of the same bytes",
        ),
        Case(
            "sink",
            "sink_case",
            "sink",
            "rows/s into chDB through the history sink",
            "one bulk insert of the same rows (clickhouse-connect)",
        ),
        Case(
            "extender",
            "extender_case",
            "extender",
            "one pod's filter + prioritize (p99 over 200 pods), at two cluster sizes",
            "orjson.loads of the same requests",
        ),
        Case(
            "memory",
            "memory_case",
            "memory",
            "peak RSS holding the profiles of a large cluster",
            "-",
        ),
        Case(
            "inspect",
            "process_cases",
            "inspect",
            "gpufrag inspect on a generated kubectl snapshot, fresh process",
            "json.load of the same file",
        ),
        Case(
            "replay",
            "process_cases",
            "replay",
            "gpufrag replay on the bundled trace, fresh process, wall time and peak RSS",
            "gpufrag experiment, same policy and seed",
        ),
        Case(
            "kafka",
            "kafka_case",
            "kafka",
            "events/s through one Faust worker with the real operators, on a broker",
            "a bare aiokafka consumer (getmany and decoding)",
        ),
        Case(
            "latency",
            "kafka_case",
            "latency",
            "event produced to signal emitted through Kafka, p50 and p99",
            "-",
        ),
    )
}
"""In the order they run: the quick ones first, so a broken case shows early."""


def chosen(names: list[str]) -> list[Case]:
    """The cases named (all when none), in the registry's order; an unknown name is a
    ValueError naming the known ones."""
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise ValueError(f"unknown case {', '.join(unknown)}; the cases are: {', '.join(CASES)}")
    return [c for c in CASES.values() if not names or c.name in names]
