"""Kubernetes watchers: pods, nodes, scheduling Events, ResourceQuotas and, where their CRDs
are installed, Kueue and Volcano queues, each a list+watch reflector emitting envelopes; and
the actuator, which evicts, cordons and taints while it holds the actuator Lease."""

from connectors.kube.actuator import Actuator, Executor
from connectors.kube.api import Gone, KubeApiError, NotServed, ResourceType, resource_types
from connectors.kube.calls import (
    ActuatorLimit,
    AttemptsExhausted,
    ConflictsExhausted,
    Gate,
    NotHolding,
)
from connectors.kube.client import api_client_for
from connectors.kube.lease import LeaseElector
from connectors.kube.reflector import Reflector, ReflectorOptions
from connectors.kube.source import KubeSource

__all__ = [
    "Actuator",
    "ActuatorLimit",
    "AttemptsExhausted",
    "ConflictsExhausted",
    "Executor",
    "Gate",
    "Gone",
    "KubeApiError",
    "KubeSource",
    "LeaseElector",
    "NotHolding",
    "NotServed",
    "Reflector",
    "ReflectorOptions",
    "ResourceType",
    "api_client_for",
    "resource_types",
]
