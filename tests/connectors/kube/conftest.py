"""Fixtures for the watcher tests: a fake API server over real HTTP (not started, or started)
and a kubernetes-asyncio client configured for it; for the real kube-apiserver, a client made
from a kubeconfig and a namespace per test."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api, V1Namespace, V1ObjectMeta

from connectors.kube import api_client_for
from models import KubeSettings
from tests.connectors.kube.helpers import Collector
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.local_apiserver import ApiServer


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


@pytest.fixture
async def client(
    apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ApiClient]:
    """An API client made the way the watchers make theirs: from a kubeconfig (TLS verified
    against the server's CA, bearer token)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": apiserver.url,
                            "certificate-authority": str(apiserver.ca_cert),
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": apiserver.token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
                "current-context": "local",
            }
        )
    )
    api = await api_client_for(KubeSettings(kubeconfig=str(kubeconfig)))
    yield api
    await api.close()


@pytest.fixture
async def namespace(client: ApiClient) -> AsyncIterator[str]:
    name = f"gpufrag-{uuid.uuid4().hex[:10]}"
    core = CoreV1Api(client)
    await core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=name)))
    yield name
    # No namespace controller runs: the namespace stays Terminating with its pods in it.
    await core.delete_namespace(name)
