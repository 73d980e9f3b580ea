"""The event-time window operator as scenario tables: each input (an item, or event time
moving on) with the windows it opens, updates, closes or refuses as late.

Times are event-time seconds after T0 (a multiple of every step, so window starts are round);
a window is written (kind, key, start_s, end_s, values).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.windows import Keyed, WindowEvent, WindowOperator, WindowSpec

T0 = datetime(2026, 12, 2, tzinfo=UTC)
Row = tuple[str, str, float, float, tuple[str, ...]]
Step = tuple[tuple[str, float, str] | float | str, list[Row]]
"""(key, second, value) an item; a number: advance to that second; "flush": the input ends."""


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def op(spec: WindowSpec) -> WindowOperator[str]:
    return WindowOperator(spec, encode=lambda v: v, decode=str)


def rows(events: list[WindowEvent[str]]) -> list[Row]:
    return [
        (e.kind, e.key, (e.start - T0).total_seconds(), (e.end - T0).total_seconds(), e.values)
        for e in events
    ]


def step(o: WindowOperator[str], what: tuple[str, float, str] | float | str) -> list[Row]:
    if what == "flush":
        return rows(o.flush())
    if isinstance(what, tuple):
        key, at, value = what
        return rows(o.apply(Keyed(key, t(at), value)))
    assert isinstance(what, int | float)
    return rows(o.advance(t(what)))


def run(o: WindowOperator[str], steps: list[Step]) -> None:
    for i, (what, expected) in enumerate(steps):
        assert step(o, what) == expected, f"step {i}: {what!r}"


HOPPING = WindowSpec(length_s=60, step_s=30, lateness_s=10)
HOPPING_STEPS: list[Step] = [
    # 5 s falls in [-30, 30) and [0, 60)
    (("a", 5, "x1"), [("open", "a", -30, 30, ("x1",)), ("open", "a", 0, 60, ("x1",))]),
    (
        ("a", 35, "x2"),
        [("update", "a", 0, 60, ("x1", "x2")), ("open", "a", 30, 90, ("x2",))],
    ),
    # [-30, 30) closes at its end plus the 10 s lateness, not at its end
    (39, []),
    (40, [("close", "a", -30, 30, ("x1",))]),
    # out of order, within the lateness: it updates the window still open, in time order
    (("a", 25, "x3"), [("update", "a", 0, 60, ("x1", "x3", "x2"))]),
    # a boundary: 60 s starts [60, 120) and is not in [0, 60)
    (
        ("b", 60, "y1"),
        [("open", "b", 30, 90, ("y1",)), ("open", "b", 60, 120, ("y1",))],
    ),
    (80, [("close", "a", 0, 60, ("x1", "x3", "x2"))]),
    # every window of 20 s has closed: refused as late, not dropped silently
    (("a", 20, "x4"), [("late", "a", 20, 20, ("x4",))]),
    (
        "flush",
        [
            ("close", "a", 30, 90, ("x2",)),
            ("close", "b", 30, 90, ("y1",)),
            ("close", "b", 60, 120, ("y1",)),
        ],
    ),
]


def test_hopping_windows_open_update_close_and_refuse_late_items() -> None:
    o = op(HOPPING)
    run(o, HOPPING_STEPS)
    assert o.late == 1 and o.keys == {}


SLIDING = WindowSpec(length_s=60, lateness_s=0)
SLIDING_STEPS: list[Step] = [
    (("c", 0, "1"), [("open", "c", -60, 0, ("1",))]),
    (("c", 30, "2"), [("update", "c", -30, 30, ("1", "2"))]),
    # the last item 60 s behind: a quiet period as long as the window closes it
    (89, []),
    (90, [("close", "c", 0, 30, ("1", "2"))]),
    # the next item opens a new window
    (("c", 100, "3"), [("open", "c", 40, 100, ("3",))]),
    (("c", 130, "4"), [("update", "c", 70, 130, ("3", "4"))]),
    # 5 is 61 s after 3: 3 has left the window
    (("c", 161, "5"), [("update", "c", 101, 161, ("4", "5"))]),
    # an item behind event time with no lateness allowed
    (("c", 160, "6"), [("late", "c", 160, 160, ("6",))]),
    # an item of another key at 230 ends c's quiet period first
    (
        ("d", 230, "7"),
        [("close", "c", 130, 161, ("4", "5")), ("open", "d", 170, 230, ("7",))],
    ),
    ("flush", [("close", "d", 230, 230, ("7",))]),
]


def test_a_sliding_window_counts_the_last_length_and_closes_after_a_quiet_period() -> None:
    run(op(SLIDING), SLIDING_STEPS)


def test_a_sliding_window_takes_items_within_the_lateness() -> None:
    o = op(WindowSpec(length_s=60, lateness_s=30))
    run(
        o,
        [
            (("k", 100, "a"), [("open", "k", 40, 100, ("a",))]),
            # 20 s behind, within 30 s: the window ending at it holds what is before it
            (("k", 80, "b"), [("update", "k", 20, 80, ("b",))]),
            (("k", 110, "c"), [("update", "k", 50, 110, ("b", "a", "c"))]),
            # closes 60 + 30 s after the last item
            (199, []),
            (200, [("close", "k", 80, 110, ("b", "a", "c"))]),
        ],
    )


@pytest.mark.parametrize(("spec", "steps"), [(HOPPING, HOPPING_STEPS), (SLIDING, SLIDING_STEPS)])
@pytest.mark.parametrize("cut", range(1, 9))
def test_a_restored_snapshot_goes_on_as_if_never_stopped(
    spec: WindowSpec, steps: list[Step], cut: int
) -> None:
    first = op(spec)
    first.restore({})  # a host that persists: record changes from the start
    saved: dict[str, bytes] = {}
    for what, expected in steps[:cut]:
        assert step(first, what) == expected
        for name, raw in first.snapshot().items():
            if raw is None:
                saved.pop(name, None)
            else:
                saved[name] = raw
    second = op(spec)
    second.restore(saved)
    assert second.next_due() == first.next_due()
    run(second, steps[cut:])


def test_next_due_is_the_earliest_close() -> None:
    o = op(HOPPING)
    assert o.next_due() is None
    o.apply(Keyed("a", t(5), "x"))
    assert o.next_due() == t(40)  # [-30, 30) + 10 s
    o.advance(t(40))
    assert o.next_due() == t(70)
    s = op(SLIDING)
    s.apply(Keyed("c", t(30), "x"))
    assert s.next_due() == t(90)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"length_s": 0}, "length_s=0 must be above 0"),
        ({"length_s": 60, "step_s": 90}, "step_s=90 must be above 0 and at most length_s"),
        ({"length_s": 60, "lateness_s": -1}, "lateness_s=-1 must be 0 or more"),
    ],
)
def test_a_bad_shape_is_refused_with_every_problem_named(
    kwargs: dict[str, float], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        WindowSpec(**kwargs)


def test_a_long_sliding_stream_keeps_only_one_window_of_items() -> None:
    o = op(WindowSpec(length_s=60))
    for i in range(1_000):
        o.apply(Keyed("busy", t(i * 10), str(i)))
    assert len(o.values_of("busy")) <= 7  # 60 s of items every 10 s, and the newest
