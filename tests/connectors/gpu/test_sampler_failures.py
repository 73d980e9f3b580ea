"""NVML going wrong mid-stream: one card or the XID poll failing must not stop the sampler."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest

from connectors.gpu.reading import NvmlReading
from connectors.gpu.sampler import NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent
from tests.connectors.gpu.readings import h200_nvml, reading_of


class FlakyNvml:
    """Two cards; card 1 fails in the rounds listed, the XID poll in others."""

    def __init__(self, readings: list[NvmlReading], *, card_down: set[int], xid_down: set[int]):
        self.readings = readings
        self.card_down = card_down
        self.xid_down = xid_down
        self.round = -1

    def __len__(self) -> int:
        return len(self.readings)

    def poll_xids(self) -> dict[str, int]:
        self.round += 1
        if self.round in self.xid_down:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return {}

    def read(self, index: int) -> NvmlReading:
        if index == 1 and self.round in self.card_down:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return self.readings[index]

    def close(self) -> None:
        pass


async def test_a_lost_card_is_skipped_logged_once_and_picked_up_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    meta = h200_nvml()
    card = reading_of(meta["idle"], meta)
    nvml = FlakyNvml([card, replace(card, index=1, uuid="GPU-second")], card_down={1, 2},
                     xid_down={3})  # fmt: skip
    got: list[Envelope] = []

    async def emit(env: Envelope) -> None:
        got.append(env)

    sampler = NvmlSampler(
        node="gpu-node-1",
        interval_s=0.001,
        on_no_gpu="exit",
        emit=emit,
        refusals=RefusalLog(),
        pod_of_pid=lambda pid: None,
        open_nvml=lambda: nvml,
    )
    with caplog.at_level(logging.INFO, logger="connectors.gpu.sampler"):
        await sampler.run(stop=asyncio.Event(), max_rounds=5)
    per_round = [2, 1, 1, 2, 2]  # card 1 lost in rounds 1 and 2; the XID poll in round 3
    assert len(got) == sum(per_round)
    indices = [e.payload.sample.gpu_index for e in got if isinstance(e.payload, GpuSampleEvent)]
    assert indices == [0, 1, 0, 0, 0, 1, 0, 1]
    assert sampler.read_errors == 3
    lost = [r for r in caplog.records if "could not read gpu 1" in r.getMessage()]
    back = [r for r in caplog.records if "reads gpu 1" in r.getMessage()]
    assert len(lost) == 1 and len(back) == 1
