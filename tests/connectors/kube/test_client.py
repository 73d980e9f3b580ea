"""The API client comes from a kubeconfig (here: one pointing at the fake API server with a
bearer token), as it would for a watcher run outside the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.kube import api_client_for
from models import GpufragSettings, KubeResource
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import pod


async def test_watchers_run_from_a_kubeconfig(
    cluster: FakeCluster,
    server: FakeApiServer,
    collector: Collector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {{server: "{server.url}"}}
users:
- name: watcher
  user: {{token: "{server.token}"}}
contexts:
- name: fake
  context: {{cluster: fake, user: watcher}}
current-context: fake
"""
    )
    cluster.apply(pod("a", gpus=1))
    settings = kube_settings(KubeResource.PODS, kubeconfig=str(kubeconfig))
    client = await api_client_for(settings)
    try:
        async with running(client, settings, collector):
            await collector.wait_for(lambda: len(collector.envelopes) == 1)
    finally:
        await client.close()
    assert [r.status for r in server.lists("pods")] == [200]


def test_kube_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFRAG_KUBE__NAMESPACE", "ml")
    monkeypatch.setenv("GPUFRAG_KUBE__RESOURCES", '["pods", "nodes"]')
    monkeypatch.setenv("GPUFRAG_KUBE__LABEL_SELECTORS", '{"pods": "team=ml"}')
    monkeypatch.setenv("GPUFRAG_KUBE__BACKOFF_MAX_S", "5")
    kube = GpufragSettings().kube
    assert kube.namespace == "ml"
    assert kube.resources == (KubeResource.PODS, KubeResource.NODES)
    assert kube.label_selectors == {KubeResource.PODS: "team=ml"}
    assert kube.backoff_max_s == 5.0
