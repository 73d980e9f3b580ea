"""An input an edge refused: what came in, from where, and why, kept instead of lost."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.base import Frozen, UtcDatetime

__all__ = ["RAW_MAX_CHARS", "Refusal"]

RAW_MAX_CHARS = 16_384
"""Raw forms longer than this are cut: a dead letter says what arrived, and one refused 10 MB
page must not become a 10 MB row (a real pod object is 2-8 KB of JSON)."""


class Refusal(Frozen):
    """One object an edge would not pass on. ``reason`` is a short stable code (it labels a
    metric, so its values stay few); ``detail`` is the one-line explanation naming the field."""

    source: Annotated[str, Field(min_length=1)]
    """Which edge: "kube/pods", "dcgm", "nvml", "trace", "kafka/<topic>"."""
    reason: Annotated[str, Field(min_length=1, max_length=64)]
    detail: str
    raw: Annotated[str, Field(max_length=RAW_MAX_CHARS + 32)]
    at: UtcDatetime
    """Wall-clock time of the refusal: a refused object often has no event time to trust."""

    @staticmethod
    def cut(raw: str) -> str:
        """``raw`` short enough to keep, saying how much was cut."""
        if len(raw) <= RAW_MAX_CHARS:
            return raw
        return f"{raw[:RAW_MAX_CHARS]}...[{len(raw) - RAW_MAX_CHARS} chars cut]"
