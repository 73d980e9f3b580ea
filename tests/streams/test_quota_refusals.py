"""The quota detector on ResourceQuota refusals (a controller's FailedCreate "exceeded quota"
Event on its Job or ReplicaSet: work that never became a pod), by event time: it opens
``quota_exhausted`` for the namespace naming the owner and its figures, stays open while the
owner is refused again, and resolves when the quota is raised enough, when it is deleted, or
after ``refusal_quiet_s`` without a further refusal; a restart keeps all of it."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest

from connectors.kube.watch.queue_objects import quota_from_kube
from models import Envelope, Scope, SignalKind
from streams.distributed.codec import DecodeError, decode, encode
from streams.profiles.join import QuotaRefused
from streams.profiles.operators import ProfileJoin, ordered_deltas
from tests.kube_fake.objects import T0, quota
from tests.streams.quota_scenarios import (
    Step,
    gpu_node,
    gpu_pod,
    gpu_refusal,
    queued,
    refusal_steps,
    refused,
)
from tests.streams.quota_table import Run, check

QUIET = timedelta(seconds=1200)  # QuotaSettings.refusal_quiet_s's default


def test_a_refused_job_opens_quota_exhausted_naming_the_job_and_its_figures() -> None:
    got = check(refusal_steps())
    opened = got[1][0]
    assert (opened.kind, opened.scope, opened.scope_id) == (
        SignalKind.QUOTA_EXHAUSTED,
        Scope.NAMESPACE,
        "vision",
    )
    assert opened.summary == (
        "namespace vision: ResourceQuota:vision/gpu refused Job vision/train's pod: "
        "1 nvidia.com/gpu asked, 2 of 2 used"
    )
    assert opened.evidence["owner"] == "Job vision/train"
    refusal = opened.evidence["refused"]["Job vision/train"]  # type: ignore[index]
    assert refusal["quota"] == "ResourceQuota:vision/gpu"
    assert refusal["requested"] == {"requests.nvidia.com/gpu": 1.0}
    assert refusal["used"] == {"requests.nvidia.com/gpu": 2.0}
    assert refusal["limited"] == {"requests.nvidia.com/gpu": 2.0}
    assert refusal["pod"] == "train-g5h6i"
    assert refusal["refusals"] == 2  # the Event's count


def test_it_resolves_by_event_time_once_the_refusals_stop() -> None:
    run = Run()
    run.step(T0, [gpu_node("gpu-7")])
    opened = run.step(
        T0 + timedelta(seconds=10), [refused("train", "vision", message=gpu_refusal("a"))]
    )
    assert [s.state for s in opened] == ["open"]
    # refused again 5 minutes later (client-go's recorder lets one through every 300 s)
    assert (
        run.step(
            T0 + timedelta(seconds=310), [refused("train", "vision", message=gpu_refusal("b"))]
        )
        == []
    )
    assert run.analysis.next_due() == T0 + timedelta(seconds=310) + QUIET
    # a minute short of 20 quiet minutes: still open
    assert (
        run.step(T0 + timedelta(seconds=310) + QUIET - timedelta(seconds=60), [gpu_node("gpu-8")])
        == []
    )
    done = run.step(T0 + timedelta(seconds=310) + QUIET + timedelta(seconds=1), [])
    assert [(s.state, s.scope_id) for s in done] == [("resolved", "vision")]
    assert done[0].resolved_at == T0 + timedelta(seconds=310) + QUIET  # when it fell due
    assert run.analysis.next_due() is None


def test_a_restart_keeps_the_refusal_and_its_quiet_period() -> None:
    run = Run()
    run.step(T0, [refused("train", "vision", message=gpu_refusal("a"))])
    run.restart()
    assert run.analysis.next_due() == T0 + QUIET
    assert run.step(T0 + timedelta(seconds=60), [gpu_node("gpu-1")]) == []  # not opened again
    done = run.step(T0 + QUIET, [])
    assert [s.state for s in done] == ["resolved"]


def test_usage_going_down_does_not_resolve_it_but_a_deleted_quota_does() -> None:
    hard = {"requests.nvidia.com/gpu": "2"}
    full = quota_from_kube(quota("gpu", "vision", hard=hard, used={"requests.nvidia.com/gpu": "2"}))
    freed = quota_from_kube(
        quota("gpu", "vision", hard=hard, used={"requests.nvidia.com/gpu": "1"})
    )
    assert full is not None and freed is not None
    check(
        [
            Step([gpu_node("gpu-7"), queued(full), gpu_pod("t-0", "vision", gpus=1, on="gpu-7")]),
            Step(
                [refused("train", "vision", message=gpu_refusal("t-2"))],
                opens={("quota_exhausted", "vision")},
            ),
            # a pod of the Job finished: its next pod takes the freed GPU, the last is refused
            Step([gpu_pod("t-0", "vision", gpus=1, on="gpu-7", delete=True), queued(freed)]),
            Step([queued(None, delete=freed)], resolves={("quota_exhausted", "vision")}),
        ]
    )


def test_refusals_that_name_no_gpu_open_nothing() -> None:
    cpu = (
        'Error creating: pods "web-5d8c9-x2" is forbidden: exceeded quota: compute, requested: '
        "requests.cpu=2,requests.memory=4Gi, used: requests.cpu=31,requests.memory=60Gi, "
        "limited: requests.cpu=32,requests.memory=64Gi"
    )
    run = Run()
    assert run.step(T0, [refused("web-5d8c9", "shop", message=cpu, kind="ReplicaSet")]) == []
    unread = "Error creating: pods is forbidden: exceeded quota, but in words of the future"
    assert run.step(T0 + timedelta(seconds=1), [refused("train", "shop", message=unread)]) == []
    assert run.analysis.next_due() is None


def test_an_unchanged_quota_keeps_it_open_and_one_raised_enough_resolves_it() -> None:
    def gpu_quota(hard: int) -> Envelope:
        q = quota("gpu", "vision", hard={"requests.nvidia.com/gpu": str(hard)})
        return queued(quota_from_kube(q))

    check(
        [
            Step([gpu_quota(2)]),
            Step(
                [refused("train", "vision", message=gpu_refusal("t-2", used=2, limited=2))],
                opens={("quota_exhausted", "vision")},
            ),
            Step([gpu_quota(2)]),  # unchanged
            Step([gpu_quota(3)], resolves={("quota_exhausted", "vision")}),
        ]
    )


def test_the_refusal_travels_between_the_workers_stages_as_the_embedded_join_passes_it() -> None:
    env = refused("train", "vision", message=gpu_refusal("t-2"), count=3)
    ((order, passed),) = ordered_deltas(env, ProfileJoin().apply(env))
    assert isinstance(passed, QuotaRefused) and passed.event == env.payload.event  # type: ignore[union-attr]
    message, got_order = decode(encode(passed, order=order))  # type: ignore[misc]
    assert (message, got_order) == (passed, order)
    body = orjson.loads(encode(passed, order=order))
    body["event"]["quota"]["requested"] = {"requests.nvidia.com/gpu": -1}
    with pytest.raises(DecodeError, match="requested"):
        decode(orjson.dumps(body))
