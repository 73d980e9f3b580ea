"""What `gpufrag worker` does with the state it finds under its app id, as a scenario table:
go on, record the version, migrate, or refuse in one line that names how to rebuild. Never
start on a view it cannot place in event time (it used to start empty then, silently)."""

from __future__ import annotations

import pytest

from streams.distributed.state_schema import (
    STATE_SCHEMA,
    StateSchemaError,
    StoredState,
    needs_cluster_keys,
    verdict,
)

VIEW = frozenset({"n/node-1", "t/ml/train-0", "o/abc", "~released/0", "clock"})

GOES_ON = [
    # (what is stored, records the version)
    (StoredState(schema=None, written=False), True),  # a new app id
    (StoredState(schema=STATE_SCHEMA, written=True), False),  # this version's own
    (StoredState(schema=None, written=True, cluster_keys=VIEW), True),  # schema 1, whole view
    (StoredState(schema=1, written=True, cluster_keys=VIEW), True),
    # schema 1 with no view yet (a worker stopped before its first release): nothing to lose
    (StoredState(schema=None, written=True, cluster_keys=frozenset({"~released/0"})), True),
    (StoredState(schema=None, written=True, cluster_keys=frozenset()), True),
]

REFUSED = [
    # (what is stored, words the one line must hold)
    (
        StoredState(schema=None, written=True, cluster_keys=VIEW - {"clock"}),
        ["without clock", "schema 1", "--app-id old-v2"],
    ),
    (
        StoredState(schema=1, written=True, cluster_keys=VIEW - {"clock", "~released/0"}),
        ["without ~released/0 and clock", "--app-id old-v2"],
    ),
    (
        StoredState(schema=STATE_SCHEMA + 1, written=True),
        [f"schema {STATE_SCHEMA + 1}", "newer gpufrag", "--app-id old-v2"],
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
