"""The settings groups of acting and alerting: planners, guardrails, the actuator, alert sinks.

Part of the one settings model (``models.settings.GpufragSettings``), kept in their own module
so each module stays small; every option is documented here, once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from models.http_url import HttpUrlText
from models.settings_group import Group as _Group

__all__ = [
    "ActuatorSettings",
    "AlertSettings",
    "GuardrailSettings",
    "PlannerName",
    "PlannerSettings",
]

PlannerName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]
"""A planner's registered name: an identifier, checked against the registry when the
planners are built (``models`` cannot see what a plugin registers)."""


class PlannerSettings(_Group):
    """How planners search for an action. Each search is bounded: a plan that needs more
    evictions than these is not worth the disruption, and the bound keeps a search on a
    64-pod node to a few thousand checks."""

    max_victims: Annotated[int, Field(ge=1, le=8)] = 3
    """Most pods one reclaim may evict for one pending pod (per gang member)."""
    max_moves: Annotated[int, Field(ge=1, le=8)] = 2
    """Most pods one consolidation may move to free a node: each move restarts a pod."""
    max_candidates_per_node: Annotated[int, Field(ge=1, le=64)] = 16
    """Pods of a node considered as victims or movers, lowest priority and smallest first;
    C(16, 3) = 560 subsets at most per node."""
    search_nodes: Annotated[int, Field(ge=1)] = 64
    """Nodes one search visits: those nearest to fitting the pending pod (the share of its
    request each lacks). A plan is the smallest over these; on a cluster of at most this many
    nodes, the smallest over all."""
    search_budget: Annotated[int, Field(ge=1)] = 5_000
    """Victim sets one search tries at most, over all nodes (about 25 ms); past it the
    search gives up, proposing nothing rather than a plan that may not be the smallest."""
    movable_max_gpu_milli: Annotated[int, Field(ge=1)] = 1000
    """A pod consolidation may move holds at most this much GPU (a card): moving a big job
    costs more than the one it makes room for."""
    enabled: tuple[PlannerName, ...] = (
        "consolidate",
        "reclaim",
        "quota_reclaim",
        "quarantine",
        "evict_aggressor",
    )
    """Planners that run, by their registered names (the product's five, and any a plugin
    registers, see ``plugins``); a name nothing registered stops the command with the known
    names listed. Planners that answer the same signal kind are asked in this order, the
    first plan winning: for one pending pod consolidation is tried before reclaim, since it
    moves pods instead of ending them."""


class GuardrailSettings(_Group):
    """What keeps gpufrag's actions from becoming the outage (descheduler's evictor limits)."""

    mode: Literal["off", "dry-run", "enforce"] = "dry-run"
    """The one mode of acting, for planners, gate and actuator alike. off: nothing is planned;
    dry-run: actions are proposed and recorded, none reaches the cluster (the actuator is
    built without an API client); enforce: allowed actions are carried out."""
    protected_namespaces: tuple[str, ...] = (
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "gpu-operator",
        "gpufrag",
    )
    """Namespaces whose pods are never evicted: the cluster's own, the GPU stack, gpufrag."""
    exempt_label: str = "gpufrag.io/exempt"
    """A pod with this label (any value but "false") is never evicted."""
    min_priority_gap: Annotated[int, Field(ge=0)] = 1
    """A victim's priority must be at least this much below the pod it makes room for."""
    window_s: Annotated[float, Field(gt=0)] = 600.0
    """The window the eviction limits count over."""
    max_evictions_cluster: Annotated[int, Field(ge=0)] = 10
    max_evictions_node: Annotated[int, Field(ge=0)] = 2
    """Two per node in ten minutes: a node drained faster than its pods reschedule is an
    outage of its own."""
    max_evictions_namespace: Annotated[int, Field(ge=0)] = 5
    cooldown_pod_s: Annotated[float, Field(ge=0)] = 3600.0
    """A pod acted on is left alone this long (its replacement is a new pod, its job is not)."""
    cooldown_node_s: Annotated[float, Field(ge=0)] = 900.0
    cooldown_job_s: Annotated[float, Field(ge=0)] = 1800.0
    breaker_failures: Annotated[int, Field(ge=1)] = 3
    """Failed actions within ``window_s`` that open the circuit breaker..."""
    breaker_no_improvement: Annotated[int, Field(ge=1)] = 3
    """...or actions carried out for one signal that is still open after them..."""
    breaker_settle_s: Annotated[float, Field(gt=0)] = 600.0
    """How long (event time) after an enforced plan its signal may stay open before the plan
    counts as one that did not help: an evicted pod's room is used by the next scheduling
    pass, well inside ten minutes."""
    breaker_open_s: Annotated[float, Field(gt=0)] = 1800.0
    """...which then stops enforcement for this long (proposals go on, as dry-run)."""


class ActuatorSettings(_Group):
    """The actuator: evictions, cordons and taints, one active instance through a Lease."""

    namespace: Annotated[str, Field(min_length=1)] = "gpufrag"
    """Namespace of the coordination.k8s.io Lease that elects the one active actuator."""
    lease_name: Annotated[str, Field(min_length=1)] = "gpufrag-actuator"
    identity: str | None = None
    """This actuator's name in the Lease; unset: ``<hostname>_<random>``, new per process, so
    a restarted actuator never mistakes its predecessor's Lease for its own."""
    lease_duration_s: Annotated[float, Field(ge=1)] = 15.0
    """How long others wait, from when they last saw the Lease change, before taking it over
    (whole seconds in the Lease; client-go's default)."""
    renew_deadline_s: Annotated[float, Field(gt=0)] = 10.0
    """The holder stops acting when it has not renewed for this long: shorter than
    ``lease_duration_s`` so it has stopped before anyone else may start (client-go: 10 of 15)."""
    renew_interval_s: Annotated[float, Field(gt=0)] = 5.0
    """Seconds between renewals, and between tries to acquire while another holds it; a
    failed renewal is retried after a fifth of this, so after a last success at 0 s there are
    tries at 5, 6, 7, 8 and 9 s before the 10 s deadline."""
    request_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """Limit for one API call (wall clock: it is I/O)."""
    attempts: Annotated[int, Field(ge=1, le=20)] = 4
    """Tries of one call answered 5xx, or 429 without a PodDisruptionBudget cause (API
    priority and fairness), or not answered at all; then the action is recorded as failed."""
    retry_initial_s: Annotated[float, Field(gt=0)] = 0.5
    """First wait after such a failure; doubles up to retry_max_s, with jitter: 4 tries wait
    at most 0.5 + 1 + 2 = 3.5 s, well inside the renew deadline."""
    retry_max_s: Annotated[float, Field(gt=0)] = 5.0
    conflict_attempts: Annotated[int, Field(ge=1, le=20)] = 5
    """Read-modify-write rounds of one node change (taints, cordon) that lose to another writer
    (409) before it is recorded as failed."""
    remembered_ids: Annotated[int, Field(ge=1)] = 10_000
    """Action ids whose outcome is final (executed, gone) kept in memory, so the same id is not
    carried out twice; oldest forgotten first."""

    @model_validator(mode="after")
    def _deadline_inside_duration(self) -> ActuatorSettings:
        # Two actuators acting at once is what the Lease exists to prevent: the holder must
        # give up before the others' wait runs out, and renew more than once before that.
        if not self.renew_interval_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need renew_interval_s < renew_deadline_s < lease_duration_s")
        return self


class AlertSettings(_Group):
    """Where signals go as alerts (`gpufrag alert`, `gpufrag watch --alerts`). Every sink is off
    until its settings switch it on: a built-in one by its URL, one an extension registers by
    its name in ``sinks``.

    Each URL must be http:// or https:// with a host and a port in 1..65535, checked when the
    settings load; every time is finite and capped, so no setting can hold a POST, a retry or
    a shutdown for ever (a stop waits at most 10 s for the sinks, see
    ``connectors.alerts.dispatcher.STOP_DRAIN_MAX_S``)."""

    alertmanager_url: HttpUrlText | None = None
    """Alertmanager's base URL, e.g. ``http://alertmanager:9093``; alerts are posted to its
    ``/api/v2/alerts``."""
    slack_webhook_url: HttpUrlText | None = None
    """A Slack incoming webhook (``https://hooks.slack.com/services/...``). It is a secret, so
    logs, errors and dead letters name the sink, never the URL: a sink URL is only ever shown
    as ``scheme://host:port/***``, its user, password, path and query cut out."""
    webhook_url: HttpUrlText | None = None
    """Any HTTP endpoint that takes a JSON POST of the alerts (``{"alerts": [...]}``)."""
    sinks: tuple[str, ...] = ()
    """Sinks registered by a plugin (``GPUFRAG_PLUGINS``) to switch on, by name, besides the
    built-in ones whose URL is set: ``GPUFRAG_ALERTS__SINKS='["pagerduty"]'``. A name nobody
    registered, or a built-in one named without its URL, stops the command at start with the
    known names, rather than run without the alerts it was asked for."""
    cluster: Annotated[str, Field(min_length=1)] = "default"
    """The ``cluster`` label of every alert: one Alertmanager often serves several clusters."""
    runbook_base_url: HttpUrlText | None = None
    """Each alert's ``runbook_url`` annotation is this plus ``/<signal kind>``; unset: none."""
    resend_interval_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 60.0
    """Open alerts are posted to Alertmanager again this often, with ``endsAt`` 4 intervals
    ahead (Prometheus' own rule: its default resend delay is 1 min), so an open signal never
    times out there and an Alertmanager that restarted (it keeps alerts in memory only) has
    them back within one interval. Slack and the webhook get each change once. At most 1 h."""
    timeout_s: Annotated[float, Field(gt=0, le=300, allow_inf_nan=False)] = 10.0
    """Limit for one POST; a slower answer counts as a failure and is retried. At most 5 min:
    a receiver that has not answered by then will not."""
    retry_initial_s: Annotated[float, Field(gt=0, le=300, allow_inf_nan=False)] = 1.0
    """First wait after a failed POST; doubles up to retry_max_s, with jitter."""
    retry_max_s: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 30.0
    """The longest wait between two tries (at most 10 min)."""
    give_up_after_s: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False)] = 300.0
    """An alert a sink has not accepted after this long is kept as a dead letter (with the
    last error) and the sink goes on with newer ones: 5 min outlasts an Alertmanager restart
    or a rolling update (under a minute), and bounds how long `gpufrag alert` holds its Kafka
    offsets. An open alert is still re-sent to Alertmanager once it is back. At most a day
    (`gpufrag alert` asks Kafka to wait that long, plus 2 min, before it counts it gone)."""
