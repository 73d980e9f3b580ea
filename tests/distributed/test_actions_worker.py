"""The acting step in the Faust worker: the same audit records, ids and evidence included,
as the embedded runner's for the same events, on the actions topic."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from models import Action, GpufragSettings, from_json
from streams.distributed import topics
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner, Emission, Failure
from tests.distributed.consolidation_scenario import events
from tests.distributed.runner_signals import through_worker

pytestmark = pytest.mark.kafka


class _Actions:
    def __init__(self) -> None:
        self.got: list[Action] = []

    async def emit(self, item: Emission) -> None:
        self.got += list(item.actions())

    async def dead_letter(self, failure: Failure) -> None:
        raise AssertionError(failure.reason)


def _key(a: Action) -> tuple[object, ...]:
    return (
        a.id,
        a.kind.value,
        a.mode.value,
        a.outcome.value,
        a.target,
        orjson.dumps(a.evidence, option=orjson.OPT_SORT_KEYS),
    )


def test_the_worker_records_the_embedded_runners_actions(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    out = _Actions()
    runner = EmbeddedRunner(
        source=iter(envs), output=out, pipeline=define_pipeline(GpufragSettings()).build()
    )
    asyncio.run(runner.run())
    ours = {_key(a) for a in out.got}
    assert [(k[1], k[3], k[4]) for k in ours] == [("consolidate", "proposed", "ml/s1")]

    raw, log = through_worker(
        kafka_bootstrap,
        topic_prefix,
        envs,
        topic=topics.ACTIONS.full_name(topic_prefix),
        done=lambda got: len(got) >= len(ours),
        work=tmp_path,
    )
    theirs = {_key(from_json(Action, r)) for r in raw}
    assert theirs == ours, log
