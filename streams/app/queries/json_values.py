"""Values of any column type the store can return, as JSON and CSV can carry them.

clickhouse-connect returns Python objects: ``date``/``datetime`` for Date and DateTime64,
``UUID``, ``Decimal``, ``IPv4Address``/``IPv6Address``, ``bytes`` for FixedString, tuples,
dicts for Map and JSON. ``json.dumps`` knows none of the first five and writes ``NaN``
(which is not JSON) for a float nan, so each is given the text ClickHouse itself prints.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from ipaddress import IPv4Address, IPv6Address
from uuid import UUID

__all__ = ["plain"]

_AS_TEXT = (UUID, Decimal, IPv4Address, IPv6Address)
"""Written as strings: a Decimal as a number would lose digits in every JSON reader that
reads numbers as doubles, and ClickHouse's own JSON quotes UUIDs and addresses."""


def plain(value: object) -> object:
    """``value`` as str, int, float, bool, None, list or dict (recursively)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, _AS_TEXT):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).rstrip(b"\0").decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return str(value)
