"""Fixtures for the watcher tests: a fake API server over real HTTP (not started, or started)
and a kubernetes-asyncio client configured for it. The real kube-apiserver's client and
namespace fixtures are in tests/conftest.py (the actuator command's tests use them too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient

from tests.connectors.kube.helpers import Collector
from tests.kube_fake import FakeApiServer, FakeCluster


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    c = FakeCluster()
    yield c
    await c.close()


@pytest.fixture
async def fake(cluster: FakeCluster) -> AsyncIterator[FakeApiServer]:
    """The fake API server, not started: a test decides when it comes up."""
    s = FakeApiServer(cluster)
    yield s
    await s.stop()


@pytest.fixture
async def server(fake: FakeApiServer) -> FakeApiServer:
    await fake.start()
    return fake


@pytest.fixture
async def api_client(fake: FakeApiServer) -> AsyncIterator[ApiClient]:
    client = ApiClient(configuration=fake.configuration())
    yield client
    await client.close()


@pytest.fixture
def collector() -> Collector:
    return Collector()
