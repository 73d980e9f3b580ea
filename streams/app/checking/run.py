"""The checks the plan asks for, run at once, each cut at its own timeout."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from connectors.alerts.redact import redacted_url
from connectors.clickhouse.dsn import StoreError, default_store_dsn
from connectors.kafka.security import describe
from models import GpufragSettings, KafkaSettings, StoreSettings
from streams.app.checking.check_plan import CheckPlan, Target
from streams.app.checking.targets import (
    check_alertmanager,
    check_guardrails,
    check_kafka,
    check_kube,
    check_store,
    needed_permissions,
)

__all__ = [
    "CHECK_TIMEOUT_S",
    "Check",
    "check_timeout_s",
    "checks_for",
    "process_age_s",
    "run_checks",
]

CHECK_TIMEOUT_S = 5.0
"""Each check's bound. The checks run at once, so with every target hanging they end after
about this long; 5 s is long enough for a TLS handshake and a round of access reviews to a
remote API server, or a Kafka broker's metadata answer."""

TOTAL_BOUND_S = 15.0
"""What a deploy step running the command (an init container, a Helm hook, a CI job) is
promised: it ends within this many seconds of its start, whatever answers."""

ENDING_S = 2.0
"""Kept back from TOTAL_BOUND_S for what follows the checks: closing the clients, printing,
the interpreter's exit (1.0-1.3 s from the exit hooks to the end of the process, measured on
a 2-core machine at load 8)."""

CLIENT_MARGIN_S = 1.0
"""The clients' own timeouts are this much under the check's: a target that does not answer
is then told by the client that knows where it was (the API server's URL from the
kubeconfig, the broker), with the runner's cut as the backstop."""

MIN_TIMEOUT_S = 1.5
"""No check is given less, however slow the start: a loopback target answers in
milliseconds, so even then a working one is told from a dead one."""


def check_timeout_s(*, process_age_s: float) -> float:
    """CHECK_TIMEOUT_S, or less when the process started so slowly that the full timeout
    would end it after TOTAL_BOUND_S: its start (the imports of Kafka's, ClickHouse's and
    Kubernetes' clients) took 1.5 s on a 2-core machine and 4.5 s on the same at load 10."""
    left = TOTAL_BOUND_S - ENDING_S - process_age_s
    return max(MIN_TIMEOUT_S, min(CHECK_TIMEOUT_S, left))


def process_age_s() -> float:
    """Seconds since this process started (Linux's /proc); 0 where it cannot be read."""
    try:
        stat = Path("/proc/self/stat").read_text()
        # field 22, starttime in clock ticks after boot; fields count from 3 after "(comm)"
        started = int(stat.rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - started)


@dataclass(frozen=True, slots=True)
class Check:
    target: str
    """The word each of its lines starts with."""
    where: str
    """What it asks, for the line that says it did not answer (never a password)."""
    run: Callable[[], Awaitable[list[str]]]


async def _now(lines: list[str]) -> list[str]:
    return lines


def checks_for(
    settings: GpufragSettings,
    plan: CheckPlan,
    *,
    store: StoreSettings,
    kafka: KafkaSettings,
    timeout_s: float,
) -> list[Check]:
    """The checks of ``plan``, their clients' timeouts CLIENT_MARGIN_S under ``timeout_s``."""
    t = max(timeout_s - CLIENT_MARGIN_S, timeout_s / 2)
    checks = []
    if Target.KAFKA in plan.targets:
        where = f"{kafka.bootstrap} ({describe(kafka)})"
        checks.append(Check("kafka", where, lambda: check_kafka(kafka, timeout_s=t)))
    if Target.STORE in plan.targets:
        shown = _store_shown(store)
        checks.append(Check("store", shown, lambda: check_store(store, timeout_s=t)))
    if Target.GUARDRAILS in plan.targets:
        checks.append(Check("guardrails", "", lambda: _now(check_guardrails(settings))))
    url = settings.alerts.alertmanager_url
    if Target.ALERTMANAGER in plan.targets and url is not None:
        am = redacted_url(url)
        checks.append(Check("alertmanager", am, lambda: check_alertmanager(url, timeout_s=t)))
    needs = needed_permissions(settings, plan)
    if needs:
        where = f"the API server of {settings.kube.kubeconfig or 'the default configuration'}"
        checks.append(Check("kube", where, lambda: check_kube(settings, needs, timeout_s=t)))
    return checks


def _store_shown(store: StoreSettings) -> str:
    from connectors.clickhouse.dsn import parse_dsn

    try:
        return parse_dsn(store.dsn or default_store_dsn()).describe()
    except StoreError:
        return "the store"  # the check itself says what is wrong with the DSN


async def run_checks(checks: list[Check], *, timeout_s: float) -> list[str]:
    """Every check's problem lines, in the checks' order."""

    async def one(check: Check) -> list[str]:
        try:
            return await asyncio.wait_for(check.run(), timeout_s)
        except TimeoutError:
            return [f"{check.target}: no answer from {check.where} within {timeout_s:g} s"]
        except StoreError as exc:
            return [f"{check.target}: {exc.message}"]
        except Exception as exc:  # one check's failure must not hide the others' lines
            text = " ".join(str(exc).split())[:300]
            return [f"{check.target}: {type(exc).__name__}: {text}"]

    found = await asyncio.gather(*(one(c) for c in checks))
    return [line for lines in found for line in lines]
