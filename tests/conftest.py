"""Session fixtures shared by all tests."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_path() -> Path:
    """The project's read-only shared folder: beside the checkout, as CI lays it out."""
    override = os.environ.get("GPUFRAG_SHARED_DIR")
    return Path(override) if override else REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    path = shared_path()
    if not path.is_dir():
        raise RuntimeError(
            f"shared folder {path} is missing; clone beside it or set GPUFRAG_SHARED_DIR"
        )
    return path


@pytest.fixture(scope="session")
def trace_dir(shared_dir: Path) -> Path:
    """The slice of Alibaba cluster-trace-gpu-v2023 kept in the shared folder."""
    return shared_dir / "traces" / "alibaba-gpu-v2023"


@pytest.fixture(scope="session")
def published_dir(shared_dir: Path) -> Path:
    """The FGD simulator's published results for the same workloads."""
    return shared_dir / "traces" / "fgd-expected"


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real broker per test session: the one .ci/run started (GPUFRAG_TEST_KAFKA), or a
    broker started here through deploy/local/kafka.sh and stopped at the end."""
    given = os.environ.get("GPUFRAG_TEST_KAFKA")
    if given:
        yield given
        return
    env = {**os.environ, "GPUFRAG_KAFKA_DIR": str(tmp_path_factory.mktemp("kafka"))}
    script = REPO_ROOT / "deploy" / "local" / "kafka.sh"
    out = subprocess.run(
        ["bash", str(script), "start"], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"kafka.sh start failed:\n{out.stderr}"
    try:
        yield out.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, timeout=120, check=False)


@dataclass(frozen=True, slots=True)
class ApiServer:
    """A real kube-apiserver (with its etcd) on loopback, as deploy/local/apiserver.sh runs it."""

    url: str
    """https://127.0.0.1:PORT"""
    token: str
    """A bearer token of a system:masters user."""
    ca_cert: Path
    """The CA bundle that verifies the server's self-signed certificate."""
    etcd_url: str
    """etcd's client URL (http, loopback): tests compact its history to provoke 410 Gone."""

    @classmethod
    def from_address(cls, line: str) -> ApiServer:
        """From apiserver.sh's address line "URL TOKENFILE"; the certificates and ports lie in
        the run directory beside the token file."""
        url, token_file = line.split()
        run = Path(token_file).parent
        etcd_port = (run / "ports").read_text().split()[0]
        return cls(
            url=url,
            token=Path(token_file).read_text().strip(),
            ca_cert=run / "certs" / "apiserver.crt",
            etcd_url=f"http://127.0.0.1:{etcd_port}",
        )


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One real kube-apiserver per test session: the one .ci/run started (GPUFRAG_TEST_APISERVER,
    the "URL TOKENFILE" line `deploy/local/apiserver.sh start` prints), or one started here
    through that script (built first if its binaries are not cached) and stopped at the end."""
    given = os.environ.get("GPUFRAG_TEST_APISERVER")
    if given:
        yield ApiServer.from_address(given)
        return
    env = {**os.environ, "GPUFRAG_APISERVER_DIR": str(tmp_path_factory.mktemp("apiserver"))}
    script = REPO_ROOT / "deploy" / "local" / "apiserver.sh"
    out = subprocess.run(
        ["bash", str(script), "start"], env=env, capture_output=True, text=True, timeout=1800
    )
    try:
        assert out.returncode == 0, f"apiserver.sh start failed:\n{out.stderr}"
        yield ApiServer.from_address(out.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, timeout=120, check=False)


@pytest.fixture
def topic_prefix() -> str:
    """Each test its own topics on the shared broker."""
    return f"t{uuid.uuid4().hex[:10]}."
