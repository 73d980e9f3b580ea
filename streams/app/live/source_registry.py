"""What a live source is, what its builder is given, and the registry of source kinds
`gpufrag watch` can run.

Each kind is a name mapped to an async builder, registered with one line: the built-ins
(``builtin_sources.py``: kube, dcgm, nvml) the same way as an extension loaded through
``GPUFRAG_PLUGINS``. The watch's flags choose built-ins as they always have; ``--source NAME``
and ``GPUFRAG_WATCH__SOURCES`` name any registered kind. This module imports no source's
library, so an extension that registers here loads no Kubernetes or gRPC client.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import typer
from prometheus_client import CollectorRegistry

from connectors.live_stage import Emit
from connectors.refusals import RefusalLog
from models import EventKind, GpufragSettings
from models.component_registry import Registry, UnknownComponent
from streams.app.console.errors import EXIT_USAGE

__all__ = [
    "LIVE_SOURCES",
    "LiveSource",
    "Runnable",
    "SourceBuilder",
    "SourceContext",
    "SourcePlan",
]


class Runnable(Protocol):
    async def run(self, *, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class LiveSource:
    name: str
    """Its publisher's name in progress reports and its metrics label: one per process."""
    kinds: tuple[EventKind, ...]
    """What it publishes: the workers wait for its progress on these kinds' topics only."""
    build: Callable[[Emit], Runnable]
    """The running source, given where its events go; called once (its metrics register
    once) and run again by the supervisor if it fails."""


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """The sources one watch runs, by registered name, in order, and the options of the
    built-ins that the flags carry."""

    names: tuple[str, ...]
    dcgm: tuple[str, ...] = ()
    """dcgm-exporter pages to scrape (``--dcgm``, ``GPUFRAG_DCGM__ENDPOINTS``)."""
    dcgm_discover: bool = False
    nvml_node: str | None = None
    """The node name of the NVML samples."""

    @classmethod
    def of(
        cls,
        *,
        kube: bool,
        dcgm: tuple[str, ...],
        dcgm_discover: bool,
        nvml_node: str | None,
        named: Iterable[str] = (),
    ) -> SourcePlan:
        """The plan of `watch`'s flags plus the sources ``named`` (``--source``,
        ``GPUFRAG_WATCH__SOURCES``); none, or a name nobody registered, stops the command in
        one line (exit 2) before anything starts."""
        from streams.app.live import builtin_sources  # noqa: F401  (checked with the built-ins)

        by_flag = {"kube": kube, "dcgm": bool(dcgm or dcgm_discover), "nvml": nvml_node is not None}
        names = tuple(dict.fromkeys([*(n for n, on in by_flag.items() if on), *named]))
        if not names:
            raise typer.BadParameter(
                "no source: give --kube, --dcgm URL, --dcgm-discover, --nvml or --source NAME"
            )
        try:
            LIVE_SOURCES.check(names)
        except UnknownComponent as exc:
            typer.echo(f"gpufrag: error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        return cls(names, dcgm=dcgm, dcgm_discover=dcgm_discover, nvml_node=nvml_node)


@dataclass(slots=True)
class SourceContext:
    """What a builder may use: the plan and settings, the process's metrics registry and
    refusal log, an exit stack for what must be closed when the watch ends, and an API client
    shared by every source that talks to Kubernetes."""

    plan: SourcePlan
    settings: GpufragSettings
    registry: CollectorRegistry
    refusals: RefusalLog
    stack: contextlib.AsyncExitStack
    host: str = field(default_factory=socket.gethostname)
    _kube: Any = None

    async def kube_client(self) -> Any:
        """The Kubernetes API client (``GPUFRAG_KUBE__*``), made on first use, closed when
        the watch ends: one connection pool for the watchers and the exporter discovery."""
        if self._kube is None:
            from connectors.kube import api_client_for  # loaded only by a source that asks

            self._kube = await api_client_for(self.settings.kube)
            self.stack.push_async_callback(self._kube.close)
        return self._kube


SourceBuilder = Callable[[SourceContext], Awaitable[LiveSource]]
"""Makes one kind's ``LiveSource``; called once per watch, only when the plan names it."""

LIVE_SOURCES: Registry[SourceBuilder] = Registry("live source")
