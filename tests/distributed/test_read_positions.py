"""What the worker's consumer hands on (``positions.py``): only each stream partition's next
offset since its seek in the current assignment. The chaos soak's cases first: a partition read
again from its start whose fetcher still held offsets 9 onward from before the seek, and a new
worker whose consumer fetched from 112 before the recovery sought the partition to its commit,
65."""

from __future__ import annotations

import pytest

from streams.distributed.positions import Admit, ReadPositions

D, B, A, S, U = Admit.DELIVER, Admit.BEHIND, Admit.AHEAD, Admit.SEEK_BACK, Admit.UNSOUGHT


@pytest.mark.parametrize(
    ("seek_to", "offsets", "verdicts"),
    [
        # the soak: 9 and 10 fetched before the seek back to 0 come first
        (0, [9, 10, 0, 1, 2], [S, A, D, D, D]),
        # in order from the seek: everything
        (5, [5, 6, 7], [D, D, D]),
        # a copy of what was handed on, and one below the seek (the commit covers it)
        (5, [5, 6, 5, 4, 7], [D, D, B, B, D]),
        # ahead again after the partition was back in order: a second seek back
        (0, [3, 0, 1, 2, 3, 9, 4], [S, D, D, D, D, S, D]),
        # the soak under load: a worker's first assignment, read from 112 before the seek
        (None, [112, 113], [U, U]),
    ],
)
def test_only_the_next_offset_since_the_seek_is_handed_on(
    seek_to: int | None, offsets: list[int], verdicts: list[Admit]
) -> None:
    positions: ReadPositions[str] = ReadPositions()
    if seek_to is not None:
        positions.seeked("pods/0", seek_to)
    assert [positions.admit("pods/0", o, stream=True) for o in offsets] == verdicts


def test_a_new_worker_hands_on_a_stream_partition_only_from_its_seek() -> None:
    """The records its consumer fetched before the recovery's seek go; the seek reads them
    again, from the commit, in order."""
    positions: ReadPositions[str] = ReadPositions()
    early = [positions.admit("pods/0", o, stream=True) for o in (112, 113, 114)]
    assert positions.seeked("pods/0", 65)  # the fetcher is past 65: seek there once more
    after = [positions.admit("pods/0", o, stream=True) for o in (115, 65, 66)]
    assert (early, after) == ([U, U, U], [S, D, D])
    assert positions.dropped == {U: 3, S: 1}


def test_a_new_seek_or_a_revocation_resets_the_partition() -> None:
    positions: ReadPositions[str] = ReadPositions()

    def admit(tp: str, offset: int) -> Admit:
        return positions.admit(tp, offset, stream=not tp.startswith("app-"))

    positions.seeked("pods/0", 0)
    assert admit("pods/0", 4) is S
    positions.seeked("pods/0", 4)  # the seek back landed (or the next rebalance's seek)
    assert [admit("pods/0", o) for o in (4, 5)] == [D, D]
    assert positions.next_offset("pods/0") == 6
    # revoked: nothing until the next assignment's seek (a batch fetched before the
    # revocation, or records read before the seek, which reads them again)
    positions.forget("pods/0")
    assert positions.next_offset("pods/0") is None
    assert [admit("pods/0", o) for o in (40, 6)] == [U, U]
    positions.seeked("pods/0", 6)
    assert admit("pods/0", 6) is D
    # a table's changelog is positioned by Faust's recovery: all of it, revoked or not
    assert [admit("app-tasks-changelog/0", o) for o in (9, 3, 3)] == [D, D, D]
    positions.forget("app-tasks-changelog/0")
    assert admit("app-tasks-changelog/0", 9) is D
    # other partitions are their own
    positions.seeked("pods/1", 2)
    assert admit("pods/1", 3) is S and admit("pods/0", 7) is D
    assert positions.dropped == {S: 2, U: 2}


@pytest.mark.parametrize(
    ("dropped", "start", "again"),
    [
        # the CI failure: a cluster stage's queues partition, 5 records fetched from the start
        # while the recovery looked the start up; nothing after them would show the gap
        ([0, 1, 2, 3, 4], 0, True),
        ([], 0, False),  # nothing fetched before the mark: the seek stands
        ([10, 11], 65, False),  # all below the start (from before the seek to the commit)
        ([60, 66], 65, True),
    ],
)
def test_a_mark_says_when_the_fetcher_went_past_it_before_it_was_set(
    dropped: list[int], start: int, again: bool
) -> None:
    positions: ReadPositions[str] = ReadPositions()
    assert [positions.admit("queues/0", o, stream=True) for o in dropped] == [U] * len(dropped)
    assert positions.seeked("queues/0", start) is again
    # asked once: the seek that follows reads them again, in order
    assert positions.seeked("queues/0", start) is False
    assert [positions.admit("queues/0", o, stream=True) for o in (start, start + 1)] == [D, D]
