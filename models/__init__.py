"""gpufrag's data types: every bus message, profile, signal and action. No I/O, no clock."""

from models.actions import Action, ActionKind, ActionMode, ActionOutcome
from models.actuation import (
    ActionRequest,
    CordonNode,
    EvictPod,
    TaintNode,
    UncordonNode,
    UntaintNode,
)
from models.base import Frozen, UtcDatetime, from_json, to_json, trusted
from models.events import (
    CLUSTER_KEY,
    SCHEMA_VERSION,
    Envelope,
    EventKind,
    GpuSampleEvent,
    NodeEvent,
    Payload,
    PayloadModel,
    PodEvent,
    QueueEvent,
    SchedulingEvent,
    key_of,
)
from models.gpu import KNOWN_GPU_MODELS, MILLI_PER_GPU, GpuModel, check_gpu_model
from models.gpu_sample import GpuSample
from models.node import Node, Taint, Toleration
from models.pod import GangRef, OwnerRef, Pod, PodPhase, QosClass, WorkloadKind
from models.profiles import GpuState, NodeProfile, TaskProfile
from models.queue import QueueObject, QueueSourceKind
from models.resources import ResourceRequest
from models.scheduler import SchedulerEvent
from models.settings import (
    ActuatorSettings,
    AnalysisSettings,
    DetectorSettings,
    GpufragSettings,
    KafkaSettings,
    KubeResource,
    KubeSettings,
    StoreSettings,
    TraceSettings,
)
from models.signals import (
    FINGERPRINT_PATTERN,
    Scope,
    Severity,
    Signal,
    SignalKind,
    fingerprint_of,
)

__all__ = [
    "CLUSTER_KEY",
    "FINGERPRINT_PATTERN",
    "KNOWN_GPU_MODELS",
    "MILLI_PER_GPU",
    "SCHEMA_VERSION",
    "Action",
    "ActionKind",
    "ActionMode",
    "ActionOutcome",
    "ActionRequest",
    "ActuatorSettings",
    "AnalysisSettings",
    "CordonNode",
    "DetectorSettings",
    "Envelope",
    "EventKind",
    "EvictPod",
    "Frozen",
    "GangRef",
    "GpuModel",
    "GpuSample",
    "GpuSampleEvent",
    "GpuState",
    "GpufragSettings",
    "KafkaSettings",
    "KubeResource",
    "KubeSettings",
    "Node",
    "NodeEvent",
    "NodeProfile",
    "OwnerRef",
    "Payload",
    "PayloadModel",
    "Pod",
    "PodEvent",
    "PodPhase",
    "QosClass",
    "QueueEvent",
    "QueueObject",
    "QueueSourceKind",
    "ResourceRequest",
    "SchedulerEvent",
    "SchedulingEvent",
    "Scope",
    "Severity",
    "Signal",
    "SignalKind",
    "StoreSettings",
    "Taint",
    "TaintNode",
    "TaskProfile",
    "Toleration",
    "TraceSettings",
    "UncordonNode",
    "UntaintNode",
    "UtcDatetime",
    "WorkloadKind",
    "check_gpu_model",
    "fingerprint_of",
    "from_json",
    "key_of",
    "to_json",
    "trusted",
]
