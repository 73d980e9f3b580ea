"""Which label says what, across dcgm-exporter versions and Prometheus relabelling.

Exporters before 2.x's ``--use-old-namespace`` default wrote ``pod_name``/``pod_namespace``/
``container_name`` and ``uuid``; current ones write ``pod``/``namespace``/``container`` and
``UUID``. Read back through a Prometheus that had its own ``pod`` target label, the exporter's
label arrives as ``exported_pod``: then the exported one is the workload, the plain one the
exporter's own pod, so an ``exported_`` name always wins.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONTAINER", "NAMESPACE", "NODE", "POD", "UUID", "first"]

NODE = ("Hostname", "hostname")
POD = ("pod", "pod_name")
NAMESPACE = ("namespace", "pod_namespace")
CONTAINER = ("container", "container_name")
UUID = ("UUID", "uuid")


def first(labels: Mapping[str, str], names: tuple[str, ...] | str) -> str | None:
    """The first non-empty value among ``names`` (each tried as ``exported_<name>`` first); an
    empty label is the exporter saying "none" (``pod=""`` on a GPU no pod holds)."""
    for name in (names,) if isinstance(names, str) else names:
        for key in (f"exported_{name}", name):
            value = labels.get(key)
            if value:
                return value
    return None


def owner(labels: Mapping[str, str]) -> tuple[str | None, str, str | None] | None:
    """(namespace, pod, container) the line is attributed to, if any. A line that came through
    Prometheus (it has the ``job`` and ``instance`` target labels, which the exporter never
    writes) may carry the scrape target's own ``pod``: on a GPU no pod holds, the exporter's
    empty ``pod`` counts as absent and Prometheus fills in the dcgm-exporter pod. There only
    the ``exported_`` names are the exporter's, so only they attribute."""
    via_prometheus = "job" in labels and "instance" in labels
    if via_prometheus:
        labels = {k: v for k, v in labels.items() if k.startswith("exported_")}
    pod = first(labels, POD)
    if pod is None:
        return None
    return first(labels, NAMESPACE), pod, first(labels, CONTAINER)
