"""What `gpufrag worker` does with the state it finds under its app id, as a scenario table:
go on, record the version, migrate, or refuse in one line that names how to rebuild. Never
start on a view it cannot place in event time (it used to start empty then, silently)."""

from __future__ import annotations

import pytest

from models import GpufragSettings
from streams.distributed.stage import StageCounters
from streams.distributed.stages import ClusterLogic, Outlets
from streams.distributed.state_schema import (
    STATE_SCHEMA,
    StateSchemaError,
    StoredState,
    needs_cluster_keys,
    verdict,
)
from streams.pipeline import define_pipeline

VIEW = frozenset({"n/node-1", "t/ml/train-0", "o/abc", "~released/0", "clock"})

GOES_ON = [
    # (what is stored, records the version)
    (StoredState(schema=None, written=False), True),  # a new app id
    (StoredState(schema=STATE_SCHEMA, written=True), False),  # this version's own
    (StoredState(schema=None, written=True, cluster_keys=VIEW), True),  # schema 1, whole view
    (StoredState(schema=1, written=True, cluster_keys=VIEW), True),
    (StoredState(schema=2, written=True, cluster_keys=VIEW), True),  # untagged key states
    # schema 1 with no view yet, or one whose worker stopped before its first mark (nothing
    # committed: it is rebuilt from the start)
    (StoredState(schema=None, written=True, cluster_keys=frozenset({"~released/0"})), True),
    (StoredState(schema=None, written=True, cluster_keys=VIEW - {"~released/0"}), True),
    (StoredState(schema=None, written=True, cluster_keys=frozenset()), True),
]

REFUSED = [
    # (what is stored, words the one line must hold)
    (
        StoredState(schema=None, written=True, cluster_keys=VIEW - {"clock"}),
        ["without its schedule (clock", "schema 1", f"--app-id old-v{STATE_SCHEMA}"],
    ),
    (
        StoredState(schema=1, written=True, cluster_keys=VIEW - {"clock", "~released/0"}),
        ["without its schedule (clock", f"--app-id old-v{STATE_SCHEMA}"],
    ),
    (
        StoredState(schema=STATE_SCHEMA + 1, written=True),
        [f"schema {STATE_SCHEMA + 1}", "newer gpufrag", f"--app-id old-v{STATE_SCHEMA}"],
    ),
    (StoredState(schema=0, written=True, cluster_keys=VIEW), ["schema 0", "cannot migrate"]),
]


@pytest.mark.parametrize(("found", "records"), GOES_ON)
def test_a_readable_state_goes_on(found: StoredState, records: bool) -> None:
    assert verdict(found, app_id="old").record is records


@pytest.mark.parametrize(("found", "words"), REFUSED)
def test_an_unreadable_state_is_refused_in_one_line(found: StoredState, words: list[str]) -> None:
    with pytest.raises(StateSchemaError) as refused:
        verdict(found, app_id="old")
    line = str(refused.value)
    assert "\n" not in line
    for w in words:
        assert w in line, line


def test_only_a_migration_reads_the_cluster_changelog() -> None:
    assert needs_cluster_keys(StoredState(schema=None, written=True))
    assert needs_cluster_keys(StoredState(schema=1, written=True))
    assert not needs_cluster_keys(StoredState(schema=None, written=False))
    assert not needs_cluster_keys(StoredState(schema=STATE_SCHEMA, written=True))


def _cluster(table: dict[bytes, bytes]) -> ClusterLogic:
    out = Outlets(
        bindings=None,
        deltas=None,
        signals=None,
        actions=None,
        bindings_topic="bindings",
        queues_topic="queues",
        binding_partitions=1,
    )
    return ClusterLogic(define_pipeline(GpufragSettings()), table, out, StageCounters({}))


def test_the_cluster_stage_never_starts_an_older_view_empty() -> None:
    node = b'{"name": "n"}'
    # saved without its schedule: refused (a worker started without the check)
    with pytest.raises(StateSchemaError, match="without its schedule"):
        _cluster({b"n/node-1": node, b"~released/0": b"2023-07-01T00:00:00+00:00"}).instants()
    # its worker stopped before the first mark: nothing committed, rebuilt from the start
    fresh = _cluster({b"n/node-1": node, b"clock": b"{}"}).instants()
    assert fresh.watermark is None and fresh.op.view.nodes == {}
