"""The collector policy (``streams.app.lifecycle.collector``): what survived a full collection
is frozen, so the next ones walk only newer objects; and cyclic garbage among frozen objects is
still freed, by the first full collection after the frozen set has grown past ``growth`` times
what the last full walk left. Each step is an explicit ``gc.collect()``, which runs the
callbacks like a collection CPython starts itself (automatic ones are off meanwhile)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streams.app.lifecycle.collector import CollectorPolicy


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def policy() -> Iterator[CollectorPolicy]:
    assert gc.get_freeze_count() == 0, "another policy froze this process"
    p = CollectorPolicy(growth=2.0)
    p.install()
    gc.disable()  # only the test's own collections: CPython's would add walks at random
    try:
        yield p
    finally:
        gc.enable()
        p.uninstall()


def test_frozen_cyclic_garbage_is_freed_once_the_frozen_set_has_doubled(
    policy: CollectorPolicy,
) -> None:
    live = [[i] for i in range(20_000)]
    cycle = _Cycle()
    dead = weakref.ref(cycle)
    gc.collect()
    assert (policy.full_walks, policy.partial_walks) == (1, 0)
    base = policy.walked
    assert base >= 20_000 and gc.get_freeze_count() == base

    del cycle  # dies while frozen: a walk of the newer objects alone does not see it
    gc.collect()
    assert policy.partial_walks == 1 and policy.full_walks == 1
    assert dead() is not None

    more = [[i] for i in range(base + 1_000)]  # frozen by the next walk: past twice the base
    gc.collect()
    assert policy.partial_walks == 2 and gc.get_freeze_count() > 2 * base
    gc.collect()  # this one walks everything, and frees the cycle
    assert policy.full_walks == 2
    assert dead() is None
    assert len(live) + len(more) > 0


def test_a_state_that_keeps_its_size_is_never_walked_whole_again(
    policy: CollectorPolicy,
) -> None:
    state = {i: [i] for i in range(20_000)}
    gc.collect()
    for step in range(5):  # each entry replaced: freed by reference counting as it goes
        for i in range(20_000):
            state[i] = [i, step]
        gc.collect()
    assert policy.full_walks == 1 and policy.partial_walks == 5


def test_uninstalled_it_freezes_nothing_and_gives_every_object_back() -> None:
    p = CollectorPolicy()
    p.install()
    gc.collect()
    assert gc.get_freeze_count() > 0
    p.uninstall()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gc.get_freeze_count() == 0


def test_growth_must_be_above_one() -> None:
    with pytest.raises(ValueError, match="above 1"):
        CollectorPolicy(growth=1.0)
