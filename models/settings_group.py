"""The base of every settings group: frozen, and unknown keys are errors, not silently ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Group"]


class Group(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
