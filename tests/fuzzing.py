"""The one hypothesis profile every fuzz test uses: a fixed seed, so CI is reproducible, and at
least 2,000 examples per edge. ``GPUFRAG_FUZZ_EXAMPLES=50000`` runs them longer, and
``GPUFRAG_FUZZ_SEED`` tries another seed (a failure prints the example to keep as a test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, seed, settings

__all__ = ["FUZZ_EXAMPLES", "fuzz", "json_leaves"]

FUZZ_EXAMPLES = max(2000, int(os.environ.get("GPUFRAG_FUZZ_EXAMPLES", "2000")))
_SEED = int(os.environ.get("GPUFRAG_FUZZ_SEED", "20261201"))

_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # a busy 2-core CI machine, not a speed test
    database=None,  # the seed alone decides what runs, not examples saved by earlier runs
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)


def fuzz(test):  # type: ignore[no-untyped-def]
    """Decorate a ``@given`` test: fixed seed, FUZZ_EXAMPLES examples."""
    return seed(_SEED)(_SETTINGS(test))


def json_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON value (dict keys, list indexes), parents before children: the
    places a fuzz test may put a hostile value."""
    if path:
        yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from json_leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from json_leaves(v, (*path, i))
