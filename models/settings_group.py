"""The base of every settings group: frozen, unknown keys are errors (not silently ignored),
numbers are finite and durations bounded."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["INT64_MAX", "INT64_MIN", "SECONDS_MAX", "Group", "PluginModule"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

SECONDS_MAX = 366 * 24 * 3600.0
"""The longest duration any ``*_s`` setting takes: a year. The longest default is an hour
(``guardrails.cooldown_pod_s``); a duration of 10^12 s put event times past year 9999 (an
OverflowError at every instant), and an infinite one never fired while the run said finished."""


class Group(BaseModel):
    # allow_inf_nan=False: "inf", "nan" and 1e309 (read as inf) are refused at start instead
    # of failing later, where the value is used.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _bounded(cls, value: object, info: ValidationInfo) -> object:
        name = info.field_name or ""
        if name.endswith("_s") and isinstance(value, (int, float)) and value > SECONDS_MAX:
            raise ValueError(f"must be at most {SECONDS_MAX:.0f} seconds (a year)")
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            # ClickHouse columns, Kafka and orjson all stop at 64 bits
            raise ValueError("must fit in 64 bits")
        return value


PluginModule = Annotated[
    str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", max_length=200)
]
"""A dotted module name (``pkg.module``), nothing a shell or a path could smuggle in."""
