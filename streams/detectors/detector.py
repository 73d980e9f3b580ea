"""What a detector is: a reader of the cluster view that opens and resolves signals.

The cluster operator tells every enabled detector what changed (a node, a task, a quota or
queue object, the typical pods) and that event time moved; a detector overrides only the hooks
it needs. Its deferred work is announced through ``next_due`` so that both runners do it at
the same event time.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from models import DetectorSettings, SchedulerEvent, Signal, TaskProfile
from models.actions import NoFix
from models.analysis import Explanation
from models.settings_group import Group
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView, TaskChange


class Explainer(Protocol):
    """What the cluster operator reads from the detector that explains pending pods."""

    @property
    def explanations(self) -> Mapping[str, Explanation]: ...
    @property
    def disagreements(self) -> Mapping[str, int]: ...
    @property
    def evaluations(self) -> int: ...
    def take_joined(self) -> dict[str, tuple[Explanation, TaskProfile]]: ...
    def note_no_fixes(self, no_fixes: Mapping[str, tuple[NoFix, ...]]) -> None: ...


class Switched(Protocol):
    @property
    def enabled(self) -> bool: ...


S = TypeVar("S", bound=Switched)


class ExtensionSwitch(Group):
    """An extension detector's settings when it declares none of its own: on unless
    ``GPUFRAG_DETECTORS__EXTENSIONS='{"<name>": {"enabled": false}}'``."""

    enabled: bool = True


class Detector(Generic[S]):
    name: ClassVar[str]
    """The detector's name: a product detector's settings group in ``DetectorSettings``, an
    extension's key in ``DetectorSettings.extensions``."""
    settings_model: ClassVar[type[Group]] = ExtensionSwitch
    """What an extension's entry in ``DetectorSettings.extensions`` is validated as."""

    def __init__(self, view: ClusterView, book: SignalBook, settings: S) -> None:
        self.view = view
        self.book = book
        self.settings = settings

    @classmethod
    def build(
        cls, view: ClusterView, book: SignalBook, settings: DetectorSettings
    ) -> Detector[Any] | None:
        """The detector with its own settings group, or None when that group turns it off."""
        own: Any = getattr(settings, cls.name, None)
        if own is None:  # an extension: its settings are a free-form entry, checked here
            own = cls.settings_model.model_validate(settings.extensions.get(cls.name, {}))
        return cls(view, book, own) if own.enabled else None

    def on_node(self, name: str) -> list[Signal]:
        """Node ``name`` changed or is gone (the view already holds the change)."""
        return []

    def on_task(self, key: str, change: TaskChange) -> list[Signal]:
        return []

    def on_queue(self, key: str) -> list[Signal]:
        """Quota or queue object ``key`` changed or is gone (in ``view.queues`` already)."""
        return []

    def on_refusal(self, event: SchedulerEvent, at: datetime) -> list[Signal]:
        """A controller's pod was refused by a ResourceQuota at ``at`` (``event.quota`` is
        set): work that has no pod, so the view holds nothing of it; a detector that wants it
        keeps it."""
        return []

    def on_typical(self) -> list[Signal]:
        """The typical pods were rebuilt, so every node's fragment was re-measured."""
        return []

    def advance(self, at: datetime) -> list[Signal]:
        return []

    def on_signals(self, signals: list[Signal]) -> list[Signal]:
        """What the detectors before this one (in ``DETECTORS`` order) opened or resolved for
        the same change: one detector's finding may be another's input."""
        del signals
        return []

    def next_due(self) -> datetime | None:
        return None

    def explainer(self) -> Explainer | None:
        """The detector that explains why pending pods wait returns itself: the hosts keep
        its explanations beside the signals (one such detector at most)."""
        return None

    def flush(self) -> list[Signal]:
        return []

    def counts(self) -> Mapping[str, int]:
        """Figures the detector adds to the cluster summary (``ClusterFragmentation`` fields)."""
        return {}

    def figures(self) -> Mapping[tuple[str, ...], float]:
        """Figures by bounded labels for the report's breakdown: (figure, label values...) ->
        value, e.g. ``("unplaceable", "cpu") -> 3``. Read on every report, so kept as running
        totals or computed from small sets; never one entry per pod or node."""
        return {}

    def clock_state(self) -> dict[str, object]:
        """What decides when its deferred work falls due (JSON-ready), for a restarted host."""
        return {}

    def restore_clock(self, state: dict[str, object]) -> None:
        del state

    def rebuilt(self) -> None:
        """The view was just rebuilt from saved profiles, which this detector heard as changes:
        forget what that replay made it think happened (``restore_clock`` follows when the
        detector saved a clock)."""
