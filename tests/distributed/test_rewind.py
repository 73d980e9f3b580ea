"""Which partitions the worker's consumer reads again from their start after a rebalance: every
stream partition without a commit above 0 (aiokafka's seek leaves those where the consumer had
got to, past anything Faust fetched and then dropped during the rebalance), never a table's
changelog (Faust's recovery positions those itself)."""

from __future__ import annotations

import pytest
from faust.types import TP

from streams.distributed.transport import ChangelogReadOffsets, rewind_targets

PODS_0, PODS_1, PODS_2 = TP("x.pods", 0), TP("x.pods", 1), TP("x.pods", 2)
CHANGELOG = TP("x.app-tasks-changelog", 0)


@pytest.mark.parametrize(
    ("committed", "rewound"),
    [
        ({}, {PODS_0, PODS_1, PODS_2}),  # a new group: nothing committed yet, all of them
        ({PODS_0: 0, PODS_1: None}, {PODS_0, PODS_1, PODS_2}),  # 0 and None: no commit
        ({PODS_0: 41, PODS_1: 7}, {PODS_2}),  # a commit above 0: aiokafka seeks there
        ({PODS_0: 41, PODS_1: 7, PODS_2: 1}, set()),
    ],
)
def test_stream_partitions_without_a_commit_are_read_from_their_start(
    committed: dict[TP, int | None], rewound: set[TP]
) -> None:
    assigned = {PODS_0, PODS_1, PODS_2, CHANGELOG}
    got = rewind_targets(
        assigned, committed=committed, changelog=lambda tp: tp.topic.endswith("-changelog")
    )
    assert got == rewound


def test_read_offsets_filter_table_changelogs_only() -> None:
    """Faust drops a message below the partition's read offset: for a stream partition read
    again from its start that would drop what the stages forgot, so only changelogs keep it."""
    offsets = ChangelogReadOffsets(lambda tp: tp.topic.endswith("-changelog"))
    offsets[PODS_0] = 87
    offsets[CHANGELOG] = 12
    assert offsets[PODS_0] is None
    assert offsets[CHANGELOG] == 12
    assert offsets[PODS_1] is None  # never read: Faust's default
