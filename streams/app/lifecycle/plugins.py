"""Extensions named by ``GPUFRAG_PLUGINS``, imported once at the start of every command.

Importing a plugin runs its ``register`` lines, so it must happen before the session builds
anything from the registries; a plugin that fails to import stops the command with one line,
since a run without a component the operator asked for would report a healthy, partial view.
"""

from __future__ import annotations

import importlib

__all__ = ["PluginError", "load_plugins"]


class PluginError(RuntimeError):
    """A module named in ``GPUFRAG_PLUGINS`` could not be imported."""


def load_plugins(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # any failure of a plugin is the user's to fix
            raise PluginError(
                f"plugin {name!r} (GPUFRAG_PLUGINS) could not be imported: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
