"""Hypothesis strategies for what the pipeline makes (signals, actions, node and task
profiles), built on ``strategies``' inputs; shared by other packages' tests. Like those, each
draws only valid instances, and every strategy is built once, here, not at each draw."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import strategies as st

from models import (
    MILLI_PER_GPU,
    Action,
    ActionKind,
    ActionMode,
    ActionOutcome,
    GpuState,
    NodeProfile,
    Scope,
    Severity,
    Signal,
    SignalKind,
    TaskProfile,
    fingerprint_of,
)
from models.actions import ANSWERED_BY_THE_CLUSTER
from models.bounds import CPU_MILLI_MAX, MEMORY_MIB_MAX
from models.scheduler import (
    SCHEDULER_REASONS_MAX,
    SCHEDULER_TEXT_MAX,
    PendingVerdict,
    Preemption,
)
from tests.models.strategies import (
    st_aware_datetime,
    st_gpu_model,
    st_json_value,
    st_name,
    st_pod,
    st_taints,
)

__all__ = ["st_action", "st_node_profile", "st_signal", "st_task_profile"]

_name = st_name()
_opt_name = st.none() | _name
_gpu_model = st_gpu_model()
_opt_gpu_model = st.none() | _gpu_model
_aware_datetime = st_aware_datetime()
_uuid = st.uuids().map(str)
_cpu = st.integers(min_value=0, max_value=CPU_MILLI_MAX)
_mem = st.integers(min_value=0, max_value=MEMORY_MIB_MAX)
_taints = st_taints()
_evidence = st.dictionaries(st.text(max_size=8), st_json_value(), max_size=4)


_signal_kind = st.sampled_from(SignalKind)
_scope = st.sampled_from(Scope)
_opt_resolved_after = st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(30))
_severity = st.sampled_from(Severity)
_fingerprint_parts = st.lists(st.text(max_size=5))


@st.composite
def st_signal(draw: st.DrawFn) -> Signal:
    kind = draw(_signal_kind)
    scope = draw(_scope)
    scope_id = draw(_name)
    opened = draw(_aware_datetime)
    resolved = draw(_opt_resolved_after)
    return Signal(
        kind=kind,
        scope=scope,
        scope_id=scope_id,
        severity=draw(_severity),
        fingerprint=fingerprint_of(kind, scope, scope_id, *draw(_fingerprint_parts)),
        summary=draw(st.text(max_size=40)),
        evidence=draw(_evidence),
        opened_at=opened,
        resolved_at=None if resolved is None else opened + resolved,
        state="open" if resolved is None else "resolved",
    )


_action_mode = st.sampled_from(ActionMode)
_outcomes = {
    mode: st.sampled_from(
        [
            o
            for o in ActionOutcome
            if not (mode is ActionMode.DRY_RUN and o in ANSWERED_BY_THE_CLUSTER)
        ]
    )
    for mode in ActionMode
}
_action_kind = st.sampled_from(ActionKind)
_opt_fingerprint = st.none() | st.from_regex(r"[0-9a-f]{16}", fullmatch=True)
_reason = st.text(max_size=40)


@st.composite
def st_action(draw: st.DrawFn) -> Action:
    mode = draw(_action_mode)
    return Action(
        id=draw(_uuid),
        kind=draw(_action_kind),
        mode=mode,
        outcome=draw(_outcomes[mode]),
        target_scope=draw(_scope),
        target=draw(_name),
        signal_fingerprint=draw(_opt_fingerprint),
        reason=draw(_reason),
        evidence=draw(_evidence),
        created_at=draw(_aware_datetime),
    )


_gpu_state = st.builds(
    GpuState,
    index=st.integers(0, 15),
    milli_free=st.integers(0, MILLI_PER_GPU),
    memory_total_mib=st.none() | st.floats(0, 1e6),
    memory_used_mib=st.none() | st.floats(0, 1e6),
    healthy=st.booleans(),
    last_xid=st.none() | st.integers(0, 200),
)


_card_states = st.lists(_gpu_state, max_size=8, unique_by=lambda g: g.index)
_profile_labels = st.dictionaries(_name, _name, max_size=3)
_profile_pods = st.lists(st.tuples(_name, _name).map("/".join), unique=True, max_size=5)


@st.composite
def st_node_profile(draw: st.DrawFn) -> NodeProfile:
    gpus = draw(_card_states)
    return NodeProfile(
        name=draw(_name),
        gpu_model=draw(_gpu_model) if gpus else draw(_opt_gpu_model),
        gpus=tuple(gpus),
        cpu_milli_allocatable=draw(_cpu),
        cpu_milli_requested=draw(_cpu),
        memory_mib_allocatable=draw(_mem),
        memory_mib_requested=draw(_mem),
        labels=draw(_profile_labels),
        taints=tuple(draw(_taints)),
        pool=draw(_opt_name),
        unschedulable=draw(st.booleans()),
        pods=tuple(draw(_profile_pods)),
        updated_at=draw(_aware_datetime),
    )


_opt_bound_after = st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3))
_opt_aware_datetime = st.none() | _aware_datetime
_oom_count = st.integers(0, 100)
_preemptions = st.integers(0, 5)


@st.composite
def st_task_profile(draw: st.DrawFn) -> TaskProfile:
    pod = draw(_pod)
    bound = draw(_opt_bound_after)
    return TaskProfile.of_pod(
        pod,
        bound_at=None if bound is None else pod.created_at + bound,
        finished_at=draw(_opt_aware_datetime),
        oom_count=draw(_oom_count),
        scheduler=draw(_opt_verdict),
        preemptions=draw(_preemptions),
        preempted=draw(_opt_preemption),
    )


_scheduler_text = st.text(max_size=SCHEDULER_TEXT_MAX)


_opt_scheduler_text = st.none() | _scheduler_text
_verdict_nodes = st.integers(0, 10_000)
_verdict_reasons = st.dictionaries(
    _scheduler_text, st.integers(0, 10_000), max_size=SCHEDULER_REASONS_MAX
)


@st.composite
def st_pending_verdict(draw: st.DrawFn) -> PendingVerdict:
    """A FailedScheduling verdict as a task profile keeps it: read, or kept as text."""
    if draw(st.booleans()):
        return PendingVerdict(at=draw(_aware_datetime), message=draw(_scheduler_text))
    return PendingVerdict(
        at=draw(_aware_datetime),
        nodes=draw(_verdict_nodes),
        reasons=draw(_verdict_reasons),
    )


@st.composite
def st_preemption(draw: st.DrawFn) -> Preemption:
    return Preemption(
        at=draw(_aware_datetime),
        by=draw(_opt_scheduler_text),
        node=draw(_opt_scheduler_text),
        message=draw(_opt_scheduler_text),
    )


_pod = st_pod()
_opt_verdict = st.none() | st_pending_verdict()
_opt_preemption = st.none() | st_preemption()
