"""`gpufrag extender`: kube-scheduler's extender, served from this process's own live view.

One process watches the cluster (the same kube watchers and profile join as `gpufrag watch`,
with no store), answers filter, prioritize, bind and preempt from memory, and binds through the
API server. kube-scheduler's configuration for it is in deploy/README.md.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from streams.app.console.errors import EXIT_USAGE, user_errors
from streams.app.console.options import (
    POLICY_NAMES,
    LogLevelOption,
    MetricsAddrOption,
    MetricsPortOption,
    UntilStoppedOption,
)
from streams.app.lifecycle.log_setup import configure_logging
from streams.app.lifecycle.session import Session

log = logging.getLogger(__name__)


def extender(
    policy: Annotated[
        str | None,
        typer.Option(
            help=f"How prioritize scores nodes: {POLICY_NAMES}; default "
            "GPUFRAG_EXTENDER__POLICY (fgd)."
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="Port of the verbs; default GPUFRAG_EXTENDER__PORT (8099)."
        ),
    ] = None,
    addr: Annotated[
        str | None, typer.Option(help="Address of the verbs; default GPUFRAG_EXTENDER__ADDR.")
    ] = None,
    metrics_port: MetricsPortOption = None,
    metrics_addr: MetricsAddrOption = "0.0.0.0",
    duration_s: UntilStoppedOption = None,
    loglevel: LogLevelOption = "warning",
) -> None:
    """Serve kube-scheduler's extender verbs (POST /filter, /prioritize, /bind, /preempt).

    Filter rejects nodes whose cards lack room in their sharing mode (shares, replicas, HAMi
    cores and memory, MIG profiles), cards out of service and other GPU models, each with
    gpufrag's reason. Prioritize scores by the placement policy (fgd: the least growth of the
    node's fragmentation). Bind picks a shared pod's card by the same score, records it in the
    pod's gpufrag.io/gpu-indices annotation and creates the Binding. Preempt drops candidate
    nodes whose victims the guardrails protect. Until the watchers have listed the cluster
    (and GPUFRAG_EXTENDER__READY_AFTER_S after), every node passes with no score: answers
    from a half-built view would mislead the scheduler.
    """
    configure_logging(loglevel)
    session = Session("extender")
    settings = session.settings
    es = settings.extender
    name = policy or es.policy
    from streams.extender.scores import make_scorer

    try:
        scorer = make_scorer(name, seed=es.seed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--policy") from None
    session.serve_probes(metrics_port, addr=metrics_addr)
    from kubernetes_asyncio.config import ConfigException

    with user_errors():
        try:
            from streams.app.extender.host import serve

            code = asyncio.run(
                serve(
                    session,
                    scorer_name=scorer.name,
                    addr=addr or es.addr,
                    port=port or es.port,
                    duration_s=duration_s,
                )
            )
        except ConfigException as exc:
            typer.echo(
                f"gpufrag: error: no Kubernetes configuration ({exc}); set "
                "GPUFRAG_KUBE__KUBECONFIG",
                err=True,
            )
            raise typer.Exit(EXIT_USAGE) from None
        except OSError as exc:
            typer.echo(f"gpufrag: error: cannot serve the extender: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
    raise typer.Exit(code)
