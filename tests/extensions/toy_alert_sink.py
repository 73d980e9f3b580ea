"""A toy alert sink, not HTTP: each alert it is sent is one JSON line appended to the file named
by ``TOY_ALERT_SINK_FILE``. Loaded by ``GPUFRAG_PLUGINS='["tests.extensions.toy_alert_sink"]'``
and switched on by ``GPUFRAG_ALERTS__SINKS='["toy"]'``; the last line is its registration."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

from connectors.alerts import ALERT_SINKS, Alert
from models.settings import AlertSettings

FILE_VARIABLE = "TOY_ALERT_SINK_FILE"
"""Its own setting: an extension's options are its own variables, not ``GPUFRAG_*`` ones
(those are checked against the settings model)."""


@dataclass(frozen=True, slots=True)
class ToySink:
    path: Path
    name: str = "toy"
    resends: bool = False
    max_batch: int = 100

    @classmethod
    def from_settings(cls, settings: AlertSettings) -> ToySink | None:
        """On when ``GPUFRAG_ALERTS__SINKS`` names it, as every extension sink is."""
        return cls(Path(os.environ[FILE_VARIABLE])) if "toy" in settings.sinks else None

    async def start(self) -> None:
        self.path.touch()

    async def send(self, alerts: Sequence[Alert], *, now: datetime) -> None:
        with self.path.open("ab") as f:
            for alert in alerts:
                f.write(orjson.dumps(alert.as_json()) + b"\n")

    async def stop(self) -> None:
        return None


ALERT_SINKS.register("toy", ToySink.from_settings)
