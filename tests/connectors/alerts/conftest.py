"""The alert tests' local HTTP receiver, started and stopped around each test that asks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.connectors.alerts.receiver import Receiver


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    r = Receiver()
    await r.start()
    try:
        yield r
    finally:
        await r.stop()
