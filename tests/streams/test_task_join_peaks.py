"""A memory peak reaching the pod-keyed join after later events (the Faust worker's peaks come
over Kafka, not in event-time order) is dated no earlier than what its profile already holds:
dated at the peak alone, a delta carrying a later OOM kill put the kill before it happened,
and the worker's storm opened 10 s later than the embedded runner's."""

from __future__ import annotations

from models import PodEvent, SchedulerEvent, SchedulingEvent, TaskProfile
from streams.profiles.join import PeakReport, TaskProfileUpdate
from streams.profiles.operators import TaskInput, TaskJoin
from tests.streams.oom_incident import at, pod


def oom(s: float) -> TaskInput:
    ev = SchedulerEvent(reason="OOMKilled", message="", pod_namespace="serving", pod_name="v1")
    return TaskInput("serving/v1", SchedulingEvent(event=ev), at(s), f"oom-{s}")


def test_a_late_peak_is_dated_at_the_latest_input_its_profile_holds() -> None:
    join = TaskJoin()
    join.restore({})
    join.apply(TaskInput("serving/v1", pod_event(), at(1)))
    join.apply(oom(70))
    (update,) = join.apply(
        TaskInput("serving/v1", PeakReport("serving/v1", 1_000.0, at(10)), at(10))
    )
    assert isinstance(update, TaskProfileUpdate) and update.profile is not None
    assert (update.at, update.profile.oom_count) == (at(70), 1)
    # and a restarted join dates it the same way
    again = TaskJoin()
    again.restore({k: v for k, v in join.snapshot().items() if v is not None})
    (later,) = again.apply(
        TaskInput("serving/v1", PeakReport("serving/v1", 2_000.0, at(20)), at(20))
    )
    assert isinstance(later, TaskProfileUpdate) and later.at == at(70)


def test_a_profile_saved_before_the_dates_were_kept_still_loads() -> None:
    join = TaskJoin()
    join.apply(TaskInput("serving/v1", pod_event(), at(1)))
    old = join.tasks["serving/v1"].model_dump_json().encode()
    again = TaskJoin()
    again.restore({"serving/v1": old})
    assert again.tasks["serving/v1"] == TaskProfile.model_validate_json(old)


def pod_event() -> PodEvent:
    return PodEvent(change="upsert", pod=pod("serving/v1", "ts-0"))


def test_events_about_pods_not_held_leave_nothing_behind() -> None:
    join = TaskJoin()
    for i in range(100):
        ev = SchedulerEvent(reason="Killing", message="", pod_namespace="ml", pod_name=f"gone-{i}")
        join.apply(TaskInput(f"ml/gone-{i}", SchedulingEvent(event=ev), at(i), f"k{i}"))
    assert join.tasks == {} and join.seen == {}
