"""Exponential backoff with jitter, for every source that reconnects to an endpoint."""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """Waits initial, 2x, 4x, ... up to a cap; each wait is drawn from its upper half, so
    clients that failed together spread out (jitter) and none waits less than half the
    step (no hot loop however unlucky the draw)."""

    def __init__(self, *, initial_s: float, max_s: float, rng: random.Random) -> None:
        if initial_s <= 0 or max_s <= 0:
            raise ValueError("backoff waits must be positive")
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self.rng = rng
        self.failures = 0

    def next(self) -> float:
        """The wait before the next attempt after one more failure."""
        step = min(self.max_s, self.initial_s * (1 << min(self.failures, 62)))
        self.failures += 1
        return step / 2 + self.rng.uniform(0, step / 2)

    def reset(self) -> None:
        self.failures = 0
