"""An API client for the watchers: from an explicit kubeconfig, the pod's service account, or
the user's kubeconfig, in that order, the way kubectl and client-go pick."""

from __future__ import annotations

import os
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from models import KubeSettings

__all__ = ["api_client_for"]


async def api_client_for(settings: KubeSettings) -> Any:
    """A kubernetes-asyncio ApiClient for ``settings``; the caller closes it."""
    configuration = k8s.Configuration()
    if settings.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await k8s_config.load_kube_config(
            config_file=settings.kubeconfig,
            context=settings.context,
            client_configuration=configuration,
        )
    return k8s.ApiClient(configuration=configuration)
