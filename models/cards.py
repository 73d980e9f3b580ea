"""How a node shares its cards, and the sizes that sharing is counted in.

A pod's ``nvidia.com/gpu: 1`` means a different thing on each kind of node: a whole card, one
time-slicing replica, or a HAMi vGPU bounded by memory and cores. The node decides, so the
mode lives with the node and every card of a profile says which mode it is in.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = [
    "MIG_SLICES_A30",
    "MIG_SLICES_DEFAULT",
    "SharingMode",
    "card_slices",
    "mig_profile_slices",
    "resource_name",
]


class SharingMode(StrEnum):
    EXCLUSIVE = "exclusive"
    """A device is a whole card (the device plugin's default)."""
    MILLI = "milli"
    """Shares in 1/1000 of a card: the Alibaba trace and the FGD paper's simulator."""
    TIME_SLICED = "time-sliced"
    """R replicas per card, each 1/R of its compute; memory is not isolated."""
    MIG = "mig"
    """Instances by profile; a pod asks for a profile, not a card."""
    HAMI = "hami"
    """HAMi vGPUs: at most R per card, each with a memory cap (MiB) and a core share."""


MIG_SLICES_DEFAULT = 7
"""Compute slices of a MIG-capable card: A100, H100, H200, B200 and GH200 have 7."""
MIG_SLICES_A30 = 4
_FOUR_SLICE_MODELS = frozenset({"A30"})
_PROFILE = re.compile(r"(?:\d+c\.)?(\d+)g\.\d+gb(?:\+me)?(?:\.\w+)?", re.IGNORECASE)


def card_slices(model: str | None) -> int:
    """Compute slices per card of this model (what an instance's ``Ng`` is a share of)."""
    return MIG_SLICES_A30 if model in _FOUR_SLICE_MODELS else MIG_SLICES_DEFAULT


def mig_profile_slices(profile: str) -> int:
    """The compute slices ``N`` of a profile ``Ng.Mgb`` (also ``1c.3g.40gb`` and ``1g.10gb+me``);
    ValueError for a name that is not a MIG profile."""
    match = _PROFILE.fullmatch(profile)
    if match is None:
        raise ValueError(
            f"{profile[:40]!r} is not a MIG profile (expected e.g. '1g.10gb' or '3g.40gb')"
        )
    digits = match.group(1)
    slices = int(digits) if len(digits) <= 6 else 10**6  # no 4,300-digit int() for a name
    if not 1 <= slices <= MIG_SLICES_DEFAULT:
        raise ValueError(
            f"MIG profile {profile[:40]!r} needs {slices} compute slices; "
            f"a card has 1..{MIG_SLICES_DEFAULT}"
        )
    return slices


def resource_name(*, shared: bool, dra: bool) -> int:
    """The resource GPUs are asked for by, as a number: 0 ``nvidia.com/gpu``, 1
    ``nvidia.com/gpu.shared``, 2 DRA devices (through claims). A request fits only nodes
    whose cards go by the same one, as kube-scheduler counts each apart."""
    return 2 if dra else int(shared)
