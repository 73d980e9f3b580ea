"""Fixtures of the GPU tests: a fake kubelet and the socket it answers on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.connectors.gpu.kubelet_fake import PODS, FakeKubelet, serving


@pytest.fixture
def kubelet() -> FakeKubelet:
    return FakeKubelet(pods=PODS)


@pytest.fixture
async def socket_path(tmp_path: Path, kubelet: FakeKubelet) -> AsyncIterator[str]:
    async with serving(kubelet, tmp_path / "kubelet.sock") as path:
        yield path
