"""The one settings model: every option gpufrag has, documented once, here.

Read from the environment (``GPUFRAG_ANALYSIS__COVERAGE=0.9``) or a file; frozen so no part of
the pipeline can change what another part was told.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from models.action_settings import (
    ActuatorSettings,
    AlertSettings,
    GuardrailSettings,
    PlannerSettings,
)
from models.bounds import TIME_MAX, TIME_MIN
from models.extender_settings import ExtenderSettings
from models.kafka_settings import KafkaSettings, SaslMechanism, SecurityProtocol
from models.kube_resources import KubeResource
from models.settings_env import PREFIX, unknown_names
from models.settings_group import Group as _Group
from models.settings_group import PluginModule

__all__ = [
    "ActuatorSettings",
    "AlertSettings",
    "AnalysisSettings",
    "DcgmSettings",
    "DetectorSettings",
    "FragmentationSettings",
    "GpuHealthSettings",
    "GpufragSettings",
    "GuardrailSettings",
    "IdleGpuSettings",
    "KafkaSettings",
    "KubeResource",
    "KubeSettings",
    "NearMemoryLimitSettings",
    "NvmlSettings",
    "OomStormSettings",
    "PlannerSettings",
    "QuotaSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "SqlSettings",
    "StoreSettings",
    "StrandedGpusSettings",
    "TraceSettings",
    "UnplaceablePendingSettings",
    "WatchSettings",
]


class AnalysisSettings(_Group):
    """The cluster view every detector reads: capacity, tasks and the typical pods."""

    coverage: Annotated[float, Field(gt=0, le=1)] = 0.95
    """Share of observed pods the typical pod shapes must cover (the FGD paper uses 0.95)."""
    typical_refresh_s: Annotated[float, Field(ge=0)] = 600.0
    """Event-time seconds between rebuilds of the typical pods from the observed workload;
    each rebuild rescans every node, so it is rate-limited rather than done per pod."""


class StrandedGpusSettings(_Group):
    enabled: bool = True
    """Signal nodes whose idle GPUs no typical GPU pod can use for lack of CPU or memory."""


class FragmentationSettings(_Group):
    enabled: bool = True
    """Signal when much of the cluster's idle GPU is fragment for the typical pods."""
    ratio_open_pct: Annotated[float, Field(ge=0, le=100)] = 40.0
    """The signal opens when this % of idle GPU is fragment..."""
    ratio_resolve_pct: Annotated[float, Field(ge=0, le=100)] = 30.0
    """...and resolves below this %, so a value hovering at the threshold does not flap."""
    min_idle_gpus: Annotated[float, Field(ge=0)] = 1.0
    """No signal while fewer whole GPUs than this are idle."""


class UnplaceablePendingSettings(_Group):
    enabled: bool = True
    """Signal pending pods and gangs that fit the cluster's free total but no node."""
    evaluate_every_s: Annotated[float, Field(ge=0)] = 30.0
    """Event-time seconds between evaluations of pending pods against all nodes (each one
    checks every node, so it is rate-limited rather than done per event)."""
    near_miss_nodes: Annotated[int, Field(ge=0, le=50)] = 3
    """How many closest nodes a pending-pod explanation names."""


class NearMemoryLimitSettings(_Group):
    enabled: bool = True
    """Signal pods whose GPU memory stays close to their enforced limit (HAMi gpumem, MPS)."""
    threshold_pct: Annotated[float, Field(gt=0, le=100)] = 95.0
    """Share of the limit a pod's own GPU memory must reach..."""
    for_s: Annotated[float, Field(ge=0)] = 60.0
    """...for this many event-time seconds without dropping below it: a training step's
    brief peak is no warning, a pod parked at its limit is one allocation from an OOM."""


class OomStormSettings(_Group):
    enabled: bool = True
    """Signal bursts of OOM kills and GPU out-of-memory exits on one card, node or
    namespace (or Kueue/Volcano queue), with the victims and the suspected aggressor."""
    card_events: Annotated[int, Field(ge=1)] = 3
    """OOMs on one card within ``card_window_s`` that make a storm..."""
    card_window_s: Annotated[float, Field(gt=0)] = 60.0
    node_events: Annotated[int, Field(ge=1)] = 5
    node_window_s: Annotated[float, Field(gt=0)] = 120.0
    namespace_events: Annotated[int, Field(ge=1)] = 10
    namespace_window_s: Annotated[float, Field(gt=0)] = 300.0
    quiet_s: Annotated[float, Field(gt=0)] = 300.0
    """A storm resolves after this many event-time seconds without a new OOM in its scope."""


class GpuHealthSettings(_Group):
    enabled: bool = True
    """Signal cards taken out by a fatal XID, uncorrectable ECC errors or HBM row remapping,
    and nodes with a problem condition; the cards leave capacity either way."""
    recover_after_s: Annotated[float, Field(gt=0)] = 600.0
    """A faulted card comes back after this many event-time seconds without new evidence,
    once nothing still says it needs a reset (a pending or failed row remap, or an exporter
    that keeps reporting the XID and does not count them). Twice dcgm-exporter's default XID
    counting window (300 s), so one quiet window is not taken for a recovery."""


class IdleGpuSettings(_Group):
    enabled: bool = True
    """Signal pods holding whole cards for small work, and cards allocated and idle."""
    window_s: Annotated[float, Field(gt=0)] = 1800.0
    """Event-time seconds a card must stay below ``activity_pct`` without a gap in its
    readings: half an hour rules out a job between steps or loading its data."""
    activity_pct: Annotated[float, Field(gt=0, le=100)] = 10.0
    """Engine activity (DCGM's graphics-engine activity, else the driver's utilization) below
    which a card counts as quiet."""
    memory_pct: Annotated[float, Field(gt=0, le=100)] = 25.0
    """A whole card whose peak memory over the window stays below this share of the card is
    held by work that a replica or a MIG instance would serve."""
    idle_activity_pct: Annotated[float, Field(ge=0, le=100)] = 1.0
    """An allocated card whose peak activity stays below this is idle, whatever memory it
    holds (a notebook parked on a loaded model)."""
    sample_gap_s: Annotated[float, Field(gt=0)] = 300.0
    """Readings further apart end the quiet run (a gap is not idleness): 10 scrapes at 30 s."""


class QuotaSettings(_Group):
    enabled: bool = True
    """Signal queues that could borrow idle quota in their cohort for pending work, lenders
    whose pending work others' borrowing blocks, and namespaces whose GPU ResourceQuota is
    used up while GPU work waits or refused a controller's GPU pod; pending explanations name
    the quota that blocks a pod. Nothing happens until a quota or queue object, or a refusal,
    is seen."""
    refusal_quiet_s: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] = 1200.0
    """Event-time seconds after an owner's last FailedCreate "exceeded quota" Event after which
    its refusal is over (its pods were created, or it was deleted or scaled down). A blocked
    owner is refused again well within 20 minutes: the Job controller retries at most 60 s
    apart, the ReplicaSet controller at most 1,000 s apart (its work queue's longest backoff),
    and client-go's recorder passes one Event per object every 300 s once 25 came in a burst;
    a shorter setting reopens the signal of a still-blocked ReplicaSet."""


class DetectorSettings(_Group):
    """One group per detector (``GPUFRAG_DETECTORS__FRAGMENTATION__ENABLED=false``)."""

    stranded_gpus: StrandedGpusSettings = StrandedGpusSettings()
    fragmentation: FragmentationSettings = FragmentationSettings()
    unplaceable_pending: UnplaceablePendingSettings = UnplaceablePendingSettings()
    near_memory_limit: NearMemoryLimitSettings = NearMemoryLimitSettings()
    oom_storm: OomStormSettings = OomStormSettings()
    gpu_health: GpuHealthSettings = GpuHealthSettings()
    idle_gpu: IdleGpuSettings = IdleGpuSettings()
    quota: QuotaSettings = QuotaSettings()
    extensions: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    """Settings of detectors that plugins registered (``GPUFRAG_PLUGINS``), by detector name;
    each entry is checked by that detector's own model when the pipeline is built, and a name
    no plugin registered stops the run there:
    ``GPUFRAG_DETECTORS__EXTENSIONS='{"my_rule": {"enabled": false}}'``."""


class TraceSettings(_Group):
    start: datetime = datetime(2023, 7, 1, tzinfo=UTC)
    """Wall-clock instant that trace second 0 maps to (the trace only has relative seconds)."""
    max_file_bytes: Annotated[int, Field(ge=1, le=64 * 1024**3)] = 512 * 1024 * 1024
    """Largest trace CSV read, checked before reading: a node or pod list is held in memory
    whole and replayed row by row, so a wrong path (a disk image, /dev/zero) must stop at once.
    The shipped lists are 42-575 KB (8,152 pods, 71 bytes a row); 512 MiB is 7.6 million rows.
    At most 64 GiB."""
    max_line_bytes: Annotated[int, Field(ge=1, le=64 * 1024 * 1024)] = 64 * 1024
    """Longest line read; a longer one is refused as a row without being held in memory. The
    shipped lists' longest line is 109 bytes. At most 64 MiB: a read of this many bytes
    allocates them first, and 10^12 failed with a MemoryError."""
    max_nodes: Annotated[int, Field(ge=1)] = 10_000
    """Most nodes a node list may hold; past it the read stops with one line. The shipped
    lists hold 1,213 and 1,523; Kubernetes is tested to 5,000 nodes per cluster. The FGD
    protocol's cost grows with nodes times (padded) pods: the 1,213-node list takes about 5 s
    a seed, and 20,000 64-GPU nodes ran past 120 s before this bound."""
    max_pods: Annotated[int, Field(ge=1)] = 500_000
    """Most pods a pod list may hold (the shipped ones: 7,439-8,324)."""
    max_gpus: Annotated[int, Field(ge=1)] = 65_536
    """Most GPUs a node list may hold in all (the shipped GPU list: 6,212): ``experiment`` pads
    the workload to 1.3x this many GPUs, so it bounds the pods it places too."""

    @field_validator("start")
    @classmethod
    def _start_in_range(cls, value: datetime) -> datetime:
        # Every event time is start + a trace second: a naive or far-off start only failed
        # once the replay was running, at the first event the models refused.
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("must be timezone-aware, e.g. 2023-07-01T00:00:00Z")
        if not TIME_MIN <= value <= TIME_MAX:
            raise ValueError(f"must be within {TIME_MIN.year}-{TIME_MAX.year}")
        return value


class StoreSettings(_Group):
    dsn: str | None = None
    """Where history is kept: ``chdb:///path`` (ClickHouse's engine in-process, the default, under
    the user's data directory) or ``http(s)://user:password@host:8123/database`` for a server."""
    database: str = "gpufrag"
    """Database the tables live in (created if missing)."""
    batch_rows: Annotated[int, Field(ge=1000, le=10_000_000)] = 5000
    """Rows per insert; a table's buffer is written when it reaches this many rows... At least
    1,000, ClickHouse's own advice: an insert costs about 0.2 s on chDB whatever its size, so a
    50-row batch drained a replay's 4,096 queued events in 48 s after Ctrl-C or SIGTERM
    (1,000 rows: 5 s)."""
    flush_interval_s: Annotated[float, Field(gt=0)] = 1.0
    """...or when its oldest buffered row has waited this long (wall clock: it is I/O)."""
    max_buffered_rows: Annotated[int, Field(ge=1000, le=100_000_000)] = 200_000
    """Rows held in memory while the store is unreachable; writers wait beyond this. At least
    ``batch_rows``, so a full batch always fits and the writers, woken as soon as the buffer is
    full, always have a batch to send (below it a replay could store only a few rows a
    second and look hung)."""
    retry_initial_s: Annotated[float, Field(gt=0)] = 0.2
    """First wait after a failed insert; doubles up to retry_max_s, with jitter."""
    retry_max_s: Annotated[float, Field(gt=0)] = 10.0
    row_attempts: Annotated[int, Field(ge=1)] = 3
    """Inserts a single row may fail while the store is healthy before it is dead-lettered."""
    spool_dir: str | None = None
    """Where unwritten rows are kept across a restart; default: beside the chDB store, or the
    user's data directory for a server DSN."""
    keep_free_mib: Annotated[int, Field(ge=0, le=1_048_576)] = 64
    """Free space (MiB) the sink's inserts leave on the disk holding the store (ClickHouse's
    ``min_free_disk_bytes_to_perform_insert``). Reaching it stops the run as "disk full" while
    the run's failed mark (any ClickHouse insert reserves at least 1 MiB) and the spool still
    fit. A full disk is not retried: it does not empty by itself. 0: none, and the setting is
    not sent (for a server too old to know it)."""

    @model_validator(mode="after")
    def _a_batch_fits(self) -> StoreSettings:
        if self.max_buffered_rows < self.batch_rows:
            raise ValueError(
                f"max_buffered_rows ({self.max_buffered_rows}) must be at least batch_rows "
                f"({self.batch_rows}): a full batch must fit in the buffer; lower both together"
            )
        return self


class KubeSettings(_Group):
    kubeconfig: str | None = None
    """Kubeconfig file to use; unset: the pod's service account when running in a cluster,
    else ``$KUBECONFIG`` or ``~/.kube/config``."""
    context: str | None = None
    """Kubeconfig context; unset: the file's current context."""
    namespace: str | None = None
    """Watch namespaced resources in this namespace only; unset: all namespaces. Nodes,
    ClusterQueues and Volcano Queues are cluster-scoped and always watched cluster-wide."""
    resources: tuple[KubeResource, ...] = tuple(KubeResource)
    """Resources to watch. Kueue and Volcano ones whose CRD is not installed are skipped with
    one log line and rechecked every ``missing_recheck_s``."""
    label_selectors: dict[KubeResource, str] = Field(default_factory=dict)
    """Label selector per resource, e.g. ``{"pods": "team=ml"}``, applied by the API server."""
    field_selectors: dict[KubeResource, str] = Field(default_factory=dict)
    """Field selector per resource, e.g. ``{"pods": "spec.schedulerName=volcano"}``."""
    event_reasons: tuple[str, ...] = ("FailedScheduling", "Preempted", "Evicted", "SystemOOM")
    """Kubernetes Event reasons turned into scheduling events; other Events are ignored.
    Container OOM kills come from pod statuses (reason OOMKilled), not from Events."""
    kueue_version: str = "v1beta1"
    """API version of the kueue.x-k8s.io resources."""
    volcano_version: str = "v1beta1"
    """API version of the scheduling.volcano.sh resources."""
    pool_label: str | None = None
    """Node label whose value names the node's pool; unset: nodes have no pool."""
    page_size: Annotated[int, Field(ge=1)] = 500
    """Objects per list page, so a re-list of a large cluster is not one huge response."""
    watch_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    """Server-side watch duration before a routine re-watch; each watch asks for a random
    duration between this and twice this, so many watchers do not reconnect in lockstep."""
    request_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Limit for a list page and for connecting a watch (wall clock: it is I/O)."""
    backoff_initial_s: Annotated[float, Field(gt=0)] = 0.5
    """First wait after a failed list or watch; doubles per failure up to backoff_max_s, with
    jitter, and resets after a success."""
    backoff_max_s: Annotated[float, Field(gt=0)] = 30.0
    missing_recheck_s: Annotated[float, Field(gt=0)] = 600.0
    """How often a resource the API server does not serve (CRD not installed) is asked for
    again; rare, so a cluster without Kueue or Volcano costs one request per resource."""
    source: Annotated[str, Field(min_length=1)] = "kube"
    """The ``source`` of the envelopes the watchers emit."""
    snapshot_max_bytes: Annotated[int, Field(ge=1)] = 256 * 1024 * 1024
    """Largest ``gpufrag inspect --kube-json`` file (or stdin) read; past it the command stops
    with one line, having held at most this much. kubectl's JSON is about 4.4 KB per object
    (the test fixture), so 256 MiB is some 60,000 nodes and pods; reading one into models
    takes several times its size in memory."""


class DcgmSettings(_Group):
    endpoints: tuple[str, ...] = ()
    """dcgm-exporter pages to scrape, e.g. ``["http://10.0.3.7:9400/metrics"]``; ``gpufrag
    watch --dcgm URL`` adds to them."""
    interval_s: Annotated[float, Field(gt=0)] = 15.0
    """Seconds between scrapes of one exporter (dcgm-exporter refreshes every 30 s by default;
    scraping faster only repeats its values)."""
    timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """Limit for one scrape. A sample's event time is when its scrape started, so a scrape
    slower than ``watch.allowed_delay_s`` makes its samples late."""
    backoff_initial_s: Annotated[float, Field(gt=0)] = 1.0
    """First wait after a failed scrape; doubles per failure up to backoff_max_s, with jitter,
    and resets after a success."""
    backoff_max_s: Annotated[float, Field(gt=0)] = 60.0
    discover: bool = False
    """Also scrape the dcgm-exporter pods found through the Kubernetes API (the ``kube``
    settings' connection: kubeconfig, context, request timeout); ``gpufrag watch
    --dcgm-discover`` turns it on. Off by default: it needs the right to list pods."""
    discover_selector: Annotated[str, Field(min_length=1)] = "app=nvidia-dcgm-exporter"
    """Label selector of the exporter pods: the GPU Operator's label; the dcgm-exporter Helm
    chart's pods have ``app.kubernetes.io/name=dcgm-exporter`` instead."""
    discover_namespace: str | None = None
    """Namespace of the exporter pods (``gpu-operator`` with the operator); unset: all
    namespaces, which needs a ClusterRole to list pods, where a namespace needs only a Role."""
    discover_port: Annotated[int, Field(ge=1, le=65535)] = 9400
    """Port for exporter pods that declare no container port (one named ``metrics`` wins, else
    the first one declared)."""
    discover_interval_s: Annotated[float, Field(gt=0)] = 60.0
    """Seconds between two listings of the exporter pods; a new GPU node's exporter is scraped
    at most this long after its pod runs, and one whose pod is gone stops being scraped (its
    metric series dropped) at most this long after."""
    max_page_bytes: Annotated[int, Field(ge=1, le=1024**3)] = 4 * 1024 * 1024
    """Largest exporter page a scrape, ``gpufrag dcgm-parse`` or ``inspect --dcgm`` reads; past
    it the page is refused (reason ``too_large``) before more is read, so a URL serving a huge
    file cannot exhaust memory or hold a core. Measured on the fixture written with every
    default counter (``plain_h200.txt``): 5.3 KB of lines per GPU plus 2.7 KB of HELP/TYPE, so
    an 8-GPU node is about 45 KB and a 64-GPU one 340 KB; 4 MiB is 12 times that, or a
    federated page of some 780 GPUs. Parsing takes about 0.1 s a MiB of real lines; the worst
    page at the bound (90,000 lines of 45 bytes) about 1.5 s and 70 MB. At most 1 GiB: a read of
    this many bytes allocates them first."""
    min_timestamp: AwareDatetime = datetime(2015, 1, 1, tzinfo=UTC)
    """Exporter line timestamps before this are refused as implausible (reason
    ``implausible_time``): timestamps are milliseconds, and one sent in seconds (or 0) reads
    as January 1970. DCGM itself dates from 2015."""


class NvmlSettings(_Group):
    node: str | None = None
    """Node name in the NVML sampler's samples; unset: this host's name (in a DaemonSet, set it
    from the pod's ``spec.nodeName``, which is what the watchers call the node)."""
    interval_s: Annotated[float, Field(gt=0)] = 5.0
    """Seconds between two readings of every GPU."""
    pod_resources: bool = True
    """Ask the kubelet's pod-resources socket which pod each GPU is assigned to (names idle
    cards' pods too); where it is missing or fails, cards are attributed by their processes'
    cgroups, as without it."""
    pod_resources_socket: Annotated[str, Field(min_length=1)] = (
        "/var/lib/kubelet/pod-resources/kubelet.sock"
    )
    """The kubelet's PodResources (v1) socket; a DaemonSet mounts its directory read-only."""
    pod_resources_timeout_s: Annotated[float, Field(gt=0)] = 2.0
    """Limit for one ask; a slower kubelet is treated as absent for that round."""
    pod_resources_backoff_initial_s: Annotated[float, Field(gt=0)] = 30.0
    """Wait before asking again after a failure; doubles per failure up to
    pod_resources_backoff_max_s, and resets when the kubelet answers."""
    pod_resources_backoff_max_s: Annotated[float, Field(gt=0)] = 600.0


class WatchSettings(_Group):
    bus: Literal["kafka", "embedded"] = "kafka"
    """Where ``gpufrag watch`` sends the live events: the Kafka input topics (for workers), or
    the embedded pipeline in the same process, which stores into the history store."""
    allowed_delay_s: Annotated[float, Field(ge=0)] = 2.0
    """Wall seconds a live event is held before it is sent, so that events a source emits out
    of event-time order (object timestamps, scrape times) go out in order; each second the
    source then reports progress up to now minus this. An event whose time is already
    reported (it came later than this after its event time) is sent anyway and counted as late:
    the workers use it if they still can and dead-letter it as late otherwise."""
    progress_interval_s: Annotated[float, Field(gt=0)] = 1.0
    """Wall seconds between a live source's progress reports, sent even when it had no events,
    so a quiet source never holds the workers back."""
    max_held_events: Annotated[int, Field(ge=1, le=100_000_000)] = 100_000
    """Events one live source may have waiting (held, or not yet taken by the bus); beyond it
    the source waits, so a bus that is down does not grow memory without bound."""
    sources: tuple[str, ...] = ()
    """Live sources to run by registered name besides those ``watch``'s flags choose, e.g.
    one a plugin (``GPUFRAG_PLUGINS``) registers: ``GPUFRAG_WATCH__SOURCES='["slurm"]'``;
    ``--source NAME`` adds more. A name nobody registered stops ``watch`` at start, with the
    known names."""


class SqlSettings(_Group):
    """Limits of `gpufrag sql --query`, fixed in its session before the user's statement runs
    (with ``readonly = 1`` set last, the statement cannot change them back)."""

    max_result_rows: Annotated[int, Field(ge=1, le=10_000_000)] = 100_000
    """Rows a query may return; more is an error, not a silently cut result. 100,000 rows
    of a wide table is about what a terminal or a CSV for a spreadsheet is useful for."""
    max_execution_time_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] = 60.0
    """Seconds a query may run. A scan of a year of a 1,000-node cluster's samples takes
    seconds; a query over ``system.numbers`` would run for ever."""
    max_memory_bytes: Annotated[int, Field(ge=64 * 1024**2, le=1024**4)] = 4 * 1024**3
    """Memory one query may use in the engine (4 GiB: a sixth of a 24 GiB machine)."""


class GpufragSettings(BaseSettings):
    # hide_input_in_errors: a refused webhook URL is a secret; a validation error's text
    # (a traceback, a log) must not quote it
    model_config = SettingsConfigDict(
        env_prefix="GPUFRAG_",
        env_nested_delimiter="__",
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,
    )

    analysis: AnalysisSettings = AnalysisSettings()
    detectors: DetectorSettings = DetectorSettings()
    trace: TraceSettings = TraceSettings()
    store: StoreSettings = StoreSettings()
    sql: SqlSettings = SqlSettings()
    kafka: KafkaSettings = KafkaSettings()
    kube: KubeSettings = KubeSettings()
    dcgm: DcgmSettings = DcgmSettings()
    nvml: NvmlSettings = NvmlSettings()
    watch: WatchSettings = WatchSettings()
    guardrails: GuardrailSettings = GuardrailSettings()
    actuator: ActuatorSettings = ActuatorSettings()
    planners: PlannerSettings = PlannerSettings()
    alerts: AlertSettings = AlertSettings()
    extender: ExtenderSettings = ExtenderSettings()
    plugins: tuple[PluginModule, ...] = ()
    """Python modules imported before anything is built, each registering components
    (detectors, planners, alert sinks, live sources, outputs) with one ``register`` line:
    ``GPUFRAG_PLUGINS='["mycompany.gpufrag_rules"]'``. Every process of a distributed run needs
    the same list, or a worker and the sink disagree on what exists."""

    @model_validator(mode="wrap")
    @classmethod
    def _no_unknown_names(
        cls, data: Any, handler: ModelWrapValidatorHandler[GpufragSettings]
    ) -> GpufragSettings:
        # A misspelt variable (GPUFRAG_STORE_BATCH_ROWS) left the default in force without a
        # word; it is refused with the model's other problems, one line each at the CLI.
        unknown: list[InitErrorDetails] = [
            {"type": "extra_forbidden", "loc": (name[len(PREFIX) :].lower(),), "input": value}
            for name, value in ((n, os.environ[n]) for n in unknown_names(cls, os.environ))
        ]
        try:
            settings = handler(data)
        except ValidationError as exc:
            if not unknown:
                raise
            found = [_again(err) for err in exc.errors()]
            raise ValidationError.from_exception_data(cls.__name__, unknown + found) from None
        if unknown:
            raise ValidationError.from_exception_data(cls.__name__, unknown)
        return settings


def _again(err: ErrorDetails) -> InitErrorDetails:
    details: InitErrorDetails = {"type": err["type"], "loc": err["loc"], "input": err["input"]}
    if "ctx" in err:
        details["ctx"] = err["ctx"]
    return details
