"""The resources the Kubernetes watchers can follow (``GPUFRAG_KUBE__RESOURCES``)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DRA_RESOURCES", "KubeResource"]


class KubeResource(StrEnum):
    """The resources the Kubernetes watchers can follow, one list+watch each."""

    PODS = "pods"
    NODES = "nodes"
    EVENTS = "events"
    RESOURCE_QUOTAS = "resourcequotas"
    KUEUE_WORKLOADS = "kueue-workloads"
    KUEUE_CLUSTER_QUEUES = "kueue-clusterqueues"
    KUEUE_LOCAL_QUEUES = "kueue-localqueues"
    VOLCANO_POD_GROUPS = "volcano-podgroups"
    VOLCANO_QUEUES = "volcano-queues"
    RESOURCE_SLICES = "resourceslices"
    DEVICE_CLASSES = "deviceclasses"
    RESOURCE_CLAIMS = "resourceclaims"
    RESOURCE_CLAIM_TEMPLATES = "resourceclaimtemplates"
    DEVICE_TAINT_RULES = "devicetaintrules"


DRA_RESOURCES = (
    KubeResource.RESOURCE_SLICES,
    KubeResource.DEVICE_CLASSES,
    KubeResource.RESOURCE_CLAIMS,
    KubeResource.RESOURCE_CLAIM_TEMPLATES,
    KubeResource.DEVICE_TAINT_RULES,
)
"""Dynamic Resource Allocation's objects (``resource.k8s.io/v1``): they change what nodes and
pods are, so they are watched with both."""
