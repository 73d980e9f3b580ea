"""Session fixtures shared by all tests."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from kubernetes_asyncio.client import ApiClient, CoreV1Api, V1Namespace, V1ObjectMeta

from connectors.kube import api_client_for
from models import KubeSettings
from tests.local_apiserver import ApiServer, apiserver_at
from tests.paths import PUBLISHED_DIR, REPO_ROOT, TRACE_DIR
from tests.secure_kafka import SecureKafka

# Hypothesis's default deadline (200 ms an example) and its "input generation is slow" health
# check are wall-clock checks: on a 2-core machine under a load of 25 (a CI run beside other
# work) the round-trip tests of tests/models failed on them, 9 at once, and passed alone. What
# the property tests assert is the property; time belongs to `gpufrag bench`. The fuzz tests'
# own profile (tests/fuzzing.py) says the same.
settings.register_profile("gpufrag", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gpufrag")


@pytest.fixture(scope="session")
def trace_dir() -> Path:
    """The slice of Alibaba cluster-trace-gpu-v2023 the project ships (connectors/trace/data)."""
    return TRACE_DIR


@pytest.fixture(scope="session")
def published_dir() -> Path:
    """The FGD simulator's published results for the same workloads, shipped beside the trace."""
    return PUBLISHED_DIR


@pytest.fixture(scope="session")
def local_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A broker started here through `deploy/local/kafka.sh start --secure` (its run directory,
    holding ``bootstrap`` and ``security.env``), stopped at the end: for a session that was
    given none."""
    run_dir = tmp_path_factory.mktemp("kafka")
    env = {**os.environ, "GPUFRAG_KAFKA_DIR": str(run_dir)}
    script = REPO_ROOT / "deploy" / "local" / "kafka.sh"
    out = subprocess.run(
        ["bash", str(script), "start", "--secure"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"kafka.sh start failed:\n{out.stderr}"
    try:
        yield run_dir
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, timeout=120, check=False)


@pytest.fixture(scope="session")
def kafka_bootstrap(request: pytest.FixtureRequest) -> str:
    """One real broker per test session: the one .ci/run started (GPUFRAG_TEST_KAFKA), or
    ``local_kafka``."""
    given = os.environ.get("GPUFRAG_TEST_KAFKA")
    if given:
        return given
    run_dir: Path = request.getfixturevalue("local_kafka")
    return (run_dir / "bootstrap").read_text().strip()


@pytest.fixture(scope="session")
def kafka_secure(request: pytest.FixtureRequest) -> SecureKafka:
    """The broker's SASL_SSL and mTLS listeners: those of the broker .ci/run started with
    --secure (GPUFRAG_TEST_KAFKA_SECURITY names its security.env), or ``local_kafka``'s."""
    given = os.environ.get("GPUFRAG_TEST_KAFKA_SECURITY")
    if given:
        return SecureKafka.read(Path(given))
    run_dir: Path = request.getfixturevalue("local_kafka")
    return SecureKafka.read(run_dir / "security.env")


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One real kube-apiserver per test session: the one .ci/run started (GPUFRAG_TEST_APISERVER,
    the "URL TOKENFILE" line `deploy/local/apiserver.sh start` prints), or one started here
    through that script (built first if its binaries are not cached) and stopped at the end."""
    given = os.environ.get("GPUFRAG_TEST_APISERVER")
    if given:
        yield ApiServer.from_address(given)
        return
    with apiserver_at(tmp_path_factory.mktemp("apiserver")) as server:
        yield server


@pytest.fixture
def topic_prefix() -> str:
    """Each test its own topics on the shared broker."""
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig for the real kube-apiserver (TLS verified against its CA, bearer token)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return apiserver.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    """An API client made the way the watchers make theirs: from a kubeconfig."""
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
