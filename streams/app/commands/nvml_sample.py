"""`gpufrag nvml-sample`: read this node's GPUs through NVML and print the samples."""

from __future__ import annotations

import asyncio
import signal
import socket
from typing import Annotated

import typer

from connectors.gpu.podresources import kubelet_assignments
from connectors.gpu.sampler import NoGpu, NvmlSampler
from connectors.refusals import RefusalLog
from models import Envelope, to_json
from streams.app.lifecycle.settings_load import load_settings


def nvml_sample(
    count: Annotated[
        int, typer.Option(min=0, help="Rounds to take; 0 runs until interrupted.")
    ] = 1,
    interval_s: Annotated[float, typer.Option(min=0.01, help="Seconds between rounds.")] = 5.0,
    node: Annotated[
        str | None, typer.Option(help="Node name in the samples; default: this host's name.")
    ] = None,
    on_no_gpu: Annotated[
        str,
        typer.Option(help="Without a readable GPU: 'exit' (status 0) or 'idle' until stopped."),
    ] = "exit",
) -> None:
    """Sample every GPU of this machine (memory, utilization, ECC, XID events, processes) and
    print one JSON envelope per GPU and round: what the node sampler feeds the pipeline."""
    if on_no_gpu not in ("exit", "idle"):
        raise typer.BadParameter("must be 'exit' or 'idle'", param_hint="--on-no-gpu")
    mode: NoGpu = "exit" if on_no_gpu == "exit" else "idle"

    async def emit(env: Envelope) -> None:
        typer.echo(to_json(env).decode())

    sampler = NvmlSampler(
        node=node or socket.gethostname(),
        interval_s=interval_s,
        on_no_gpu=mode,
        emit=emit,
        refusals=RefusalLog(),  # a refused card is a warning on stderr; nothing else to keep
        pod_resources=kubelet_assignments(load_settings().nvml),
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await sampler.run(stop=stop, max_rounds=count or None)

    asyncio.run(main())  # without a GPU the sampler has said so on stderr
