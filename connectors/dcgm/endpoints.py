"""Which exporters to scrape: a fixed list, and optionally a discovery that may change it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Discovery", "Endpoint"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    """The exporter's metrics page, e.g. ``http://10.0.3.7:9400/metrics``."""
    node: str | None = None
    """Node for the exporter's lines without a ``Hostname`` label (``--no-hostname``);
    discovery knows it from the pod's ``spec.nodeName``."""


class Discovery(Protocol):
    """Where exporters come and go (a DaemonSet's pods): asked again every discovery interval.
    Kept to one call so a Kubernetes lister, a DNS lookup or a file watch all fit."""

    async def endpoints(self) -> Sequence[Endpoint]: ...
