"""One check per target: each asks what it points at and returns its problems, one line each
(an empty list when it is fine). Each is cut at its timeout by the runner (``run.py``), so none
waits on its own for long: the clients' own timeouts are set to the same bound."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import collect_hosts, create_conn
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from connectors.alerts.redact import redact, redacted_url
from connectors.clickhouse.dsn import check_store_dir, default_store_dsn, parse_dsn
from connectors.clickhouse.store import ping_server
from connectors.kafka.security import KafkaSecurityError, client_kwargs
from connectors.kube.access import (
    Permission,
    actuator_permissions,
    discovery_permissions,
    lacking,
    watcher_permissions,
)
from models import GpufragSettings, KafkaSettings, StoreSettings
from streams.app.checking.check_plan import CheckPlan, Component, Target

__all__ = [
    "check_alertmanager",
    "check_guardrails",
    "check_kafka",
    "check_kube",
    "check_store",
    "needed_permissions",
]

T = TypeVar("T")


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread. asyncio.to_thread's pool is joined when the process
    exits, so a blocking call left hanging at its timeout (a server that never answers) would
    hold the command past its bound; the interpreter does not wait for a daemon thread."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # cut at its timeout meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        try:
            outcome: tuple[T | None, BaseException | None] = (call(), None)
        except BaseException as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, name="gpufrag-check", daemon=True).start()
    return await future


async def check_kafka(kafka: KafkaSettings, *, timeout_s: float) -> list[str]:
    """A broker answers at the bootstrap address with the configured security (the TLS files
    usable, the handshake and the SASL login passing), and one answers at the address the
    cluster advertises (list_topics asks a broker from the metadata): a broker reachable only
    by its bootstrap name is the usual misconfiguration of a broker in a cluster."""
    # aiokafka logs each refused connection at ERROR; the check reports it once, itself
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    bootstrap = kafka.bootstrap
    try:
        options = client_kwargs(kafka)
    except KafkaSecurityError as exc:  # a CA file missing, a key that is not PEM
        return [f"kafka: {exc}"]
    refused = await _first_broker(kafka, options, timeout_s=timeout_s)
    if refused is not None:
        return [refused]
    admin = AIOKafkaAdminClient(
        **options, client_id="gpufrag-check-config", request_timeout_ms=int(timeout_s * 1000)
    )
    try:
        await admin.start()
        await admin.list_topics()
    except KafkaConnectionError:  # its text lists the address tuples, nothing more
        return [f"kafka: no broker answered at {bootstrap}"]
    except Exception as exc:
        return [f"kafka: no broker answered at {bootstrap}: {_text(exc)}"]
    finally:
        await admin.close()
    return []


async def _first_broker(
    kafka: KafkaSettings, options: dict[str, Any], *, timeout_s: float
) -> str | None:
    """Connect to the bootstrap brokers in turn, as a client would, until one takes the TLS
    handshake and the SASL login; None then, or when none answers at all (the admin's check
    says so). A TLS or SASL refusal is the line to print at once (the next broker would say
    the same): aiokafka's own clients only log it and report "Unable to bootstrap"."""
    security = {k: v for k, v in options.items() if k != "bootstrap_servers"}
    closed: str | None = None
    for host, port, _ in collect_hosts(kafka.bootstrap, randomize=False):
        try:
            conn = await create_conn(
                host,
                port,
                client_id="gpufrag-check-config",
                request_timeout_ms=int(timeout_s * 1000),
                **security,
            )
        except (ConnectionResetError, KafkaConnectionError) as exc:
            # taken, then closed: a listener speaking another protocol does that
            closed = closed or _closed_line(kafka, f"{host}:{port}", exc)
            continue
        except (OSError, KafkaError, TimeoutError) as exc:
            refused = _refusal_line(kafka, f"{host}:{port}", exc)
            if refused is not None:
                return refused
            continue  # not answering: the next one may
        conn.close()
        return None
    return closed


def _refusal_line(kafka: KafkaSettings, at: str, exc: BaseException) -> str | None:
    """The line for a broker that answered and refused the TLS handshake or the SASL login;
    None for one that did not answer."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"kafka: TLS handshake with {at} failed: {exc.verify_message}; is "
            "GPUFRAG_KAFKA__TLS_CA_FILE the CA that signed the broker's certificate?"
        )
    if isinstance(exc, ssl.SSLError):
        return f"kafka: TLS handshake with {at} failed: {exc.reason or _text(exc)}"
    mechanism = kafka.sasl_mechanism.value if kafka.sasl_mechanism else None
    if isinstance(exc, SaslAuthenticationFailed):
        return (
            f"kafka: SASL authentication failed for user {kafka.sasl_username!r} "
            f"(mechanism {mechanism}) at {at}: {_text(exc)}"
        )
    if isinstance(exc, UnsupportedSaslMechanismError):
        return f"kafka: {at} does not take SASL mechanism {mechanism}: {_text(exc)}"
    if isinstance(exc, IllegalSaslStateError):
        return (
            f"kafka: {at} refused the SASL handshake (a listener without SASL?): check "
            "GPUFRAG_KAFKA__SECURITY_PROTOCOL and the port"
        )
    return None


def _closed_line(kafka: KafkaSettings, at: str, exc: BaseException) -> str:
    protocol = kafka.security_protocol
    cert = ""
    if protocol.tls and not kafka.tls_cert_file:
        cert = ", or requires a client certificate (GPUFRAG_KAFKA__TLS_CERT_FILE)"
    return (
        f"kafka: {at} closed the connection ({_text(exc)}): the listener speaks another "
        f"security protocol than {protocol}{cert}; check GPUFRAG_KAFKA__SECURITY_PROTOCOL and "
        "the port"
    )


async def check_store(settings: StoreSettings, *, timeout_s: float) -> list[str]:
    """A chDB path must be a directory this user can write (or create), empty or a store
    already; it is not opened (a running command may hold it). A server must answer
    ``SELECT 1``."""
    dsn = settings.dsn or default_store_dsn()
    location = parse_dsn(dsn)  # StoreError: a bad DSN, or a path that cannot be a store
    if location.kind == "chdb":
        check_store_dir(location)
        return []
    # clickhouse-connect logs each failed request at ERROR; the check reports it once, itself
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    await in_daemon_thread(lambda: ping_server(location, timeout_s=timeout_s))
    return []


def check_guardrails(settings: GpufragSettings) -> list[str]:
    g = settings.guardrails
    if g.mode == "enforce" and not g.protected_namespaces:
        return [
            "guardrails: mode enforce with no protected namespaces: pods of kube-system, the "
            "GPU stack and gpufrag itself may be evicted; set "
            "GPUFRAG_GUARDRAILS__PROTECTED_NAMESPACES"
        ]
    return []


async def check_alertmanager(url: str, *, timeout_s: float) -> list[str]:
    """GET ``/-/ready``, which Alertmanager answers 200 once it can take alerts."""
    ready = url.rstrip("/") + "/-/ready"
    shown = redacted_url(url)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http, http.get(ready) as response:
            if response.status != 200:
                return [f"alertmanager: {shown} is not ready: /-/ready answered {response.status}"]
    except TimeoutError:
        return [f"alertmanager: no answer from {shown} within {timeout_s:g} s"]
    except (aiohttp.ClientError, OSError) as exc:
        return [f"alertmanager: no answer from {shown}: {_text(exc, secret=url)}"]
    return []


def needed_permissions(settings: GpufragSettings, plan: CheckPlan) -> dict[Permission, list[str]]:
    """Each permission the planned components need, with the components needing it."""
    needs: dict[Permission, list[str]] = {}
    if Target.KUBE_WATCH in plan.targets:
        for p in [*watcher_permissions(settings.kube), *discovery_permissions(settings.dcgm)]:
            needs.setdefault(p, []).append(Component.WATCH.value)
    if Target.KUBE_ACT in plan.targets:
        for p in actuator_permissions(settings.actuator):
            needs.setdefault(p, []).append(Component.ACTUATE.value)
    return needs


async def check_kube(
    settings: GpufragSettings, needs: dict[Permission, list[str]], *, timeout_s: float
) -> list[str]:
    """One line per permission the API server denies to the configured user."""
    # kubernetes-asyncio (hundreds of models) is loaded only when the cluster is checked
    from kubernetes_asyncio.config import ConfigException

    from connectors.kube import api_client_for
    from connectors.kube.access import AccessReviewError

    try:
        client = await api_client_for(settings.kube)
    except ConfigException as exc:
        return [f"kube: no Kubernetes configuration ({_text(exc)}); set GPUFRAG_KUBE__KUBECONFIG"]
    try:
        denied = await lacking(client, list(needs), timeout_s=timeout_s)
    except AccessReviewError as exc:
        return [f"kube: no answer from the API server at {client.configuration.host}: {exc}"]
    finally:
        await client.close()
    return [f"rbac: {', '.join(needs[p])} cannot {p.describe()}" for p in denied]


def _text(exc: BaseException, *, secret: str | None = None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if secret:
        text = redact(text, secret)
    return text[:300]
