"""The address of a real kube-apiserver that deploy/local/apiserver.sh started."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


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
