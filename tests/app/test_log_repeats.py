"""A line logged again and again (aiokafka's metadata retries while a broker is down: about
3,000 a second) is written once per window, with a count of the ones held back."""

from __future__ import annotations

import logging

import pytest

from streams.app.lifecycle import log_setup
from streams.app.lifecycle.log_setup import RepeatFilter


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname} {record.getMessage()}")


def test_repeats_within_the_window_are_held_back_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(log_setup.time, "monotonic", lambda: now[0])
    kept = _Kept()
    kept.addFilter(RepeatFilter(window_s=10))
    log = logging.getLogger("test.repeats")
    log.propagate = False
    log.addHandler(kept)
    try:
        for _ in range(3000):
            log.error("Unable to update metadata from %s", [1])
            now[0] += 0.001
        log.error("Unable connect to node with id %s", 1)  # another line: written
        log.warning("Unable to update metadata from %s", [1])  # another level: written
        log.error("Unable to update metadata from %s", [2])  # other arguments: written
        now[0] += 10
        log.error("Unable to update metadata from %s", [1])  # the window passed
        log.error("Unable to update metadata from %s", [1])
    finally:
        log.removeHandler(kept)
    assert kept.lines == [
        "test.repeats ERROR Unable to update metadata from [1]",
        "test.repeats ERROR Unable connect to node with id 1",
        "test.repeats WARNING Unable to update metadata from [1]",
        "test.repeats ERROR Unable to update metadata from [2]",
        "test.repeats ERROR Unable to update metadata from [1] (2999 more like it before)",
    ]


def test_configure_logging_filters_only_the_handler_it_sets_up() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    for h in saved:
        root.removeHandler(h)
    foreign = _Kept()
    try:
        log_setup.configure_logging("warning")  # no handler yet: it sets one up
        (own,) = root.handlers
        assert any(isinstance(f, RepeatFilter) for f in own.filters)
        root.removeHandler(own)
        root.addHandler(foreign)
        log_setup.configure_logging("warning")  # a host's handler: left as it is
        assert root.handlers == [foreign] and foreign.filters == []
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved:
            root.addHandler(h)
        root.setLevel(level)
