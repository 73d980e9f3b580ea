"""A controller's FailedCreate Event -> models.QuotaRefusal, when a ResourceQuota refused the pod.

The wording is the API server's (k8s.io/apiserver, plugin/resourcequota/controller.go):
``exceeded quota: <quota>, requested: <list>, used: <list>, limited: <list>``, each list
``<resource>=<quantity>`` joined by ``,`` in resource order, wrapped by apimachinery's Forbidden
error (``pods "<name>" is forbidden: ``, or ``pods is forbidden: `` without a name) and by the
controller (``Error creating: `` from the Job and ReplicaSet controllers, another prefix from the
StatefulSet controller); client-go's event aggregation may prefix ``(combined from similar
events): ``. Only the quota part is read, wherever it stands, so every owner kind reads alike.
"""

from __future__ import annotations

import re
from decimal import Decimal

from pydantic import ValidationError

from connectors.kube.gpu.resource_names import is_gpu_resource
from connectors.kube.objects import MappingError, refused_fields
from connectors.kube.quantity import QuantityError, parse_amount
from models.quota_refusal import REFUSED_RESOURCES_MAX, QuotaRefusal

__all__ = ["FAILED_CREATE", "QUOTA_EXCEEDED", "is_quota_refusal", "parse_quota_refusal"]

FAILED_CREATE = "FailedCreate"
"""The reason k8s.io/kubernetes's controllers give an Event when creating a pod failed."""
QUOTA_EXCEEDED = "exceeded quota: "
MESSAGE_MAX = 64 * 1024
"""Characters of a message read at all: a refusal naming 32 resources is about 3 KB; an Event
message is stored whole by the API server, so a hostile one can be near 1 MiB."""

_REFUSAL = re.compile(
    r"exceeded quota: (?P<quota>[^\s,]+), requested: (?P<requested>\S+), "
    r"used: (?P<used>\S*), limited: (?P<limited>\S+)"
)
"""``used`` may be empty: a quota whose status had no usage yet for the resource."""
_POD = re.compile(r'pods "(?P<pod>[^"\s]{1,253})" is forbidden: exceeded quota: ')


def is_quota_refusal(reason: str | None, message: str | None) -> bool:
    """A FailedCreate Event whose message says a ResourceQuota refused the pod."""
    return reason == FAILED_CREATE and QUOTA_EXCEEDED in (message or "")[:MESSAGE_MAX]


def _amounts(text: str, *, part: str) -> dict[str, float]:
    out: dict[str, float] = {}
    items = [i for i in text.split(",") if i] if text else []
    if len(items) > REFUSED_RESOURCES_MAX:
        raise MappingError(f"{part}: {len(items)} resources, over {REFUSED_RESOURCES_MAX}")
    for item in items:
        name, sep, quantity = item.partition("=")
        if not sep or not name:
            raise MappingError(f"{part}: {item[:80]!r} is not <resource>=<quantity>")
        if name in out:
            raise MappingError(f"{part}: {name[:80]!r} is named twice")
        try:
            value: Decimal = parse_amount(quantity)
        except QuantityError as exc:
            raise MappingError(f"{part}: {name[:80]}: {exc}") from None
        out[name] = float(value)
    return out


def parse_quota_refusal(message: str) -> QuotaRefusal | None:
    """The refusal in a FailedCreate message; None when the message is not in the API server's
    wording (the Event then keeps its text). Raises MappingError when it is, but its figures
    cannot be read (a quantity that is none, a resource named twice): the event is refused
    with the reason, not passed on half-read."""
    text = message[:MESSAGE_MAX]
    match = _REFUSAL.search(text)
    if match is None:
        return None
    requested = _amounts(match["requested"], part="requested")
    limited = _amounts(match["limited"], part="limited")
    used = _amounts(match["used"], part="used")
    pod = _POD.search(text)
    try:
        return QuotaRefusal(
            quota=match["quota"],
            pod=pod["pod"] if pod is not None else None,
            requested=requested,
            used=used,
            limited=limited,
            gpu_resources=tuple(
                name
                for name in requested
                if not name.startswith("limits.")
                and is_gpu_resource(name.removeprefix("requests."))
            ),
        )
    except ValidationError as exc:
        raise refused_fields(exc, where="quota refusal") from None
