"""V1Pod -> models.Pod, from kubernetes-asyncio model objects: requests as the scheduler sums
them, the GPU shape (whole, time-sliced, MIG, HAMi) and Volcano / Kueue queues and gangs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes_asyncio.client import (
    V1Affinity,
    V1Container,
    V1EnvVar,
    V1NodeAffinity,
    V1NodeSelector,
    V1NodeSelectorRequirement,
    V1NodeSelectorTerm,
    V1Toleration,
)

from connectors.kube.objects import MappingError
from connectors.kube.watch.pods import pod_from_kube
from models import GangRef, OwnerRef, PodPhase, QosClass, Toleration, WorkloadKind
from tests.kube_fake.objects import T0, container, pod

NOW = datetime(2025, 3, 2, tzinfo=UTC)


def no_gangs(namespace: str, name: str) -> int | None:
    return None


def test_whole_gpus_and_the_pod_basics() -> None:
    p = pod(
        "train-0",
        gpus=4,
        node="gpu-1",
        phase="Running",
        priority=1000,
        owner=("PyTorchJob", "bert"),
        tolerations=[V1Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")],
    )
    out = pod_from_kube(p, gangs=no_gangs, now=NOW)
    assert (out.namespace, out.name, out.node, out.phase) == (
        "ml",
        "train-0",
        "gpu-1",
        PodPhase.RUNNING,
    )
    r = out.requests
    assert (r.cpu_milli, r.memory_mib, r.gpu_count, r.gpu_milli) == (2000, 4096, 4, 1000)
    assert r.mig == {} and r.gpu_memory_mib is None and r.gpu_cores_pct is None
    assert out.priority == 1000 and out.qos is QosClass.GUARANTEED
    assert out.owner == OwnerRef(kind="PyTorchJob", name="bert")
    assert out.workload_kind is WorkloadKind.TRAINING
    assert out.tolerations == (
        Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
    )
    assert out.created_at == T0
    assert out.gang is None and out.queue is None


def test_time_sliced_replica_is_a_card_request_whose_share_the_node_decides() -> None:
    # With time-slicing the device plugin advertises replicas as nvidia.com/gpu (or, renamed,
    # nvidia.com/gpu.shared); the pod spec cannot tell a replica from a card.
    plain = pod_from_kube(pod("nb", gpus=1), gangs=no_gangs, now=NOW).requests
    shared = pod_from_kube(
        pod("nb2", containers=[container(limits={"nvidia.com/gpu.shared": "1", "cpu": "1"})]),
        gangs=no_gangs,
        now=NOW,
    ).requests
    assert (plain.gpu_count, plain.gpu_milli) == (1, 1000)
    assert (shared.gpu_count, shared.gpu_milli, shared.cpu_milli) == (1, 1000, 1000)


def test_mig_profiles_are_counted_per_profile_and_not_as_cards() -> None:
    p = pod(
        "infer",
        containers=[
            container("a", limits={"nvidia.com/mig-1g.10gb": "2", "cpu": "500m", "memory": "1Gi"}),
            container("b", limits={"nvidia.com/mig-3g.40gb": "1", "nvidia.com/mig-1g.10gb": "1"}),
        ],
    )
    r = pod_from_kube(p, gangs=no_gangs, now=NOW).requests
    assert r.mig == {"1g.10gb": 3, "3g.40gb": 1}
    assert (r.gpu_count, r.gpu_milli, r.cpu_milli, r.memory_mib) == (0, 0, 500, 1024)


def test_hami_core_share_of_one_card_is_a_shared_card() -> None:
    p = pod(
        "notebook",
        containers=[
            container(
                limits={
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpucores": "30",
                    "nvidia.com/gpumem": "10000",
                },
                requests={"cpu": "1", "memory": "2Gi"},
            )
        ],
    )
    r = pod_from_kube(p, gangs=no_gangs, now=NOW).requests
    assert (r.gpu_count, r.gpu_milli, r.gpu_cores_pct, r.gpu_memory_mib) == (1, 300, 30, 10000)
    assert r.is_shared_gpu


def test_hami_limits_on_several_cards_stay_per_card() -> None:
    p = pod(
        "multi",
        containers=[
            container(
                "a",
                limits={
                    "nvidia.com/gpu": "2",
                    "nvidia.com/gpucores": "50",
                    "nvidia.com/gpumem": "20000",
                },
            ),
            container(
                "b",
                limits={
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpucores": "60",
                    "nvidia.com/gpumem": "8000",
                },
            ),
        ],
    )
    r = pod_from_kube(p, gangs=no_gangs, now=NOW).requests
    # three cards; each limited to the largest per-card value asked for
    assert (r.gpu_count, r.gpu_milli, r.gpu_cores_pct, r.gpu_memory_mib) == (3, 1000, 60, 20000)


def test_init_containers_sidecars_and_overhead_as_the_scheduler_sums_them() -> None:
    p = pod(
        "mixed",
        containers=[
            container("app1", requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}),
            container("app2", requests={"cpu": "2", "memory": "1Gi"}),
        ],
        init_containers=[
            container(
                "sidecar", requests={"cpu": "500m", "memory": "256Mi"}, restart_policy="Always"
            ),
            container("download", requests={"cpu": "4", "memory": "512Mi"}),
            container("warmup", requests={"cpu": "1", "memory": "8Gi", "nvidia.com/gpu": "2"}),
        ],
        overhead={"cpu": "250m", "memory": "64Mi"},
    )
    r = pod_from_kube(p, gangs=no_gangs, now=NOW).requests
    # cpu: max(app 3 + sidecar 0.5, sidecar 0.5 + download 4) + 0.25 overhead
    assert r.cpu_milli == 4750
    # memory: max(2Gi + 256Mi, 256Mi + 8Gi) + 64Mi
    assert r.memory_mib == 8 * 1024 + 256 + 64
    # GPUs: an init container's two cards are needed before the app's one
    assert r.gpu_count == 2


def test_volcano_gang_and_queue_with_the_podgroup_size() -> None:
    p = pod(
        "worker-3",
        gpus=8,
        annotations={
            "scheduling.k8s.io/group-name": "llm-pretrain",
            "scheduling.volcano.sh/queue-name": "research",
        },
        labels={"volcano.sh/preemptable": "true"},
        scheduler_name="volcano",
    )
    sizes = {("ml", "llm-pretrain"): 16}
    out = pod_from_kube(p, gangs=lambda ns, n: sizes.get((ns, n)), now=NOW)
    assert out.gang == GangRef(name="llm-pretrain", min_member=16)
    assert out.queue == "research"
    assert out.preemptible
    # Before its PodGroup is known, the pod is a gang of one (Volcano's default).
    early = pod_from_kube(p, gangs=no_gangs, now=NOW)
    assert early.gang == GangRef(name="llm-pretrain", min_member=1)


def test_volcano_job_label_names_the_queue() -> None:
    p = pod("w", gpus=1, labels={"volcano.sh/queue-name": "batch"})
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).queue == "batch"


def test_kueue_queue_and_pod_group() -> None:
    p = pod(
        "gang-1",
        gpus=2,
        labels={
            "kueue.x-k8s.io/queue-name": "team-a",
            "kueue.x-k8s.io/pod-group-name": "sweep-7",
        },
        annotations={"kueue.x-k8s.io/pod-group-total-count": "4"},
    )
    out = pod_from_kube(p, gangs=no_gangs, now=NOW)
    assert out.queue == "team-a"
    assert out.gang == GangRef(name="sweep-7", min_member=4)


def test_bad_kueue_count_names_the_annotation() -> None:
    p = pod(
        "g",
        gpus=1,
        labels={"kueue.x-k8s.io/pod-group-name": "x"},
        annotations={"kueue.x-k8s.io/pod-group-total-count": "many"},
    )
    with pytest.raises(MappingError, match="pod-group-total-count"):
        pod_from_kube(p, gangs=no_gangs, now=NOW)


def test_allowed_gpu_models_from_node_selector_and_affinity() -> None:
    p = pod("sel", gpus=1, node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).gpu_models == ("A100-80GB",)
    p.spec.affinity = V1Affinity(
        node_affinity=V1NodeAffinity(
            required_during_scheduling_ignored_during_execution=V1NodeSelector(
                node_selector_terms=[
                    V1NodeSelectorTerm(
                        match_expressions=[
                            V1NodeSelectorRequirement(
                                key="nvidia.com/gpu.product",
                                operator="In",
                                values=["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"],
                            )
                        ]
                    )
                ]
            )
        )
    )
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).gpu_models == (
        "A100-80GB",
        "H100-80GB",
        "H200",
    )


def test_unreadable_quantity_is_a_mapping_error_naming_the_resource() -> None:
    p = pod("bad", containers=[container(requests={"cpu": "lots"})])
    with pytest.raises(MappingError, match="cpu"):
        pod_from_kube(p, gangs=no_gangs, now=NOW)


def test_a_hami_memory_cap_is_the_pods_gpu_memory_limit() -> None:
    p = pod(
        "lora",
        containers=[container(limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"})],
    )
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).gpu_memory_limit_mib == 8000


def mps(*values: str) -> list[V1Container]:
    out = []
    for i, value in enumerate(values):
        c = container(f"c{i}", limits={"nvidia.com/gpu": "1"})
        c.env = [V1EnvVar(name="CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", value=value)]
        out.append(c)
    return out


@pytest.mark.parametrize(
    ("values", "limit"),
    [
        (("0=8G",), 8192),
        (("0=7680M,1=16G",), 7680),  # the first device a container sees: its shared card
        (("1=2G,0=4096MB",), 4096),
        (("0=512K",), 1),  # rounded up to a whole MiB
        (("0=2G", "0=1G"), 3072),  # two containers' processes share the card together
    ],
)
def test_an_mps_pinned_memory_limit_is_read_from_the_environment(
    values: tuple[str, ...], limit: int
) -> None:
    p = pod("mps", containers=mps(*values))
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).gpu_memory_limit_mib == limit


def test_an_unreadable_mps_limit_names_the_container_and_variable() -> None:
    with pytest.raises(MappingError, match="container c0: env CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"):
        pod_from_kube(pod("mps", containers=mps("lots")), gangs=no_gangs, now=NOW)


def test_a_pod_without_an_enforced_limit_has_none() -> None:
    assert pod_from_kube(pod("plain", gpus=1), gangs=no_gangs, now=NOW).gpu_memory_limit_mib is None


def test_renamed_replicas_are_asked_for_by_their_name() -> None:
    p = pod("ts", containers=[container(limits={"nvidia.com/gpu.shared": "2"})])
    r = pod_from_kube(p, gangs=no_gangs, now=NOW).requests
    assert (r.gpu_count, r.gpu_shared_resource) == (2, True)
    assert not pod_from_kube(pod("w", gpus=1), gangs=no_gangs, now=NOW).requests.gpu_shared_resource


@pytest.mark.parametrize(
    ("annotation", "node", "indices"),
    [
        ("1,3", "gpu-1", (1, 3)),
        ("3,1", "gpu-1", (3, 1)),
        ("1,3", None, ()),  # not bound yet: devices exist only once bound
        (None, "gpu-1", ()),
    ],
)
def test_the_extenders_card_annotation_says_which_cards_a_bound_pod_holds(
    annotation: str | None, node: str | None, indices: tuple[int, ...]
) -> None:
    notes = {} if annotation is None else {"gpufrag.io/gpu-indices": annotation}
    p = pod("two", gpus=2, node=node, annotations=notes)
    assert pod_from_kube(p, gangs=no_gangs, now=NOW).gpu_indices == indices


@pytest.mark.parametrize(
    ("annotation", "words"),
    [
        ("1,x", "is not card indices"),
        ("1", "does not name 2 distinct cards"),
        ("1,1", "does not name 2 distinct cards"),
        ("-1,2", "does not name 2 distinct cards"),
    ],
)
def test_a_card_annotation_that_does_not_fit_the_request_refuses_the_pod(
    annotation: str, words: str
) -> None:
    p = pod("two", gpus=2, node="gpu-1", annotations={"gpufrag.io/gpu-indices": annotation})
    with pytest.raises(MappingError, match=r"gpufrag\.io/gpu-indices") as err:
        pod_from_kube(p, gangs=no_gangs, now=NOW)
    assert words in str(err.value)
