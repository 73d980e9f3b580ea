"""The NVML sampler's attribution of cards to pods with the kubelet's pod-resources answer
(on readings from the real H200 fixtures), and its fallback to cgroups when the kubelet fails."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from connectors.gpu.nvml import NvmlUnavailable
from connectors.gpu.podresources import (
    KubeletAssignments,
    PodResourcesClient,
    kubelet_assignments,
)
from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, process_pods
from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, GpuSample, GpuSampleEvent
from models.settings import NvmlSettings
from tests.connectors.gpu.kubelet_fake import (
    IDLE,
    MIG_A,
    MIG_B,
    MIG_CARD,
    NB_A,
    NB_B,
    SLICED,
    TRAIN,
    UNASSIGNED,
    WHOLE,
    FakeKubelet,
)
from tests.connectors.gpu.readings import h200_nvml, reading_of


class FakeNvml:
    def __init__(self, readings: list[NvmlReading]) -> None:
        self.readings = readings
        self.closed = False

    def __len__(self) -> int:
        return len(self.readings)

    def poll_xids(self) -> dict[str, int]:
        return {}

    def read(self, index: int) -> NvmlReading:
        return self.readings[index]

    def close(self) -> None:
        self.closed = True


def _cgroup(uid: str) -> PodRef:
    return PodRef(namespace="", pod=f"uid:{uid}", container=None)


CGROUPS = {430: _cgroup("u-train"), 501: _cgroup("u-nb-a"), 502: _cgroup("u-nb-b")}
CGROUPS |= {601: _cgroup("u-infer"), 700: _cgroup("u-other")}


@pytest.fixture(scope="module")
def readings() -> list[NvmlReading]:
    """Five cards built from the H200's real readings: the busy card itself, and copies that
    are time-sliced, MIG-partitioned, idle-but-assigned and outside the device plugin."""
    meta = h200_nvml()
    busy = reading_of(meta["after_100GiB"], meta)
    idle = reading_of(meta["idle"], meta)
    assert busy.uuid == WHOLE and busy.processes[0].pid == 430
    half = busy.processes[0].used_bytes
    assert half is not None
    return [
        busy,
        replace(
            busy,
            index=1,
            uuid=SLICED,
            processes=(ProcessUse(501, half // 2), ProcessUse(502, half - half // 2)),
        ),
        replace(busy, index=2, uuid=MIG_CARD, mig_enabled=True, mig_uuids=(MIG_A, MIG_B),
                processes=(ProcessUse(601, half),)),
        replace(idle, index=3, uuid=IDLE),
        replace(busy, index=4, uuid=UNASSIGNED, processes=(ProcessUse(700, half),)),
    ]  # fmt: skip


def _owners(samples: list[GpuSample]) -> list[tuple[str | None, str | None, str | None]]:
    return [(s.namespace, s.pod, s.container) for s in samples]


BY_KUBELET = [
    ("ml", "train-0", "main"),
    (None, None, None),  # two pods share the time-sliced card
    ("serving", "infer-7", "server"),
    ("batch", "reserved", "worker"),  # idle, yet held: cgroups cannot tell
    ("", "uid:u-other", None),  # not the device plugin's: cgroup fallback
]
BY_CGROUP = [
    ("", "uid:u-train", None),
    (None, None, None),
    ("", "uid:u-infer", None),
    (None, None, None),
    ("", "uid:u-other", None),
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _round(sampler: NvmlSampler) -> list[GpuSample]:
    got: list[Envelope] = []

    async def emit(env: Envelope) -> None:
        got.append(env)

    sampler.emit = emit
    await sampler.run(stop=asyncio.Event(), max_rounds=1)
    payloads = [env.payload for env in got]
    assert all(isinstance(p, GpuSampleEvent) for p in payloads)
    return [p.sample for p in payloads if isinstance(p, GpuSampleEvent)]


def _sampler(
    readings: list[NvmlReading], socket_path: str, *, clock: Clock, timeout_s: float = 5
) -> NvmlSampler:
    async def nowhere(env: Envelope) -> None:  # pragma: no cover - replaced per round
        raise AssertionError

    kubelet = KubeletAssignments(
        client=PodResourcesClient(socket_path=socket_path, timeout_s=timeout_s),
        backoff_initial_s=30,
        backoff_max_s=600,
        clock=clock,
    )
    return NvmlSampler(
        node="gpu-node-1",
        interval_s=0.01,
        on_no_gpu="exit",
        emit=nowhere,
        refusals=RefusalLog(),
        pod_of_pid=CGROUPS.get,
        pod_resources=kubelet,
        open_nvml=lambda: FakeNvml(readings),
    )


async def test_sampler_attributes_cards_by_the_kubelets_assignment(
    readings: list[NvmlReading], socket_path: str
) -> None:
    samples = await _round(_sampler(readings, socket_path, clock=Clock()))
    assert _owners(samples) == BY_KUBELET
    assert samples[0].uuid == WHOLE and samples[0].memory_used_mib == pytest.approx(
        108571525120 / 2**20
    )
    assert samples[3].memory_total_mib == 143771.0
    # processes keep their own memory; their pod is the card's assignee, else their cgroup's
    per_process = process_pods(
        readings[1], pod_of_pid=CGROUPS.get, assigned=frozenset({NB_A, NB_B})
    )
    assert [(p.pid, p.used_bytes, pod) for p, pod in per_process] == [
        (501, 107917344768 // 2, CGROUPS[501]),
        (502, 107917344768 - 107917344768 // 2, CGROUPS[502]),
    ]
    assert process_pods(readings[0], pod_of_pid=CGROUPS.get, assigned=frozenset({TRAIN})) == (
        (readings[0].processes[0], TRAIN),
    )


async def test_no_socket_falls_back_to_cgroups_logs_once_and_backs_off(
    readings: list[NvmlReading], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    sampler = _sampler(readings, str(tmp_path / "absent.sock"), clock=clock)
    kubelet = sampler.pod_resources
    assert kubelet is not None
    with caplog.at_level(logging.DEBUG, logger="connectors.gpu.podresources"):
        assert _owners(await _round(sampler)) == BY_CGROUP
        clock.now += 29  # within the backoff: not asked
        assert _owners(await _round(sampler)) == BY_CGROUP
        assert kubelet.failures == 1
        clock.now += 1
        assert _owners(await _round(sampler)) == BY_CGROUP
        assert kubelet.failures == 2  # asked again, and now waits 60 s
        clock.now += 59
        await _round(sampler)
        assert kubelet.failures == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "absent.sock" in warnings[0].getMessage() and "cgroup" in warnings[0].getMessage()
    assert kubelet.last_error is not None and "no socket" in kubelet.last_error


async def test_a_slow_kubelet_falls_back_then_recovers(
    readings: list[NvmlReading],
    socket_path: str,
    kubelet: FakeKubelet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sampler = _sampler(readings, socket_path, clock=clock, timeout_s=0.3)
    assignments = sampler.pod_resources
    assert assignments is not None
    kubelet.delay_s = 3.0
    with caplog.at_level(logging.INFO, logger="connectors.gpu.podresources"):
        assert _owners(await asyncio.wait_for(_round(sampler), 2.5)) == BY_CGROUP
        assert assignments.failures == 1
        assert assignments.last_error is not None
        assert "DEADLINE_EXCEEDED" in assignments.last_error
        kubelet.delay_s = 0.0
        assert _owners(await _round(sampler)) == BY_CGROUP  # still backing off: not asked
        assert kubelet.calls == 1
        clock.now += 30
        assert _owners(await _round(sampler)) == BY_KUBELET
    assert assignments.answers == 1 and assignments.last_error is None
    assert kubelet.calls == 2
    assert any("answers again" in r.getMessage() for r in caplog.records)


async def test_without_a_gpu_the_kubelet_is_not_asked(tmp_path: Path) -> None:
    clock = Clock()

    def no_gpu() -> FakeNvml:
        raise NvmlUnavailable("no NVIDIA GPU can be read here")

    sampler = _sampler([], str(tmp_path / "absent.sock"), clock=clock)
    sampler.open_nvml = no_gpu
    assert await _round(sampler) == []
    assert sampler.unavailable is not None
    assert sampler.pod_resources is not None and sampler.pod_resources.failures == 0


def test_settings_turn_it_on_and_off() -> None:
    on = kubelet_assignments(NvmlSettings())
    assert on is not None
    assert on.client.socket_path == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert on.client.timeout_s == 2.0
    assert kubelet_assignments(NvmlSettings(pod_resources=False)) is None
    custom = kubelet_assignments(
        NvmlSettings(pod_resources_socket="/run/k.sock", pod_resources_backoff_max_s=5)
    )
    assert custom is not None and custom.client.socket_path == "/run/k.sock"
    assert custom.backoff_max_s == 30.0  # never below the first wait
