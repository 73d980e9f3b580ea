"""V1Node -> models.Node, from kubernetes-asyncio model objects: cards, model, memory and
time-slicing from GPU Feature Discovery labels, MIG slices and HAMi's virtual GPUs."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio.client import ApiClient, V1NodeCondition, V1Taint
from prometheus_client import CollectorRegistry

from connectors.kube.gpu.resource_names import gpu_model_of
from connectors.kube.objects import MappingError
from connectors.kube.watch.nodes import node_from_kube
from models import KubeResource, NodeEvent, Taint
from models.cards import SharingMode
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import node

NOW = datetime(2025, 3, 2, tzinfo=UTC)


def test_gpu_node_from_allocatable_and_labels() -> None:
    n = node(
        "gpu-1",
        gpus=8,
        labels={"nvidia.com/gpu.memory": "81559", "pool": "train"},
        taints=[V1Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")],
        cpu="95500m",
        memory="1000Gi",
    )
    out = node_from_kube(n, pool_label="pool", now=NOW)
    assert (out.name, out.gpu_model, out.gpu_count, out.gpu_memory_mib) == (
        "gpu-1",
        "H100-80GB",
        8,
        81559,
    )
    assert (out.cpu_milli, out.memory_mib, out.gpu_replicas) == (95500, 1000 * 1024, 1)
    assert out.taints == (Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule"),)
    assert out.pool == "train" and not out.unschedulable
    assert out.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_cordoned_cpu_node() -> None:
    out = node_from_kube(node("cpu-1", gpus=0, unschedulable=True), pool_label=None, now=NOW)
    assert (out.gpu_count, out.gpu_model, out.unschedulable, out.pool) == (0, None, True, None)


def test_time_slicing_replicas_are_not_cards() -> None:
    n = node(
        "ts-1",
        gpus=4,
        product="Tesla-T4",
        labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "4"},
        allocatable={"nvidia.com/gpu": "16"},
    )
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.gpu_model, out.gpu_count, out.gpu_replicas) == ("T4", 4, 4)
    assert out.sharing is SharingMode.TIME_SLICED


def test_a_node_without_sharing_hands_out_whole_cards() -> None:
    out = node_from_kube(node("gpu-2", gpus=8), pool_label=None, now=NOW)
    assert out.sharing is SharingMode.EXCLUSIVE


# HAMi's device plugin registers its cards like this (HAMi's protocol document); the newer
# releases write the same fields as a JSON list
HAMI_V100 = (
    "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
)
HAMI_V100_JSON = (
    '[{"id":"GPU-00552014","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":0,"health":true},'
    '{"id":"GPU-0fc3eda5","count":10,"devmem":32768,"devcore":100,'
    '"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":0,"health":true}]'
)


@pytest.mark.parametrize("register", [HAMI_V100, HAMI_V100_JSON])
def test_a_hami_node_is_split_into_vgpus_with_the_cards_memory(register: str) -> None:
    n = node(
        "hami-2",
        gpus=2,
        product="Tesla-V100-PCIE-32GB",
        allocatable={"nvidia.com/gpu": "20"},
        annotations={"hami.io/node-nvidia-register": register},
    )
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.sharing, out.gpu_count, out.gpu_replicas) == (SharingMode.HAMI, 2, 10)
    assert (out.gpu_model, out.gpu_memory_mib) == ("V100M32", 32_768)


@pytest.mark.parametrize(
    ("register", "fault"),
    [("GPU-1,ten,32768,100,x,0,true:", "split count 'ten'"), ("[{", "is not JSON")],
)
def test_an_unreadable_hami_registration_names_the_annotation(register: str, fault: str) -> None:
    n = node("hami-3", gpus=2, annotations={"hami.io/node-nvidia-register": register})
    with pytest.raises(MappingError, match=r"hami\.io/node-nvidia-register") as err:
        node_from_kube(n, pool_label=None, now=NOW)
    assert fault in str(err.value)


def test_hami_virtual_gpus_capped_by_the_card_count() -> None:
    n = node("hami-1", gpus=2, product="NVIDIA-A10", allocatable={"nvidia.com/gpu": "20"})
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.gpu_model, out.gpu_count) == ("A10", 2)


def test_unhealthy_card_leaves_allocatable_below_the_label() -> None:
    n = node("sick-1", gpus=8, allocatable={"nvidia.com/gpu": "7"})
    assert node_from_kube(n, pool_label=None, now=NOW).gpu_count == 7


def test_mig_mixed_strategy_node() -> None:
    n = node(
        "mig-1",
        gpus=0,
        labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "8"},
        allocatable={
            "nvidia.com/mig-1g.5gb": "14",
            "nvidia.com/mig-3g.20gb": "4",
            "nvidia.com/gpu": "0",
        },
    )
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.gpu_model, out.gpu_count) == ("A100-40GB", 0)
    assert out.mig_devices == {"1g.5gb": 14, "3g.20gb": 4}
    # GFD counts 8 cards and none is advertised whole: all 8 are split into instances
    assert out.mig_cards == 8


def test_a_mig_profile_larger_than_the_card_is_refused_with_the_profile_named() -> None:
    n = node(
        "mig-2",
        gpus=0,
        labels={"nvidia.com/gpu.product": "NVIDIA-A30", "nvidia.com/gpu.count": "1"},
        allocatable={"nvidia.com/mig-7g.80gb": "1"},
    )
    with pytest.raises(MappingError, match=r"7g\.80gb"):
        node_from_kube(n, pool_label=None, now=NOW)


def test_a_product_naming_no_model_is_a_mapping_error_naming_the_label() -> None:
    ws = node_from_kube(node("ws", gpus=2, product="NVIDIA-RTX-A6000"), pool_label=None, now=NOW)
    assert (ws.gpu_model, ws.gpu_count) == ("RTX-A6000", 2)  # unknown to gpufrag, still a model
    with pytest.raises(MappingError, match="names no GPU model"):
        node_from_kube(node("ws", gpus=2, product="---"), pool_label=None, now=NOW)
    with pytest.raises(MappingError, match=r"gpu\.product"):
        node_from_kube(node("nolabel", gpus=2, product=None), pool_label=None, now=NOW)


@pytest.mark.parametrize(
    ("product", "memory", "model"),
    [
        ("NVIDIA-H100-80GB-HBM3", None, "H100-80GB"),
        ("NVIDIA-H100-NVL", None, "H100"),
        ("NVIDIA-H200", None, "H200"),
        ("NVIDIA-B200", None, "B200"),
        ("NVIDIA-A100-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA-A100-PCIE-40GB", None, "A100-40GB"),
        ("NVIDIA-A100-SXM4", 81920, "A100-80GB"),
        ("NVIDIA-A100-SXM4", 40960, "A100-40GB"),
        ("NVIDIA-A10G", None, "A10G"),
        ("NVIDIA-A10", None, "A10"),
        ("NVIDIA-L40S", None, "L40S"),
        ("NVIDIA-L4", None, "L4"),
        # products gpufrag has no family for are models too, named by their label
        ("NVIDIA-L40", None, "L40"),
        ("NVIDIA-A40", None, "A40"),
        ("NVIDIA-RTX-6000-Ada-Generation", None, "RTX-6000-ADA-GENERATION"),
        ("NVIDIA-H800", None, "H800"),
        ("NVIDIA-H20", None, "H20"),
        ("NVIDIA-RTX-A6000-SHARED", None, "RTX-A6000"),  # time-sliced: GFD appends -SHARED
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", None, "A100-40GB"),  # MIG single strategy
        ("NVIDIA-GH200-480GB", None, "GH200-480GB"),
        ("NVIDIA-RTX-A6000", None, "RTX-A6000"),
        ("---", None, None),
        ("Tesla-T4", None, "T4"),
        ("Tesla-V100-SXM2-32GB", None, "V100M32"),
        ("Tesla-V100-SXM2-16GB", None, "V100M16"),
        ("NVIDIA-GeForce-RTX-3090", None, "3090"),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", None, "A100-80GB"),
    ],
)
def test_product_labels_to_models(product: str, memory: int | None, model: str | None) -> None:
    assert gpu_model_of(product, memory_mib=memory) == model


async def test_unreadable_node_is_counted_logged_once_and_the_watch_goes_on(
    cluster: FakeCluster,
    server: FakeApiServer,
    api_client: ApiClient,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.kube")
    registry = CollectorRegistry()
    cluster.apply(node("ws-1", gpus=2, product="---"))  # a label that names nothing
    cluster.apply(node("gpu-1"))
    async with running(
        api_client, kube_settings(KubeResource.NODES), collector, registry=registry
    ) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        cluster.apply(node("ws-1", gpus=2, product="---", cpu="64"))
        cluster.apply(node("gpu-2"))
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
        reflector = source.reflectors[KubeResource.NODES]
        assert len(reflector.store) == 3  # the unreadable node is held, with nothing emitted
    assert [e.key for e in collector.envelopes] == ["gpu-1", "gpu-2"]
    assert (
        registry.get_sample_value(
            "gpufrag_kube_errors_total", {"resource": "nodes", "reason": "mapping"}
        )
        == 2
    )
    warnings = [r for r in caplog.records if "names no GPU model" in r.getMessage()]
    assert len(warnings) == 1


NEWER_PRODUCTS = {
    "NVIDIA-A40": "A40",
    "NVIDIA-L40": "L40",
    "NVIDIA-RTX-6000-Ada-Generation": "RTX-6000-ADA-GENERATION",
    "NVIDIA-H800": "H800",
    "NVIDIA-H20": "H20",
    "NVIDIA-GH200-480GB": "GH200-480GB",
}


async def test_nodes_with_newer_gpus_are_mapped_and_counted(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    # a closed list of models used to refuse every one of these nodes
    for i, product in enumerate(NEWER_PRODUCTS):
        cluster.apply(node(f"n{i}", gpus=4, product=product))
    async with running(api_client, kube_settings(KubeResource.NODES), collector):
        await collector.wait_for(lambda: len(collector.envelopes) == len(NEWER_PRODUCTS))
    nodes = [e.payload.node for e in collector.envelopes if isinstance(e.payload, NodeEvent)]
    assert sorted((n.gpu_model, n.gpu_count) for n in nodes) == sorted(
        (model, 4) for model in NEWER_PRODUCTS.values()
    )
    assert sum(n.gpu_count for n in nodes) == 4 * len(NEWER_PRODUCTS)


def test_a_mig_single_strategy_node_advertises_instances_as_gpus() -> None:
    # GFD in the single strategy names the instance as the product and counts instances
    n = node(
        "mig-single",
        gpus=14,
        labels={
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
            "nvidia.com/gpu.count": "14",
            "nvidia.com/gpu.memory": "4864",
        },
    )
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.gpu_model, out.gpu_count, out.gpu_memory_mib) == ("A100-40GB", 0, None)
    assert out.mig_devices == {"1g.5gb": 14} and out.mig_device_profile == "1g.5gb"


def test_a_hami_node_without_gfd_labels_takes_its_model_from_hamis_registration() -> None:
    n = node(
        "hami-4",
        gpus=0,
        product=None,
        allocatable={"nvidia.com/gpu": "20"},
        annotations={"hami.io/node-nvidia-register": HAMI_V100},
    )
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert (out.gpu_model, out.gpu_count, out.sharing) == ("V100M32", 2, SharingMode.HAMI)


def test_node_problem_detector_conditions_that_hold_are_problems() -> None:
    """Node Problem Detector's conditions as it writes them (type, status, reason, message);
    the kubelet's own and those that do not hold are left out."""
    n = node("gpu-npd", gpus=8)
    n.status.conditions = [
        V1NodeCondition(type="Ready", status="True", reason="KubeletReady"),
        V1NodeCondition(type="MemoryPressure", status="True", reason="KubeletHasMemoryPressure"),
        V1NodeCondition(
            type="KernelDeadlock", status="False", reason="KernelHasNoDeadlock", message="ok"
        ),
        V1NodeCondition(
            type="GpuUnhealthy",
            status="True",
            reason="XidError",
            message="kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. " * 5,
        ),
        V1NodeCondition(type="ReadonlyFilesystem", status="True"),
        # the EKS node monitoring agent's: True is the healthy state
        V1NodeCondition(type="KernelReady", status="True", reason="KernelIsReady"),
        V1NodeCondition(
            type="AcceleratedHardwareReady",
            status="False",
            reason="NvidiaXID79Error",
            message="GPU has fallen off the bus",
        ),
        V1NodeCondition(type="StorageReady", status="Unknown"),
    ]
    out = node_from_kube(n, pool_label=None, now=NOW)
    assert list(out.problems) == ["AcceleratedHardwareReady", "GpuUnhealthy", "ReadonlyFilesystem"]
    assert out.problems["AcceleratedHardwareReady"] == (
        "NvidiaXID79Error: GPU has fallen off the bus"
    )
    assert out.problems["GpuUnhealthy"].startswith("XidError: kernel: NVRM: Xid")
    assert len(out.problems["GpuUnhealthy"]) == 200
    assert out.problems["ReadonlyFilesystem"] == "True"
    n.status.conditions = None
    assert node_from_kube(n, pool_label=None, now=NOW).problems == {}
