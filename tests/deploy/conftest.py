"""Fixtures of the chart tests: the real helm binary, and a client of the real API server with
the prometheus-operator CRDs installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.chart import Helm, build_helm, crds
from tests.deploy.kube_http import Kube
from tests.local_apiserver import ApiServer


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    binary: Path = build_helm()
    return Helm(binary=binary, home=tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def kube(apiserver: ApiServer) -> Kube:
    client = Kube(apiserver)
    client.install_crds(crds())
    return client
