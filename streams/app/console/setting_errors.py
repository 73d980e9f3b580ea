"""A settings problem as one line per problem, naming the variable to fix."""

from __future__ import annotations

import os
import re

from pydantic import ValidationError
from pydantic_settings import SettingsError

from models import GpufragSettings
from models.settings_env import PREFIX, nearest_setting, unreadable_json

__all__ = ["setting_lines"]

_FIELD = re.compile(r'field "(\w+)"')


def _variable(loc: tuple[int | str, ...]) -> str:
    return PREFIX + "__".join(str(part) for part in loc).upper()


def _validation_lines(exc: ValidationError) -> list[str]:
    lines = []
    for err in exc.errors():
        name = _variable(err["loc"])
        if err["type"] == "extra_forbidden":
            near = nearest_setting(GpufragSettings, name)
            hint = f"; did you mean {near}?" if near else ""
            lines.append(f"unknown setting {name}{hint}")
            continue
        why = err["msg"].removeprefix("Value error, ")
        lines.append(f"setting {name}: {why}")
    return lines


def _parse_lines(exc: SettingsError) -> list[str]:
    """pydantic-settings refuses a group or list variable that is not JSON before validating
    anything, and names only the top-level field; find the variable it meant."""
    match = _FIELD.search(str(exc))
    field = match.group(1) if match else ""
    found = unreadable_json(GpufragSettings, field, os.environ)
    if found is None:
        return [f"setting {PREFIX}{field.upper()}: cannot be read ({exc})"]
    name, why = found
    return [f"setting {name.upper()}: not valid JSON ({why}); groups and lists are JSON"]


def setting_lines(exc: Exception) -> list[str] | None:
    """The lines for a problem of the user's settings; None for any other error (a bug, or
    another model's ValidationError), which keeps its traceback."""
    if isinstance(exc, SettingsError):
        return _parse_lines(exc)
    if isinstance(exc, ValidationError) and exc.title == GpufragSettings.__name__:
        return _validation_lines(exc)
    return None
