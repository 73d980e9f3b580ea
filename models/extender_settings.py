"""`gpufrag extender`'s settings group (``GPUFRAG_EXTENDER__*``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.settings_group import Group as _Group


class ExtenderSettings(_Group):
    """`gpufrag extender`: kube-scheduler's extender, answered from the process's own view."""

    policy: Annotated[str, Field(pattern=r"^[a-z][a-z-]*$", max_length=40)] = "fgd"
    """How prioritize scores nodes: one of the six placement policies (``gpufrag experiment
    --policy``); an unknown name stops the command at start with the known ones."""
    addr: Annotated[str, Field(min_length=1, max_length=255)] = "0.0.0.0"
    port: Annotated[int, Field(ge=1, le=65535)] = 8099
    """Where kube-scheduler's ``urlPrefix`` points (``http://HOST:8099/``)."""
    assume_ttl_s: Annotated[float, Field(gt=0)] = 60.0
    """How long a pod the extender bound is charged to its cards before the watch shows it
    bound. kube-scheduler binds in the background, so the next pod is scored before the
    last one's binding is seen; after this long unseen, the binding is taken as failed."""
    ready_after_s: Annotated[float, Field(ge=0)] = 5.0
    """Readiness waits for the watchers' first lists and then this long, so the first
    answers come from a full view (an extender that says "no room" from an empty view would
    reject every node: it is ignorable, but its filter is not)."""
    seed: Annotated[int, Field(ge=0)] = 0
    """Seed of the ``random`` policy's scores."""
