"""The worker's consumer commits only up to the first message a stage still holds."""

from __future__ import annotations

import pytest

from streams.distributed.transport import next_commit


@pytest.mark.parametrize(
    ("acked", "base", "commit", "left"),
    [
        # held at the committed offset, later ones acknowledged: nothing may be committed
        ([102, 103, 104], 101, None, [102, 103, 104]),
        # before the first commit: the first offset read is the base
        ([5, 6, 7], 0, None, [5, 6, 7]),
        ([0, 1, 2, 5, 6], 0, 3, [5, 6]),
        # the head is acknowledged: commit its run, keep what lies beyond the next hole
        ([101, 102, 104], 101, 103, [104]),
        ([103, 101, 102], 101, 104, []),
        # no base known yet: wait
        ([1, 2], None, None, [1, 2]),
        ([], 7, None, []),
    ],
)
def test_commit_stops_at_the_first_message_still_held(
    acked: list[int], base: int | None, commit: int | None, left: list[int]
) -> None:
    assert next_commit(acked, base=base) == commit
    assert acked == left
