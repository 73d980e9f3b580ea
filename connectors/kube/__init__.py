"""Kubernetes watchers: pods, nodes, scheduling Events, ResourceQuotas and, where their CRDs
are installed, Kueue and Volcano queues, each a list+watch reflector emitting envelopes; and
the actuator, which evicts, cordons and taints while it holds the actuator Lease."""

from connectors.kube.act.actuator import Actuator, Executor
from connectors.kube.act.calls import (
    ActuatorLimit,
    AttemptsExhausted,
    ConflictsExhausted,
    LeaseGate,
    NotHolding,
)
from connectors.kube.act.lease import LeaseElector
from connectors.kube.client import api_client_for
from connectors.kube.watch.api import Gone, KubeApiError, NotServed, ResourceType, resource_types
from connectors.kube.watch.reflector import Reflector, ReflectorOptions
from connectors.kube.watch.source import KubeSource

__all__ = [
    "Actuator",
    "ActuatorLimit",
    "AttemptsExhausted",
    "ConflictsExhausted",
    "Executor",
    "Gone",
    "KubeApiError",
    "KubeSource",
    "LeaseElector",
    "LeaseGate",
    "NotHolding",
    "NotServed",
    "Reflector",
    "ReflectorOptions",
    "ResourceType",
    "api_client_for",
    "resource_types",
]
