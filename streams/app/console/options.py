"""Options shared by several commands, declared once so their help reads the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

PodsOption = Annotated[
    Path | None,
    typer.Option(
        "--pods", help="Pod list CSV (Alibaba v2023 layout); default: the bundled default list."
    ),
]
NodesOption = Annotated[
    Path | None,
    typer.Option("--nodes", help="Node list CSV; default: the bundled 1,213-node GPU list."),
]
POLICY_NAMES = "random, dot-product, gpu-clustering, gpu-packing, best-fit, fgd"
"""The placement policies' names for help texts, spelled out so that `--help` imports no
placement code (a test holds it equal to ``streams.placement.policies.POLICIES``)."""
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
BootstrapOption = Annotated[
    str | None, typer.Option(help="Kafka bootstrap servers; default GPUFRAG_KAFKA__BOOTSTRAP.")
]
PrefixOption = Annotated[
    str | None, typer.Option(help="Topic name prefix; default GPUFRAG_KAFKA__TOPIC_PREFIX.")
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        help="History store DSN: chdb:///path or http(s)://host:8123; default: "
        "GPUFRAG_STORE__DSN, else a chDB store under the user's data directory."
    ),
]
MetricsPortOption = Annotated[
    int | None,
    typer.Option(min=1, max=65535, help="Serve /metrics, /livez and /readyz on this port."),
]


def pod_key(pod: str) -> str:
    """A pod as the store keys it: ``namespace/name``, where a bare ``name`` is a trace pod's
    (``trace/name``), the pods a replay stores."""
    return pod if "/" in pod else f"trace/{pod}"


MetricsAddrOption = Annotated[str, typer.Option(help="Address the metrics server listens on.")]
UntilStoppedOption = Annotated[
    float | None,
    typer.Option(min=0.0, help="Stop after this many seconds; default: until SIGINT/SIGTERM."),
]
LogLevelOption = Annotated[str, typer.Option(help="Log level (stderr).")]
