"""A namespace ResourceQuota's refusal of a pod a controller tried to create.

Work that a quota refuses never becomes a pod: the Job, ReplicaSet or StatefulSet controller
asks for one, the API server's ResourceQuota admission answers 403, and the only trace is the
controller's ``FailedCreate`` Event on the owner, worded ``Error creating: pods "train-x7k2p" is
forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used:
requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2``
(k8s.io/apiserver's resourcequota admission, k8s.io/kubernetes's controller_utils).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from models.base import Frozen

__all__ = ["REFUSED_RESOURCES_MAX", "QuotaRefusal", "RefusedAmount"]

REFUSED_RESOURCES_MAX = 32
"""Resources one refusal names: only the exceeded ones of one quota are listed, a quota with
compute, storage, object counts and a few GPU kinds has about 15 hard entries in all."""
RefusedAmount = Annotated[float, Field(ge=0, le=1e30)]
"""A quantity in base units (devices, cores, bytes, objects): any size a Kubernetes quantity
gpufrag reads can have (``connectors.kube.quantity.QUANTITY_MAX``), since a storage quota in
bytes passes the bound a queue's GPU amounts are held to."""
ResourceName = Annotated[str, Field(min_length=1, max_length=320)]
"""A quota's resource name: a qualified name (up to 253 + 63) with its ``requests.`` prefix."""
Amounts = dict[ResourceName, RefusedAmount]


class QuotaRefusal(Frozen):
    """What the admission message says: which quota, and per exceeded resource (named as the
    quota names it: ``requests.nvidia.com/gpu``, ``requests.cpu``, ``pods``) what the pod
    asked for, what was used and the quota's hard limit at that moment."""

    quota: Annotated[str, Field(min_length=1, max_length=253)]
    """The ResourceQuota's name (a DNS subdomain) in the event's namespace."""
    pod: Annotated[str, Field(max_length=253)] | None = None
    """The refused pod's name, when the message gives one (generated names change per try)."""
    requested: Amounts = Field(max_length=REFUSED_RESOURCES_MAX)
    used: Amounts = Field(max_length=REFUSED_RESOURCES_MAX)
    limited: Amounts = Field(max_length=REFUSED_RESOURCES_MAX)
    gpu_resources: tuple[ResourceName, ...] = ()
    """Those of the resources that limit GPUs (as the watcher's GPU naming decides), in the
    quota's names; a refusal without one says nothing about GPUs (a CPU or pod-count quota)."""

    @model_validator(mode="after")
    def _one_set_of_resources(self) -> QuotaRefusal:
        # the admission masks all three lists by the same exceeded set
        if not self.requested or set(self.requested) != set(self.limited):
            raise ValueError("requested and limited must name the same, non-empty resources")
        if not set(self.used) <= set(self.limited):
            raise ValueError("used names a resource that is not limited")
        if not set(self.gpu_resources) <= set(self.requested):
            raise ValueError("gpu_resources names a resource that was not requested")
        return self
