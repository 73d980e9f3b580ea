"""An output from a plugin: registered by one line in its own module (``toy_output``), named
in ``GPUFRAG_PLUGINS``, no product module edited; the embedded runner hands it the same
signals it hands the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import Signal, from_json
from tests.extensions.toy_runs import embedded

PLUGINS = ["tests.extensions.toy_output"]


def test_a_plugin_output_gets_every_signal_the_run_emitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = tmp_path / "toy-output.jsonl"
    monkeypatch.setenv("TOY_OUTPUT_FILE", str(got))
    # the toy detector for signals to hand on: these few events open none of the product's
    signals, _ = embedded(tmp_path, plugins=[*PLUGINS, "tests.extensions.toy_detector"])
    assert len(signals) == 3
    taken = [from_json(Signal, line) for line in got.read_bytes().splitlines()]
    assert taken == signals


def test_without_the_plugin_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    got = tmp_path / "toy-output.jsonl"
    monkeypatch.setenv("TOY_OUTPUT_FILE", str(got))
    signals, _ = embedded(tmp_path, plugins=["tests.extensions.toy_detector"])
    assert len(signals) == 3
    assert not got.exists()
