"""One card's impossible reading is refused, counted and dead-lettered; the other cards are
sampled every round and the sampler never stops for it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse
from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent
from models.refusal import Refusal
from tests.connectors.gpu.readings import h200_nvml, reading_of

ROUNDS = 3


class TwoCards:
    """Card 0 is the real H200's idle reading; card 1 whatever the test makes of it."""

    def __init__(self, second: NvmlReading, *, xids: dict[str, int] | None = None) -> None:
        meta = h200_nvml()
        self.readings = [reading_of(meta["idle"], meta), second]
        self.xids = xids or {}

    def __len__(self) -> int:
        return 2

    def poll_xids(self) -> dict[str, int]:
        return self.xids

    def read(self, index: int) -> NvmlReading:
        return self.readings[index]

    def close(self) -> None:
        pass


def second_card(**changes: object) -> NvmlReading:
    meta = h200_nvml()
    card = replace(reading_of(meta["idle"], meta), index=1, uuid="GPU-second")
    return replace(card, **changes)  # type: ignore[arg-type]


async def sample(
    nvml: TwoCards, *, pod_of_pid: object = None
) -> tuple[list[int], list[Refusal], CollectorRegistry]:
    got: list[Envelope] = []
    refused: list[Refusal] = []
    reg = CollectorRegistry()

    async def emit(env: Envelope) -> None:
        got.append(env)

    sampler = NvmlSampler(
        node="gpu-node-1",
        interval_s=0.001,
        on_no_gpu="exit",
        emit=emit,
        refusals=RefusalLog(registry=reg, sink=refused.append),
        pod_of_pid=pod_of_pid or (lambda pid: None),  # type: ignore[arg-type]
        open_nvml=lambda: nvml,
    )
    await asyncio.wait_for(sampler.run(stop=asyncio.Event(), max_rounds=ROUNDS), 30)
    gpus = [e.payload.sample.gpu_index for e in got if isinstance(e.payload, GpuSampleEvent)]
    assert sampler.samples == len(gpus)
    return gpus, refused, reg


@pytest.mark.parametrize(
    ("card", "reason", "words"),
    [
        (second_card(gpu_util_pct=250.0), "out_of_range", "utilization_pct"),
        (second_card(gpu_util_pct=float("nan")), "out_of_range", "utilization_pct"),
        (second_card(memory_total_bytes=2**64 - 1), "out_of_range", "memory_total_mib"),
        (second_card(index=2**70), "out_of_range", "gpu_index"),
        (second_card(memory_used_bytes=2**40, memory_total_bytes=2**30), "value", "exceeds"),
    ],
)
async def test_an_impossible_card_is_refused_every_round_and_the_other_sampled(
    card: NvmlReading, reason: str, words: str
) -> None:
    gpus, refused, reg = await sample(TwoCards(card))
    assert gpus == [0] * ROUNDS
    assert [r.reason for r in refused] == [reason] * ROUNDS
    assert words in refused[0].detail and refused[0].detail.startswith("gpu-node-1 GPU ")
    assert refused[0].source == "nvml" and "NvmlReading(" in refused[0].raw
    counted = reg.get_sample_value("gpufrag_refused_total", {"source": "nvml", "reason": reason})
    assert counted == ROUNDS


async def test_an_xid_past_the_catalogue_costs_only_its_card() -> None:
    gpus, refused, _ = await sample(TwoCards(second_card(), xids={"GPU-second": 2**63}))
    assert gpus == [0] * ROUNDS
    assert {r.reason for r in refused} == {"out_of_range"} and "xid" in refused[0].detail


async def test_an_unexpected_exception_while_mapping_costs_only_its_card() -> None:
    card = second_card(processes=(ProcessUse(pid=4242, used_bytes=1),))

    def pod_of_pid(pid: int) -> PodRef | None:
        if pid == 4242:
            raise RuntimeError("cgroup file vanished mid-read")
        return None

    gpus, refused, _ = await sample(TwoCards(card), pod_of_pid=pod_of_pid)
    assert gpus == [0] * ROUNDS
    assert [r.reason for r in refused] == ["unexpected"] * ROUNDS
    assert "GPU 1: RuntimeError: cgroup file vanished" in refused[0].detail
