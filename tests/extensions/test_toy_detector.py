"""A detector from a plugin: registered by one line in its own module (``toy_detector``),
named in ``GPUFRAG_PLUGINS``, no product module edited. The embedded runner stores its
signals, and a Faust worker fed the same events over the real broker gives the same ones."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.distributed.runner_signals import worker_signals
from tests.distributed.worker_helpers import signal_key
from tests.extensions.toy_runs import KIND, embedded, events, stored_toy_states

PLUGIN = "tests.extensions.toy_detector"


def test_a_plugin_detector_runs_in_the_embedded_runner_and_its_signals_are_stored(
    tmp_path: Path,
) -> None:
    signals, dsn = embedded(tmp_path, plugins=[PLUGIN])
    toy = sorted((s.scope_id, s.state) for s in signals if s.kind == KIND)
    assert toy == [("node-a", "open"), ("node-a", "resolved"), ("node-b", "open")]
    assert stored_toy_states(dsn) == toy


def test_without_the_plugin_the_toy_detector_does_not_exist(tmp_path: Path) -> None:
    signals, dsn = embedded(tmp_path, plugins=[])
    assert [s for s in signals if s.kind == KIND] == []
    assert stored_toy_states(dsn) == []


@pytest.mark.kafka
def test_a_plugin_detector_gives_the_same_signals_through_a_faust_worker(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals, _ = embedded(tmp_path, plugins=[PLUGIN])
    ours = {signal_key(s.model_dump(mode="json")) for s in signals if s.kind == KIND}
    assert len(ours) == 3
    monkeypatch.setenv("GPUFRAG_PLUGINS", orjson.dumps([PLUGIN]).decode())
    theirs, log = worker_signals(
        kafka_bootstrap, topic_prefix, events(), {KIND}, expect=len(ours), work=tmp_path
    )
    assert theirs == ours, log
