"""The NVML sampler's mapping, on readings taken from a real NVIDIA H200 (fixtures/h200)."""

from __future__ import annotations

import asyncio
import csv
import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.gpu.cgroup import pod_uid_from_cgroup
from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, to_sample
from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import (
    Envelope,
    GpuSampleEvent,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
)
from streams.profiles.join import PeakReport
from streams.profiles.operators import ProfileJoin
from tests.connectors.gpu.readings import H200_DIR, reading_of

AT = datetime(2026, 11, 29, 22, 40, tzinfo=UTC)


@pytest.fixture(scope="module")
def h200() -> Path:
    return H200_DIR


def test_h200_readings_map_to_samples_in_mib(h200: Path) -> None:
    meta = json.loads((h200 / "nvml_oom.txt").read_text())
    with (h200 / "query-gpu.csv").open() as fh:
        smi = {k.strip(): v.strip() for k, v in next(csv.DictReader(fh)).items()}
    xml = ET.parse(h200 / "nvidia-smi-q.xml").getroot().find("gpu")
    assert xml is not None
    xml_total = xml.findtext("fb_memory_usage/total")
    assert xml_total == "143771 MiB"

    idle = to_sample("gpu-node-1", reading_of(meta["idle"], meta), pod_of_pid=lambda _: None)
    # NVML's byte count and both nvidia-smi outputs agree on the card's size
    assert idle.memory_total_mib == 143771.0
    assert smi["memory.total [MiB]"] == "143771 MiB"
    assert idle.uuid == smi["uuid"] == xml.findtext("uuid")
    assert idle.model == smi["name"] == "NVIDIA H200"
    assert idle.memory_used_mib == pytest.approx(615.0625)  # v1 counts reserved memory as used
    assert idle.utilization_pct == 0.0 and idle.pod is None
    assert idle.xid_from == "events"  # an XID only when one fired since the last reading

    owner = PodRef(namespace="ml", pod="train-0", container="main")
    busy = to_sample(
        "gpu-node-1",
        reading_of(meta["after_100GiB"], meta),
        pod_of_pid=lambda pid: owner if pid == 430 else None,
    )
    assert busy.memory_used_mib == pytest.approx(108571525120 / 2**20)
    assert (busy.namespace, busy.pod, busy.container) == ("ml", "train-0", "main")
    freed = to_sample(
        "gpu-node-1", reading_of(meta["after_free"], meta), pod_of_pid=lambda pid: owner
    )
    assert freed.memory_used_mib == pytest.approx(1197342720 / 2**20)
    assert freed.utilization_pct == 4.0


def test_health_figures_map_as_the_h200_reports_them(h200: Path) -> None:
    """ECC and row remapping as NVML gives them (nvmlDeviceGetTotalEccErrors, and
    nvmlDeviceGetRemappedRows's four values), checked against nvidia-smi's own XML."""
    meta = json.loads((h200 / "nvml_oom.txt").read_text())
    xml = ET.parse(h200 / "nvidia-smi-q.xml").getroot().find("gpu")
    assert xml is not None
    rows = xml.find("remapped_rows")
    assert rows is not None
    reading = replace(
        reading_of(meta["idle"], meta),
        rows_remapped_correctable=int(rows.findtext("remapped_row_corr") or -1),
        rows_remapped_uncorrectable=int(rows.findtext("remapped_row_unc") or -1),
        row_remap_pending=rows.findtext("remapped_row_pending") == "Yes",
        row_remap_failed=rows.findtext("remapped_row_failure") == "Yes",
    )
    got = to_sample("gpu-node-1", reading, pod_of_pid=lambda _: None)
    dbe = xml.findtext("ecc_errors/volatile/dram_uncorrectable")
    assert got.ecc_uncorrected_volatile == int(dbe or -1) == 0
    assert (got.rows_remapped_correctable, got.rows_remapped_uncorrectable) == (0, 0)
    assert (got.row_remap_pending, got.row_remap_failed) == (False, False)
    bad = to_sample(
        "gpu-node-1",
        replace(reading, ecc_uncorrected_volatile=3, row_remap_pending=True),
        pod_of_pid=lambda _: None,
    )
    assert (bad.ecc_uncorrected_volatile, bad.row_remap_pending) == (3, True)


def test_a_card_shared_by_two_pods_is_not_attributed() -> None:
    r = NvmlReading(
        index=1,
        uuid="GPU-x",
        name="NVIDIA H200",
        memory_total_bytes=2**30,
        memory_used_bytes=2**29,
        processes=(ProcessUse(1, 10), ProcessUse(2, None)),
    )
    pods = {1: PodRef("a", "p1"), 2: PodRef("b", "p2")}
    assert to_sample("n", r, pod_of_pid=pods.get).pod is None


def test_attributed_samples_feed_the_task_memory_peak(h200: Path) -> None:
    meta = json.loads((h200 / "nvml_oom.txt").read_text())
    owner = PodRef(namespace="ml", pod="train-0")
    join = ProfileJoin()
    node = Node(
        name="gpu-node-1", cpu_milli=16000, memory_mib=131072, gpu_model="H200", gpu_count=1
    )
    pod = Pod(
        namespace="ml",
        name="train-0",
        uid="u1",
        phase=PodPhase.RUNNING,
        node="gpu-node-1",
        requests=ResourceRequest(cpu_milli=1000, memory_mib=1024, gpu_count=1, gpu_milli=1000),
        created_at=AT,
    )
    join.apply(Envelope.wrap(NodeEvent(change="upsert", node=node), event_time=AT, source="t"))
    join.apply(Envelope.wrap(PodEvent(change="upsert", pod=pod), event_time=AT, source="t"))
    peaks: list[float] = []
    for phase in ("idle", "after_100GiB", "after_free"):
        s = to_sample("gpu-node-1", reading_of(meta[phase], meta), pod_of_pid=lambda _: owner)
        out = join.apply(Envelope.wrap(GpuSampleEvent(sample=s), event_time=AT, source="nvml"))
        peaks += [o.used_mib for o in out if isinstance(o, PeakReport) and o.key == "ml/train-0"]
    # the pod's own peak is its process's memory (NVML's per-process figure), not the card's
    # used memory, which adds the driver's share (108,571,525,120 bytes)
    own = sum(used for _, used in meta["after_100GiB"]["procs"])
    assert peaks[-1] == pytest.approx(own / 2**20)
    assert join.node_states["gpu-node-1"].peaks["ml/train-0"] == peaks[-1]
    gpu = join.node_profiles["gpu-node-1"].gpus[0]
    assert gpu.memory_total_mib == 143771.0 and gpu.healthy
    # the last reading, after PyTorch freed its tensors: the process keeps its context
    left = sum(used for _, used in meta["after_free"]["procs"])
    assert gpu.pod_memory_mib == {"ml/train-0": pytest.approx(left / 2**20)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "0::/kubepods/burstable/pod6f1c3b2e-8a7d-4c1e-9b0a-2d3e4f5a6b7c/" + "a" * 64 + "\n",
            ("6f1c3b2e-8a7d-4c1e-9b0a-2d3e4f5a6b7c", "a" * 64),
        ),
        (
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6f1c3b2e_8a7d_"
            "4c1e_9b0a_2d3e4f5a6b7c.slice/cri-containerd-" + "b" * 64 + ".scope\n",
            ("6f1c3b2e-8a7d-4c1e-9b0a-2d3e4f5a6b7c", "b" * 64),
        ),
        ("0::/system.slice/sshd.service\n", None),
    ],
)
def test_pod_uid_from_cgroup(text: str, expected: tuple[str, str] | None) -> None:
    assert pod_uid_from_cgroup(text) == expected


async def test_no_gpu_here_exits_or_idles_with_the_reason() -> None:
    got: list[Envelope] = []

    async def emit(env: Envelope) -> None:
        got.append(env)

    exit_mode = NvmlSampler(
        node="n", interval_s=1, on_no_gpu="exit", emit=emit, refusals=RefusalLog()
    )
    await asyncio.wait_for(exit_mode.run(stop=asyncio.Event()), 10)
    assert exit_mode.unavailable is not None and "NVML" in exit_mode.unavailable
    idle = NvmlSampler(node="n", interval_s=1, on_no_gpu="idle", emit=emit, refusals=RefusalLog())
    stop = asyncio.Event()
    task = asyncio.create_task(idle.run(stop=stop))
    await asyncio.sleep(0.3)
    assert not task.done()  # idling, not exiting or spinning
    stop.set()
    await asyncio.wait_for(task, 5)
    assert got == []
