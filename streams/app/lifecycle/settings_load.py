"""Where the commands read their settings: the one place ``GpufragSettings`` is built.

A command reads them once at its start and hands the groups down, so a run never mixes two
readings of the environment; a misspelt or out-of-range setting stops it there, with one line
per problem (``streams.app.console.setting_errors``)."""

from __future__ import annotations

from models import GpufragSettings
from streams.app.lifecycle.plugins import load_plugins

__all__ = ["load_settings"]


def load_settings() -> GpufragSettings:
    """The environment's settings (``GPUFRAG_*``), validated, with the plugins they name
    imported (their components registered)."""
    settings = GpufragSettings()
    load_plugins(settings.plugins)
    return settings
