"""Events from a JSON-lines file through the embedded runner into a store, run as its own
process the way a `gpufrag` command runs (the session reads the settings, so the plugins in
``GPUFRAG_PLUGINS`` are imported and registered there, and nowhere in the test's process).

Usage: ``python -m tests.app.embedded_run EVENTS DSN SIGNALS_OUT [RUN_ID [TYPICAL_FROM]]``; the
signals it emitted are written to SIGNALS_OUT, one JSON object a line. The run is stored as
RUN_ID (default ``extension``); TYPICAL_FROM, a pod list CSV, gives the typical pods as
`gpufrag worker --typical-from` takes them (without it the pipeline has none)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from connectors.trace.alibaba_csv import read_pods
from models import Envelope, Signal, from_json, to_json
from streams.app.lifecycle.run_record import RunSpec, status_of
from streams.app.lifecycle.session import Session
from streams.app.replaying.workload import pod_shape
from streams.app.sinks.output_registry import SignalsTo
from streams.fragmentation.shapes import TypicalPods
from streams.runner.embedded import EmbeddedRunner


async def run(
    events: Path, dsn: str, signals_out: Path, run_id: str, typical_from: Path | None
) -> None:
    envs = [from_json(Envelope, line) for line in events.read_bytes().splitlines() if line]
    session = Session("test-embedded", store=dsn)
    info = RunSpec(run_id=run_id, source=f"file:{events.name}", mode="test")
    emitted: list[Signal] = []
    async with session.recorded(info) as (record, sink):
        outputs = session.outputs(info.run_id, store=sink, extra=[SignalsTo(emitted.append)])
        typical = None
        if typical_from is not None:
            shapes = (
                pod_shape(p) for p in read_pods(typical_from, settings=session.settings.trace)
            )
            typical = TypicalPods.from_shapes(shapes, coverage=session.settings.analysis.coverage)
        pipeline = session.pipeline(typical=typical).build()
        runner = EmbeddedRunner(
            source=iter(envs), output=outputs, pipeline=pipeline, registry=session.registry
        )
        await runner.run()
        await sink.stop()
        await record.end(status_of(sink.fatal), {"events": runner.processed})
    signals_out.write_bytes(b"".join(to_json(s) + b"\n" for s in emitted))


if __name__ == "__main__":
    run_id = sys.argv[4] if len(sys.argv) > 4 else "extension"
    typical_from = Path(sys.argv[5]) if len(sys.argv) > 5 else None
    asyncio.run(run(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), run_id, typical_from))
