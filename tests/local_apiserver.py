"""The address of a real kube-apiserver that deploy/local/apiserver.sh started."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.paths import REPO_ROOT

APISERVER_SH = REPO_ROOT / "deploy" / "local" / "apiserver.sh"


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

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for this server (TLS verified against its CA, bearer token) at
        ``path``."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_cert)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
            "current-context": "local",
        }
        path.write_text(json.dumps(config))
        return path


@contextmanager
def apiserver_at(run_dir: Path) -> Iterator[ApiServer]:
    """A kube-apiserver and its etcd of the caller's own in ``run_dir``, started through
    deploy/local/apiserver.sh (built first if its binaries are not cached) and stopped at the
    end."""
    env = {**os.environ, "GPUFRAG_APISERVER_DIR": str(run_dir)}
    out = subprocess.run(
        ["bash", str(APISERVER_SH), "start"], env=env, capture_output=True, text=True, timeout=1800
    )
    try:
        assert out.returncode == 0, f"apiserver.sh start failed:\n{out.stderr}"
        yield ApiServer.from_address(out.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["bash", str(APISERVER_SH), "stop"], env=env, timeout=120, check=False)
