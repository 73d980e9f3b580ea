"""What the `gpufrag check-config` tests share: the command as a subprocess (timed), a user of
the real kube-apiserver holding only the permissions a test grants (a ServiceAccount, a
ClusterRole bound to it, a token from the TokenRequest API), and ports that never answer."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes_asyncio.client import (
    ApiClient,
    AuthenticationV1TokenRequest,
    CoreV1Api,
    RbacAuthorizationV1Api,
    RbacV1Subject,
    V1ClusterRole,
    V1ClusterRoleBinding,
    V1ObjectMeta,
    V1PolicyRule,
    V1RoleRef,
    V1ServiceAccount,
    V1TokenRequestSpec,
)

from tests.app.watch_helpers import clean_env
from tests.local_apiserver import ApiServer

RUN_LIMIT_S = 60.0
"""subprocess.run's own cut: far above the 15 s the tests assert, so a slow run fails the
assertion on its measured time instead of an opaque timeout."""

ISSUER = "https://kubernetes.default.svc.cluster.local"
"""deploy/local/apiserver.sh's --service-account-issuer, the default audience of its tokens."""


@dataclass(frozen=True, slots=True)
class Ran:
    returncode: int
    lines: list[str]
    stderr: str
    wall_s: float


def run_check_config(*args: str, env: dict[str, str]) -> Ran:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "check-config", *args],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
    )
    wall = time.monotonic() - started
    return Ran(out.returncode, out.stdout.splitlines(), out.stderr, wall)


def kubeconfig_at(path: Path, *, server: str, token: str, ca_cert: Path | None) -> Path:
    cluster: dict[str, str] = {"server": server}
    if ca_cert is not None:
        cluster["certificate-authority"] = str(ca_cert)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(json.dumps(config))
    return path


def rule(verbs: list[str], resources: list[str], group: str = "") -> V1PolicyRule:
    return V1PolicyRule(api_groups=[group], resources=resources, verbs=verbs)


async def limited_user(
    client: ApiClient, namespace: str, rules: list[V1PolicyRule]
) -> tuple[str, str]:
    """A ServiceAccount in ``namespace`` granted ``rules`` cluster-wide, and a bearer token of
    it; returns (token, the ClusterRole's name, which the caller deletes with its binding)."""
    core, rbac = CoreV1Api(client), RbacAuthorizationV1Api(client)
    account, role = "checker", f"gpufrag-check-{uuid.uuid4().hex[:8]}"
    await core.create_namespaced_service_account(
        namespace, V1ServiceAccount(metadata=V1ObjectMeta(name=account))
    )
    await rbac.create_cluster_role(V1ClusterRole(metadata=V1ObjectMeta(name=role), rules=rules))
    await rbac.create_cluster_role_binding(
        V1ClusterRoleBinding(
            metadata=V1ObjectMeta(name=role),
            role_ref=V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role
            ),
            subjects=[RbacV1Subject(kind="ServiceAccount", name=account, namespace=namespace)],
        )
    )
    request = AuthenticationV1TokenRequest(
        spec=V1TokenRequestSpec(audiences=[ISSUER], expiration_seconds=3600)
    )
    answer = await core.create_namespaced_service_account_token(account, namespace, request)
    return answer.status.token, role


async def drop_role(client: ApiClient, role: str) -> None:
    rbac = RbacAuthorizationV1Api(client)
    await rbac.delete_cluster_role_binding(role)
    await rbac.delete_cluster_role(role)


def user_env(apiserver: ApiServer, token: str, tmp_path: Path) -> dict[str, str]:
    kubeconfig = kubeconfig_at(
        tmp_path / "kubeconfig", server=apiserver.url, token=token, ca_cert=apiserver.ca_cert
    )
    return {"GPUFRAG_KUBE__KUBECONFIG": str(kubeconfig)}


@contextlib.contextmanager
def silent_ports(count: int) -> Iterator[list[int]]:
    """Ports that take connections (the kernel completes the handshake into the backlog) and
    never answer: a host behind a firewall that drops, or a hung server."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            sockets.append(s)
        yield [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
