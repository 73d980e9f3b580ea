"""kube-scheduler's events read, not only stored: its FailedScheduling verdict kept in the pending
pod's profile and set beside gpufrag's explanation, and Preempted events on the victim's profile.

The messages are kube-scheduler's own shapes (FitError.Error with the preemption post-filter's
suffix; DefaultPreemption's "Preempted by pod <uid> on node <node>")."""

from __future__ import annotations

from datetime import datetime

import pytest

from connectors.clickhouse.rows import explanation_row
from models import (
    DetectorSettings,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    Signal,
    TaskProfile,
)
from models.analysis import BlockReason, Explanation
from models.scheduler import PendingVerdict
from models.settings import UnplaceablePendingSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.verdicts import check_verdict
from streams.profiles.join import Binding, NodeProfileUpdate, TaskProfileUpdate, task_step
from streams.profiles.operators import TaskJoin
from tests.streams.profiles_helpers import T0, at, node, only_detector, task

R = BlockReason
KEY = "ml/train-0"
GPU_AND_TAINT = (
    "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}. preemption: 0/6 nodes are available: 2 No preemption victims "
    "found for incoming pod, 4 Preemption is not helpful for scheduling."
)
AFFINITY = (
    "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
)
CORDONED_AND_CPU = (
    "0/2 nodes are available: 1 node(s) were unschedulable, 1 Insufficient cpu. preemption: "
    "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
PREEMPTOR_UID = "4b0a1e8c-1d2f-4a55-9c1e-2f7d9b8e6a10"


def pod(*, node_name: str | None = None, phase: PodPhase = PodPhase.PENDING) -> Pod:
    return Pod(
        namespace="ml",
        name="train-0",
        uid="u-train-0",
        phase=phase,
        node=node_name,
        requests=ResourceRequest(cpu_milli=4_000, memory_mib=8_192, gpu_count=1, gpu_milli=1000),
        created_at=T0,
    )


def said(reason: str, message: str, *, node_name: str | None = None) -> SchedulingEvent:
    return SchedulingEvent(
        event=SchedulerEvent(
            reason=reason,
            message=message,
            pod_namespace="ml",
            pod_name="train-0",
            pod_uid="u-train-0",
            node=node_name,
        )
    )


class Steps:
    """The pod half of the join, fed one input at a time as both runners feed it."""

    def __init__(self) -> None:
        self.prev: TaskProfile | None = None

    def __call__(
        self, item: PodEvent | SchedulingEvent, s: float, event_id: str | None = None
    ) -> tuple[list[TaskProfileUpdate], list[Binding]]:
        self.prev, updates, binds = task_step(KEY, self.prev, item, at(s), event_id=event_id)
        return updates, binds

    @property
    def profile(self) -> TaskProfile:
        assert self.prev is not None
        return self.prev


def test_a_pending_pod_keeps_the_schedulers_latest_verdict_in_gpufrags_words() -> None:
    step = Steps()
    step(PodEvent(change="upsert", pod=pod()), 0)
    updates, binds = step(said("FailedScheduling", GPU_AND_TAINT), 5, "e1")
    assert [u.profile for u in updates] == [step.profile] and binds == []
    kept = step.profile.scheduler
    assert kept is not None
    assert (kept.at, kept.nodes, kept.reasons) == (at(5), 6, {"taint": 4, "gpu_count": 2})
    # redelivered, or met again at a re-list: the same verdict changes nothing
    assert step(said("FailedScheduling", GPU_AND_TAINT), 5, "e1") == ([], [])
    # nor does the scheduler saying it again (its Event gains a count and a later time)
    assert step(said("FailedScheduling", GPU_AND_TAINT), 65, "e1-again") == ([], [])
    assert step.profile.scheduler == kept
    # an older verdict arriving late does not replace the newer one
    assert step(said("FailedScheduling", CORDONED_AND_CPU), 3, "e0") == ([], [])
    # a newer one does
    (update,), _ = step(said("FailedScheduling", CORDONED_AND_CPU), 9, "e2")
    assert update.profile is not None and update.profile.scheduler is not None
    assert update.profile.scheduler.reasons == {"unschedulable": 1, "cpu": 1}


def test_an_unread_verdict_is_kept_as_text_and_never_fails_the_step() -> None:
    step = Steps()
    step(PodEvent(change="upsert", pod=pod()), 0)
    text = 'running PreBind plugin "VolumeBinding": binding volumes: timed out waiting'
    step(said("FailedScheduling", text), 5)
    assert step.profile.scheduler == PendingVerdict(at=at(5), message=text)


def test_binding_drops_the_verdict_and_a_late_one_is_ignored() -> None:
    step = Steps()
    step(PodEvent(change="upsert", pod=pod()), 0)
    step(said("FailedScheduling", GPU_AND_TAINT), 5)
    _, binds = step(PodEvent(change="upsert", pod=pod(node_name="gpu-1")), 8)
    assert step.profile.scheduler is None  # bound: what kept it waiting is over
    assert [b.task for b in binds] == [step.profile]  # the node never holds a verdict
    assert step(said("FailedScheduling", GPU_AND_TAINT), 9) == ([], [])
    assert step.profile.scheduler is None


def test_a_verdict_about_a_pod_not_seen_is_dropped() -> None:
    step = Steps()
    assert step(said("FailedScheduling", GPU_AND_TAINT), 5) == ([], [])
    assert step.prev is None


def test_a_preemption_is_recorded_on_the_victim_once() -> None:
    step = Steps()
    step(PodEvent(change="upsert", pod=pod(node_name="gpu-3", phase=PodPhase.RUNNING)), 0)
    message = f"Preempted by pod {PREEMPTOR_UID} on node gpu-3"
    (update,), binds = step(said("Preempted", message, node_name="gpu-3"), 30, "p1")
    assert binds == []
    p = step.profile
    assert update.profile == p and p.preemptions == 1 and p.preempted is not None
    assert (p.preempted.at, p.preempted.by, p.preempted.node) == (
        at(30),
        f"uid:{PREEMPTOR_UID}",
        "gpu-3",
    )
    # redelivered (same id), and met again at a re-list (a new id, the event's own time)
    assert step(said("Preempted", message, node_name="gpu-3"), 30, "p1") == ([], [])
    assert step(said("Preempted", message, node_name="gpu-3"), 30, "p1-relist") == ([], [])
    assert step.profile.preemptions == 1
    # the pod's later states keep what happened to it
    step(PodEvent(change="upsert", pod=pod(node_name="gpu-3", phase=PodPhase.FAILED)), 31)
    assert step.profile.preemptions == 1 and step.profile.preempted == p.preempted


def test_a_preemption_in_other_words_is_counted_and_kept_as_text() -> None:
    step = Steps()
    step(PodEvent(change="upsert", pod=pod(node_name="gpu-3", phase=PodPhase.RUNNING)), 0)
    step(said("Preempted", "Preempted by the cluster's fair-share policy", node_name="gpu-3"), 30)
    p = step.profile
    assert p.preemptions == 1 and p.preempted is not None
    assert (p.preempted.by, p.preempted.node) == (None, "gpu-3")
    assert p.preempted.message == "Preempted by the cluster's fair-share policy"
    step(said("Preempted", "Preempted by ml/big-0 on node gpu-4"), 90)
    assert step.profile.preemptions == 2
    assert step.profile.preempted is not None and step.profile.preempted.by == "ml/big-0"


def test_a_profile_saved_before_these_fields_still_loads() -> None:
    saved = task("ml/old").model_dump(mode="json")
    for field in ("scheduler", "preemptions", "preempted"):
        saved.pop(field)
    join = TaskJoin()
    join.restore({"ml/old": TaskProfile.model_validate(saved).model_dump_json().encode()})
    old = join.tasks["ml/old"]
    assert (old.scheduler, old.preemptions, old.preempted) == (None, 0, None)


# --- the explanation beside the verdict ---------------------------------------------------------


def explanation(*reasons: tuple[BlockReason, int], fits: bool = False) -> Explanation:
    return Explanation(
        fits_cluster_total=True,
        fits_some_node=fits,
        blocking=reasons,
        near_misses=(),
        nodes_checked=6,
    )


def verdict(**reasons: int) -> PendingVerdict:
    return PendingVerdict(at=at(5), nodes=6, reasons=reasons)


AFFINITY_TEXT = "node(s) didn't match Pod's node affinity/selector"


@pytest.mark.parametrize(
    ("exp", "theirs", "agrees", "reason"),
    [
        # every reason the scheduler gives is among gpufrag's (which counts every reason a
        # node has, where the scheduler files a node under its first failing filter)
        (explanation((R.GPU_COUNT, 6), (R.TAINT, 4)), verdict(taint=4, gpu_count=2), True, R.TAINT),
        # the scheduler sees resource names only: a share split across cards is its
        # "Insufficient nvidia.com/gpu" too
        (explanation((R.GPU_SHARE, 3)), verdict(gpu_count=3), True, R.GPU_COUNT),
        (explanation((R.MIG_PROFILE, 2)), verdict(gpu_count=2), True, R.GPU_COUNT),
        # a reason gpufrag does not model neither agrees nor disagrees
        (explanation((R.GPU_COUNT, 2)), verdict(gpu_count=2, **{AFFINITY_TEXT: 4}), True, None),
        (explanation((R.GPU_COUNT, 5)), verdict(**{AFFINITY_TEXT: 5}), None, None),
        (
            explanation((R.GPU_COUNT, 5)),
            PendingVerdict(at=at(5), message="0/3 nodes are unavailable"),
            None,
            None,
        ),
        # gpufrag does not see the taint the scheduler names
        (explanation((R.GPU_COUNT, 6)), verdict(taint=4, gpu_count=2), False, R.TAINT),
        # gpufrag finds a node that fits, the scheduler none (named by its main reason; a tie
        # goes by gpufrag's order of reasons)
        (
            explanation((R.CPU, 1), fits=True),
            verdict(cpu=1, unschedulable=1),
            False,
            R.UNSCHEDULABLE,
        ),
        # ... unless the scheduler also named a reason gpufrag does not model
        (explanation((R.CPU, 1), fits=True), verdict(cpu=1, **{AFFINITY_TEXT: 1}), None, R.CPU),
    ],
)
def test_agreement(
    exp: Explanation,
    theirs: PendingVerdict,
    agrees: bool | None,
    reason: BlockReason | None,
) -> None:
    check = check_verdict(exp, theirs)
    assert check.agrees is agrees and check.verdict == theirs
    if reason is not None:
        assert check.reason is reason
    assert bool(check.disagreement) is (agrees is False)


def test_a_disagreement_says_what_differs() -> None:
    check = check_verdict(explanation((R.GPU_COUNT, 6)), verdict(taint=4, gpu_count=2))
    assert (
        check.disagreement
        == "the scheduler says taint on 4 of 6 nodes; gpufrag's reasons: gpu_count"
    )
    fits = check_verdict(explanation((R.CPU, 1), fits=True), verdict(cpu=1))
    assert fits.disagreement == (
        "gpufrag finds a node that fits; the scheduler found none (cpu on 1 of 6 nodes)"
    )


# --- the cluster operator: both in the explanation, each disagreement counted once -------------

EVERY_60_S = only_detector("unplaceable_pending", UnplaceablePendingSettings(evaluate_every_s=60))


def pending(theirs: PendingVerdict | None) -> TaskProfileUpdate:
    t = task(KEY, cpu=1_000, gpus=1, milli=1000).model_copy(update={"scheduler": theirs})
    return TaskProfileUpdate(KEY, t, theirs.at if theirs else at(0))


def analysis(settings: DetectorSettings = EVERY_60_S) -> ClusterAnalysis:
    a = ClusterAnalysis(detectors=settings)
    # two nodes with a whole card each: one cordoned, one without the CPU the pod asks
    a.apply(NodeProfileUpdate("a", node("a", gpus=(1000,), unschedulable=True), at(0)))
    a.apply(NodeProfileUpdate("b", node("b", gpus=(1000,), cpu_free=500), at(0)))
    return a


def steps(a: ClusterAnalysis, items: list[TaskProfileUpdate | datetime]) -> list[Signal]:
    out: list[Signal] = []
    for item in items:
        if isinstance(item, datetime):
            out += a.advance(item)
        else:
            out += a.apply(item)
            out += a.advance(item.at)
    return out


def test_an_agreeing_verdict_is_shown_beside_gpufrags_reasons_and_not_counted() -> None:
    a = analysis()
    theirs = PendingVerdict(at=at(1), nodes=2, reasons={"unschedulable": 1, "cpu": 1})
    steps(a, [pending(theirs)])
    exp = a.explanations[KEY]
    assert dict(exp.blocking) == {R.UNSCHEDULABLE: 1, R.CPU: 1}
    assert exp.scheduler is not None and exp.scheduler.agrees is True
    assert a.disagreements == {}
    report = a.report(at(1), explain=True)
    assert report.explanations is not None
    assert report.explanations[KEY][0].scheduler == exp.scheduler


def test_a_disagreeing_verdict_is_counted_once_and_a_new_one_again() -> None:
    a = analysis()
    theirs = PendingVerdict(at=at(1), nodes=2, reasons={"taint": 1, "cpu": 1})
    (opened,) = steps(a, [pending(theirs)])
    check = a.explanations[KEY].scheduler
    assert check is not None and check.agrees is False and check.reason is R.TAINT
    assert a.disagreements == {"taint": 1}
    # the signal's evidence carries both, so the Faust runner's output shows them too
    scheduler = opened.evidence["scheduler"]
    assert isinstance(scheduler, dict)
    assert scheduler["reasons"] == {"taint": 1, "cpu": 1} and scheduler["agrees"] is False
    # a node change makes a later evaluation: the same verdict is not counted again
    a.apply(NodeProfileUpdate("b", node("b", gpus=(1000,), cpu_free=600), at(70)))
    a.advance(at(70))
    assert a.evaluations == 2
    assert a.explanations[KEY].scheduler == check and a.disagreements == {"taint": 1}
    # a new verdict is news by itself (no other change needed) and is counted
    steps(a, [pending(theirs.model_copy(update={"at": at(200)})), at(200)])
    assert a.disagreements == {"taint": 2}


def test_a_new_verdict_alone_brings_the_next_evaluation() -> None:
    a = analysis()
    steps(a, [pending(None)])  # evaluated at 0 s, and nothing due after it
    assert a.explanations[KEY].scheduler is None and a.next_due() is None
    theirs = PendingVerdict(at=at(30), nodes=2, reasons={"unschedulable": 1, "cpu": 1})
    steps(a, [pending(theirs)])
    assert a.next_due() == at(60)  # rate-limited like any other change
    a.advance(at(60))
    assert a.evaluations == 2
    check = a.explanations[KEY].scheduler
    assert check is not None and check.agrees is True


def test_a_verdict_after_the_evaluation_completes_its_row_though_the_pod_goes_at_once() -> None:
    """The FGD protocol's case: the pod is explained when seen pending, the scheduler's verdict
    comes half a second later in the instant the pod is dropped. The verdict still reaches the
    stored explanation: the report of its instant carries that explanation, completed, on the
    evaluation's own instant (so its row replaces the one stored without the verdict)."""
    a = analysis()
    steps(a, [pending(None)])
    assert a.report(at(0)).explanations is not None  # evaluated at 0 s, stored then
    theirs = PendingVerdict(at=at(0.5), nodes=2, reasons={"taint": 1, "cpu": 1})
    a.apply(pending(theirs))
    a.apply(TaskProfileUpdate(KEY, None, at(0.5)))  # dropped in the same instant
    a.advance(at(0.5))
    assert a.evaluations == 1  # no evaluation of its own: 60 s have not passed
    report = a.report(at(0.5))
    assert report.explanations is not None and set(report.explanations) == {KEY}
    exp, t = report.explanations[KEY]
    assert exp.scheduler is not None and exp.scheduler.verdict == theirs
    assert exp.scheduler.agrees is False and exp.evaluated_at == at(0)
    assert t.key == KEY
    row = explanation_row("run", KEY, exp, t, report.at)
    assert row["ts"] == at(0) and row["scheduler_at"] == at(0.5)
    assert a.disagreements == {"taint": 1}
    # taken once: the next instant's report has nothing to add
    assert a.report(at(1)).explanations is None


def test_a_joined_verdict_is_counted_once_when_the_pod_is_evaluated_again() -> None:
    a = analysis()
    steps(a, [pending(None)])
    theirs = PendingVerdict(at=at(10), nodes=2, reasons={"taint": 1, "cpu": 1})
    steps(a, [pending(theirs)])  # joined at 10 s, counted
    assert a.disagreements == {"taint": 1} and a.evaluations == 1
    joined = a.report(at(10)).explanations
    assert joined is not None and joined[KEY][0].evaluated_at == at(0)
    a.advance(at(60))  # the evaluation the verdict made due: the same verdict, not counted
    assert a.evaluations == 2 and a.disagreements == {"taint": 1}
    check = a.explanations[KEY].scheduler
    assert check is not None and check.verdict == theirs
    assert a.explanations[KEY].evaluated_at == at(60)
