"""The acting step in the Faust worker: the same audit records, ids and evidence included,
as the embedded runner's for the same events, on the actions topic."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from models import Action, Envelope, GpufragSettings, Node, NodeEvent, from_json
from streams.distributed import topics
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner, Emission, Failure
from tests.distributed.runner_signals import through_worker
from tests.streams.planner_scenarios import CPU, MEM, T0, PodSpec, pod_event

pytestmark = pytest.mark.kafka


def events() -> list[Envelope]:
    """Two nodes with half-used cards, a two-GPU job that fits neither, and a tick later."""
    out = [
        Envelope.wrap(
            NodeEvent(
                change="upsert",
                node=Node(name=n, cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=2),
            ),
            event_time=T0,
            source="test",
        )
        for n in ("a", "b")
    ]
    pods = [
        PodSpec(name="s1", gpu_milli=500, priority=0, node="a", cards=(1,)),
        PodSpec(name="s2", gpu_milli=500, priority=50, node="b", cards=(0,)),
        PodSpec(name="s3", gpu_milli=500, priority=50, node="b", cards=(1,)),
        PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=10),
        PodSpec(name="tick", gpu_milli=0, gpu_count=0, namespace="tick", node="a"),
    ]
    for n, spec in enumerate(pods):
        at = T0 + timedelta(seconds=n + 1 if spec.name != "tick" else 120)
        out.append(pod_event(spec, at))
    return out


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
