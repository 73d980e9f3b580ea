"""A toy output, as a plugin would ship one: every signal of a run, one JSON line each,
into the file named by ``TOY_OUTPUT_FILE`` (not a ``GPUFRAG_`` name: those are the product's
settings, and an unknown one is refused). Without that variable it has nothing to do in a run
and is left off."""

from __future__ import annotations

import os
from pathlib import Path

from models import to_json
from streams.app.sinks.output_registry import OUTPUTS, OutputContext
from streams.runner.embedded import Emission, Failure
from streams.runner.fanout import OutputSink


class SignalFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def take(self, item: Emission) -> None:
        lines = [to_json(s) + b"\n" for s in item.signals()]
        if lines:
            with self.path.open("ab") as fh:
                fh.write(b"".join(lines))

    async def dead_letter(self, failure: Failure) -> None:
        del failure


def build(ctx: OutputContext) -> OutputSink | None:
    del ctx
    path = os.environ.get("TOY_OUTPUT_FILE")
    return None if path is None else SignalFile(Path(path))


OUTPUTS.register("toy_signal_file", build)
