"""`gpufrag check-config` as a deploy step runs it: a subprocess against the real
kube-apiserver (RBAC authorization, a ServiceAccount holding only what a test grants), a real
Kafka broker and Alertmanager, and targets that refuse or never answer, timed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient, V1PolicyRule

from tests.app.check_config_helpers import (
    drop_role,
    kubeconfig_at,
    limited_user,
    rule,
    run_check_config,
    silent_ports,
    user_env,
)
from tests.connectors.alerts.alertmanager_proc import Alertmanager
from tests.local_apiserver import ApiServer
from tests.ports import free_port

pytestmark = pytest.mark.deploy


WATCHED = '["pods", "nodes", "events"]'

ACTUATOR_RULES = [
    rule(["get"], ["pods", "nodes"]),
    rule(["create"], ["pods/eviction"]),
    rule(["patch"], ["nodes"]),
    rule(["get", "create", "update"], ["leases"], "coordination.k8s.io"),
]


def _watcher_rules(*, event_verbs: list[str]) -> list[V1PolicyRule]:
    return [rule(["list", "watch"], ["pods", "nodes"]), rule(event_verbs, ["events"])]


@pytest.fixture
async def granted(
    request: pytest.FixtureRequest, client: ApiClient, namespace: str
) -> AsyncIterator[str]:
    """A token of a user holding exactly the rules the test is parametrized with."""
    token, role = await limited_user(client, namespace, request.param)
    try:
        yield token
    finally:
        await drop_role(client, role)


@pytest.mark.apiserver
@pytest.mark.parametrize(
    ("granted", "components", "expected"),
    [
        (
            [*_watcher_rules(event_verbs=["list"]), *ACTUATOR_RULES],
            "watch,actuate",
            "rbac: watch cannot watch events in all namespaces",
        ),
        (
            [
                *_watcher_rules(event_verbs=["list", "watch"]),
                *ACTUATOR_RULES[:2],
                ACTUATOR_RULES[3],
            ],
            "actuate",
            "rbac: actuate cannot patch nodes",
        ),
    ],
    indirect=["granted"],
    ids=["watch-lacks-watch-events", "actuate-lacks-patch-nodes"],
)
async def test_a_user_lacking_one_verb_gets_exactly_that_line(
    apiserver: ApiServer,
    granted: str,
    components: str,
    expected: str,
    tmp_path: Path,
) -> None:
    env = {
        **user_env(apiserver, granted, tmp_path),
        "GPUFRAG_KUBE__RESOURCES": WATCHED,
        "GPUFRAG_GUARDRAILS__MODE": "enforce",
        "GPUFRAG_STORE__DSN": f"chdb://{tmp_path / 'store'}",
    }
    ran = run_check_config("--mode", "embedded", "--component", components, env=env)
    assert ran.lines == [expected], ran
    assert ran.returncode == 1


@pytest.mark.apiserver
async def test_the_same_user_granted_everything_it_needs_passes(
    apiserver: ApiServer, client: ApiClient, namespace: str, tmp_path: Path
) -> None:
    rules = [*_watcher_rules(event_verbs=["list", "watch"]), *ACTUATOR_RULES]
    token, role = await limited_user(client, namespace, rules)
    try:
        env = {
            **user_env(apiserver, token, tmp_path),
            "GPUFRAG_KUBE__RESOURCES": WATCHED,
            "GPUFRAG_GUARDRAILS__MODE": "enforce",
            "GPUFRAG_STORE__DSN": f"chdb://{tmp_path / 'store'}",
        }
        ran = run_check_config("--mode", "embedded", "--component", "watch,actuate", env=env)
    finally:
        await drop_role(client, role)
    assert ran.returncode == 0, ran
    assert ran.lines[0].startswith("ok: store, guardrails, kube"), ran


@pytest.mark.apiserver
@pytest.mark.kafka
@pytest.mark.alertmanager
async def test_a_good_config_exits_0(
    kubeconfig: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    am = Alertmanager(tmp_path)
    await am.start()
    try:
        env = {
            "GPUFRAG_KUBE__KUBECONFIG": str(kubeconfig),
            "GPUFRAG_KAFKA__BOOTSTRAP": kafka_bootstrap,
            "GPUFRAG_STORE__DSN": f"chdb://{tmp_path / 'store'}",
            "GPUFRAG_ALERTS__ALERTMANAGER_URL": am.url,
            "GPUFRAG_GUARDRAILS__MODE": "enforce",
        }
        ran = run_check_config(env=env)
    finally:
        await am.stop()
    assert ran.returncode == 0, ran
    assert ran.lines[0].startswith("ok: kafka, store, guardrails, alertmanager, kube"), ran
    assert len(ran.lines) == 1, ran


def _unreachable_env(tmp_path: Path, kafka: int, store: int, am: int, api: int) -> dict[str, str]:
    kubeconfig = kubeconfig_at(
        tmp_path / "kubeconfig", server=f"https://127.0.0.1:{api}", token="t", ca_cert=None
    )
    return {
        "GPUFRAG_KAFKA__BOOTSTRAP": f"127.0.0.1:{kafka}",
        "GPUFRAG_STORE__DSN": f"http://127.0.0.1:{store}",
        "GPUFRAG_ALERTS__ALERTMANAGER_URL": f"http://127.0.0.1:{am}",
        "GPUFRAG_GUARDRAILS__MODE": "enforce",
        "GPUFRAG_GUARDRAILS__PROTECTED_NAMESPACES": "[]",
        "GPUFRAG_KUBE__KUBECONFIG": str(kubeconfig),
    }


@pytest.mark.parametrize("answer", ["refused", "silent"])
def test_every_target_unreachable_is_one_line_each_and_it_ends(answer: str, tmp_path: Path) -> None:
    # refused: closed ports, each client fails at once; silent: ports that take the
    # connection and never answer, so every check runs into its timeout, all at once. That it
    # ends is the promise a test can hold (run_check_config's 60 s cut fails a hang); its 15 s
    # is a figure of a start that is not starved: at load 30 its start and exit took 15 s, the
    # run 15-19 s, every check cut at the least (1.5 s), as designed (docs/operations.md).
    with silent_ports(4) as silent:
        ports = silent if answer == "silent" else [free_port() for _ in range(4)]
        kafka, store, am, api = ports
        ran = run_check_config(env=_unreachable_env(tmp_path, kafka, store, am, api))
    assert ran.returncode == 1, ran
    by_target = {line.split(":", 1)[0]: line for line in ran.lines}
    assert sorted(by_target) == ["alertmanager", "guardrails", "kafka", "kube", "store"], ran
    assert len(ran.lines) == 5, ran
    assert f"127.0.0.1:{kafka}" in by_target["kafka"]
    assert f"127.0.0.1:{store}" in by_target["store"]
    assert f"127.0.0.1:{am}" in by_target["alertmanager"]
    assert f"127.0.0.1:{api}" in by_target["kube"]
    assert "no protected namespaces" in by_target["guardrails"]


def test_embedded_mode_reaches_no_kafka(tmp_path: Path) -> None:
    env = {
        "GPUFRAG_KAFKA__BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "GPUFRAG_STORE__DSN": f"chdb://{tmp_path / 'store'}",
    }
    ran = run_check_config("--mode", "embedded", "--component", "sink", env=env)
    assert ran.returncode == 0, ran
    assert ran.lines[0].startswith("ok: store ("), ran


def test_a_bad_setting_is_its_line_and_status_1(tmp_path: Path) -> None:
    ran = run_check_config(env={"GPUFRAG_STORE__BATCH_ROWS": "5"})
    assert ran.returncode == 1, ran
    assert len(ran.lines) == 1 and ran.lines[0].startswith("settings: setting "), ran
    assert "GPUFRAG_STORE__BATCH_ROWS" in ran.lines[0]


def test_an_unknown_component_is_a_usage_error() -> None:
    ran = run_check_config("--component", "watch,sinks", env={})
    assert ran.returncode == 2, ran
    assert "unknown component sinks" in ran.stderr
