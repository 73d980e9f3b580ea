"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact decimals.

kubernetes-asyncio hands quantities over as the API's strings; parsing them here keeps one
reading of the suffixes for pods, nodes and quota objects alike.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache

__all__ = ["QUANTITY_MAX", "QuantityError", "ceil_int", "parse_amount", "parse_quantity"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
QUANTITY_MAX = Decimal(10) ** 30
"""Far past any resource (10^30 bytes is a million exabytes), still cheap to convert."""
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The quantity's value in base units (cores, bytes, devices)."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"not a quantity: {value!r}")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    return _parse_text(value)


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    """One quantity string's value, kept: a cluster's requests repeat a few dozen strings
    ("1000m", "16Gi") across 20,000 pods, each read twice (the pod and the node's sum).
    Decimals cannot change, so one object serves every reader; refusals are not kept."""
    if not value.strip():
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip()
    number, factor = text, Decimal(1)
    if text[-2:] in _BINARY:
        number, factor = text[:-2], Decimal(1024) ** _BINARY[text[-2:]]
    elif text[-1:] in _DECIMAL and not text[-1:].isdigit():
        suffix = text[-1:]
        # "1e3" is an exponent, "1E" is exa: only a trailing letter with no digits after it is a
        # suffix, and an exponent form is handled by Decimal itself below.
        number, factor = text[:-1], Decimal(10) ** _DECIMAL[suffix]
    try:
        parsed = Decimal(number) * factor
    except ArithmeticError:  # not a number, or one past Decimal's exponent range (Overflow)
        raise QuantityError(f"not a quantity: {value!r}") from None
    if not parsed.is_finite():
        raise QuantityError(f"not a quantity: {value!r}")
    if abs(parsed) > QUANTITY_MAX:
        # 1e999999 is a valid Decimal; turning it into an int would build a million digits.
        raise QuantityError(f"{value!r} is past any real resource (over 10^30)")
    return parsed


def parse_amount(value: object) -> Decimal:
    """A resource amount (request, limit, allocatable, quota): a quantity that cannot be
    negative. Refused rather than summed, since one negative container would quietly cancel
    its neighbour's request."""
    parsed = parse_quantity(value)
    if parsed < 0:
        raise QuantityError(f"{value!r} is negative")
    return parsed


def ceil_int(value: Decimal) -> int:
    """Round up, as the scheduler does when it converts a request to whole units."""
    return int(value.to_integral_value(rounding="ROUND_CEILING"))
