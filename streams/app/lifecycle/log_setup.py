"""How the long-running commands log: the time, the level and the logger on each line, and a
line said again and again within a few seconds written once, with a count.

While a broker is down, aiokafka's producer retries its metadata without a pause whenever a
batch waits for a partition's leader, and logs two errors each time: 285,000 lines in three
30 s outages (about 3,000 a second) from one `gpufrag publish` here. Written to a pipe that
nobody reads until the end (as the chaos soak did), they filled it, and the publisher stopped
inside a logging call for the rest of the run. Written anywhere, they bury what happened.
"""

from __future__ import annotations

import logging
import time

__all__ = ["REPEAT_WINDOW_S", "RepeatFilter", "configure_logging"]

REPEAT_WINDOW_S = 10.0
"""How long a line is not written again: long enough to turn a retry loop into one line per
window, short enough that an outage's start and end stay visible."""
MAX_LINES = 10_000
"""Distinct lines remembered before the old ones are forgotten."""
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RepeatFilter(logging.Filter):
    """Drops a record whose logger, level and message (its arguments filled in) were written
    less than ``window_s`` ago; the next one written says how many were dropped."""

    def __init__(self, *, window_s: float = REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._last: dict[tuple[str, int, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        key = (record.name, record.levelno, text)
        now = time.monotonic()
        seen = self._last.get(key)
        if seen is not None and now - seen[0] < self.window_s:
            self._last[key] = (seen[0], seen[1] + 1)
            return False
        if len(self._last) > MAX_LINES:  # many different lines: forget the old ones
            self._last = {k: v for k, v in self._last.items() if now - v[0] < self.window_s}
            if len(self._last) > MAX_LINES:  # all recent: start again rather than sift each time
                self._last.clear()
        self._last[key] = (now, 0)
        if seen is not None and seen[1]:
            record.msg, record.args = f"{text} ({seen[1]} more like it before)", None
        return True


def configure_logging(level: str) -> None:
    """The root logger at ``level`` (a name such as "info"), its lines timed, repeats held
    back (``RepeatFilter``) on the handler this sets up. A root logger that has handlers
    already (a host's, pytest's) keeps them as they are: filtering pytest's capture handler,
    which lives for the whole session, hid a later test's repeated warnings from it (a CI run
    after a command ran in-process)."""
    root = logging.getLogger()
    before = list(root.handlers)
    logging.basicConfig(level=level.upper(), format=FORMAT)
    for handler in root.handlers:
        if handler not in before:
            handler.addFilter(RepeatFilter())
