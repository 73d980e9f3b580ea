"""Kubernetes watchers: pods, nodes, scheduling Events, ResourceQuotas and, where their CRDs
are installed, Kueue and Volcano queues, each a list+watch reflector emitting envelopes."""

from connectors.kube.api import Gone, KubeApiError, NotServed, ResourceType, resource_types
from connectors.kube.client import api_client_for
from connectors.kube.reflector import Reflector, ReflectorOptions
from connectors.kube.source import KubeSource

__all__ = [
    "Gone",
    "KubeApiError",
    "KubeSource",
    "NotServed",
    "Reflector",
    "ReflectorOptions",
    "ResourceType",
    "api_client_for",
    "resource_types",
]
