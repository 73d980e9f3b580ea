"""The gate preview keeps its answers across questions and instants (an enforced replay asks 2.4
million of them about a few thousand pods), and the ledger keeps its counts between changes.
Neither may ever answer what a fresh gate would not: over random runs of admissions, instants
moving on, plans admitted as a whole (a new ledger object) and searches with the limits lifted,
every kept answer equals the one the gate's filters give on a copy asked from scratch."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from models import ActionKind, PodPhase, TaskProfile
from models.settings import GuardrailSettings
from streams.guardrails.gate import Candidate, Gate
from streams.guardrails.gate_refusals import GateRefusal
from streams.guardrails.ledger import Eviction, Ledger
from streams.planners.gate_preview import LIMIT_LIFTED, LIMITS, GatePreview, eviction_candidate
from tests.streams.profiles_helpers import task as base_task

T0 = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
NAMESPACES = ["ml", "web", "kube-system"]
KINDS = [ActionKind.RECLAIM, ActionKind.CONSOLIDATE]


def pod(n: int, *, node: int, priority: int) -> TaskProfile:
    ns = NAMESPACES[n % len(NAMESPACES)]
    t = base_task(f"{ns}/p{n}", gpus=1, milli=1000, node_name=f"n{node}", phase=PodPhase.RUNNING)
    return t.model_copy(update={"priority": priority})


def fresh_answer(
    gate: Gate, task: TaskProfile, *, at: datetime, kind: ActionKind, gets: int | None
) -> GateRefusal | None:
    """The gate's filters on a copy of its ledger, nothing kept."""
    asked = Gate(gate.settings)
    asked.ledger = copy.deepcopy(gate.ledger)
    asked.ledger.forget_before(at)
    c = eviction_candidate(
        task, action_id="fresh", kind=kind, at=at, beneficiary_priority=gets, signal=None
    )
    return asked.refusal(c)


step = st.one_of(
    st.tuples(st.just("move"), st.sampled_from([0, 0, 10, 60, 400, 1000])),
    st.tuples(st.just("admit"), st.integers(0, 5)),
    st.tuples(st.just("admit_all"), st.lists(st.integers(0, 5), min_size=1, max_size=3)),
    st.tuples(st.just("ask"), st.integers(0, 5)),
    st.tuples(st.just("ask_lifted"), st.integers(0, 5)),
    st.tuples(st.just("changed_pod"), st.integers(0, 5)),
)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(step, min_size=10, max_size=60),
    namespace_limit=st.integers(0, 3),
    node_limit=st.integers(0, 2),
    cooldown_s=st.sampled_from([0.0, 300.0]),
    kind=st.sampled_from(KINDS),
    gets=st.none() | st.integers(0, 5),
)
def test_kept_answers_equal_a_fresh_gates(
    steps: list[tuple[str, object]],
    namespace_limit: int,
    node_limit: int,
    cooldown_s: float,
    kind: ActionKind,
    gets: int | None,
) -> None:
    s = GuardrailSettings(
        mode="enforce",
        max_evictions_cluster=5,
        max_evictions_node=node_limit,
        max_evictions_namespace=namespace_limit,
        window_s=600.0,
        cooldown_pod_s=cooldown_s,
        min_priority_gap=1,
    )
    gate = Gate(s)
    preview = GatePreview(gate, at=T0)
    pods = [pod(n, node=n % 3, priority=n % 4) for n in range(6)]
    at = T0

    def evicting(n: int) -> Candidate:
        return eviction_candidate(
            pods[n], action_id=f"a{n}", kind=kind, at=at, beneficiary_priority=gets, signal=None
        )

    for what, arg in steps:
        if what == "move":
            assert isinstance(arg, int)
            at += timedelta(seconds=arg)
            preview.move_to(at)
        elif what == "admit":
            assert isinstance(arg, int)
            gate.admit(evicting(arg))
        elif what == "admit_all":
            assert isinstance(arg, list)
            cands = [evicting(n) for n in arg]
            gate.admit_all(cands)  # the plan's ledger replaces the gate's when all pass
        elif what == "changed_pod":
            assert isinstance(arg, int)
            # a new profile for the pod (moved to another node): asked about as itself
            pods[arg] = pods[arg].model_copy(update={"node": f"n{(arg + 1) % 3}"})
        elif what == "ask":
            assert isinstance(arg, int)
            got = preview.victim(pods[arg], kind=kind, beneficiary_priority=gets)
            assert got == fresh_answer(gate, pods[arg], at=at, kind=kind, gets=gets)
        else:
            assert isinstance(arg, int)
            with preview.rates_lifted():
                got = preview.victim(pods[arg], kind=kind, beneficiary_priority=gets)
                lifted = Gate(s.model_copy(update=dict.fromkeys(LIMITS, LIMIT_LIFTED)))
                lifted.ledger = gate.ledger
                want = fresh_answer(lifted, pods[arg], at=at, kind=kind, gets=gets)
            assert got == want


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.integers(0, 100),
                st.none() | st.sampled_from(["n1", "n2"]),
                st.none() | st.sampled_from(["ml", "web"]),
            ),
            st.tuples(st.just("forget"), st.integers(0, 100), st.none(), st.none()),
            st.tuples(st.just("copy"), st.integers(0, 0), st.none(), st.none()),
        ),
        max_size=40,
    )
)
def test_ledger_counts_equal_a_scan_of_its_window(
    ops: list[tuple[str, int, str | None, str | None]],
) -> None:
    led = Ledger(window_s=30.0)
    t = 0
    for what, dt, node, namespace in ops:
        if what == "add":
            t += dt
            led.add_eviction(Eviction(T0 + timedelta(seconds=t), node, namespace))
        elif what == "forget":
            led.forget_before(T0 + timedelta(seconds=t + dt))
        else:
            led = copy.deepcopy(led)
        es = list(led.evictions)
        assert led.count() == len(es)
        for n in ("n1", "n2", "n3"):
            assert led.count(node=n) == sum(e.node == n for e in es)
        for ns in ("ml", "web"):
            assert led.count(namespace=ns) == sum(e.namespace == ns for e in es)
            assert led.count(node="n1", namespace=ns) == sum(
                e.node == "n1" and e.namespace == ns for e in es
            )
