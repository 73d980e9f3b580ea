"""The Kafka settings as every client's arguments: aiokafka's keyword arguments and Faust's
broker credentials, made here only, so no client can be left speaking plaintext.

A TLS file that cannot be used is a ``KafkaSecurityError`` naming its setting, raised when a
client is built (before anything connects): a missing CA file is one clear line, not a stack
of retries against a broker that was never the problem.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from aiokafka.helpers import create_ssl_context

from models.kafka_settings import KafkaSettings

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

__all__ = ["KafkaSecurityError", "client_kwargs", "describe", "faust_credentials", "ssl_context"]


class KafkaSecurityError(ValueError):
    """A TLS file of the Kafka settings that cannot be read or used."""


def _env(name: str) -> str:
    return f"GPUFRAG_KAFKA__{name.upper()}"


def _readable(path: str, setting: str, what: str) -> None:
    try:
        open(path, "rb").close()  # only whether it opens
    except OSError as exc:
        raise KafkaSecurityError(
            f"TLS {what} {path} ({_env(setting)}) cannot be read: {exc.strerror or exc}"
        ) from None


def ssl_context(kafka: KafkaSettings) -> ssl.SSLContext | None:
    """The TLS context of a client (None without TLS): the brokers' certificates checked
    against ``tls_ca_file`` (else the system's CAs), their host names too unless turned off,
    and the client's own certificate presented when one is set."""
    if not kafka.security_protocol.tls:
        return None
    if kafka.tls_ca_file is not None:
        _readable(kafka.tls_ca_file, "tls_ca_file", "CA file")
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=kafka.tls_ca_file)
    except ssl.SSLError as exc:
        raise KafkaSecurityError(
            f"TLS CA file {kafka.tls_ca_file} ({_env('tls_ca_file')}) holds no usable PEM "
            f"certificate: {exc.reason or exc}"
        ) from None
    if kafka.tls_cert_file is not None:
        _readable(kafka.tls_cert_file, "tls_cert_file", "client certificate")
        if kafka.tls_key_file is not None:
            _readable(kafka.tls_key_file, "tls_key_file", "client key")
        try:
            context.load_cert_chain(kafka.tls_cert_file, kafka.tls_key_file)
        except ssl.SSLError as exc:
            raise KafkaSecurityError(
                f"TLS client certificate {kafka.tls_cert_file} ({_env('tls_cert_file')}) and "
                f"key ({_env('tls_key_file')}) cannot be used: {exc.reason or exc}"
            ) from None
    context.check_hostname = kafka.tls_check_hostname
    return context


def client_kwargs(kafka: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments for any aiokafka client (producer, consumer, admin): the bootstrap
    servers, the security protocol, and the TLS context and SASL credentials it needs."""
    out: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap,
        "security_protocol": kafka.security_protocol.value,
    }
    context = ssl_context(kafka)
    if context is not None:
        out["ssl_context"] = context
    if kafka.security_protocol.sasl:
        # the model refuses a SASL protocol without these three
        assert kafka.sasl_mechanism is not None and kafka.sasl_password is not None
        out["sasl_mechanism"] = kafka.sasl_mechanism.value
        out["sasl_plain_username"] = kafka.sasl_username
        out["sasl_plain_password"] = kafka.sasl_password.get_secret_value()
    return out


def faust_credentials(kafka: KafkaSettings) -> CredentialsT | None:
    """Faust's ``broker_credentials`` for the same settings (None: plaintext). Faust's aiokafka
    driver gives them to the worker's consumer and to its producer, which also creates the
    topics: SSLCredentials map to security_protocol SSL with the context; SASLCredentials to
    SASL_SSL when they hold a context, else SASL_PLAINTEXT, with the mechanism (SCRAM
    included), user and password passed through."""
    from faust.auth import SASLCredentials, SSLCredentials  # faust is heavy: workers only

    protocol = kafka.security_protocol
    context = ssl_context(kafka)
    if not protocol.sasl:
        return None if context is None else SSLCredentials(context)
    assert kafka.sasl_mechanism is not None and kafka.sasl_password is not None
    return SASLCredentials(
        username=kafka.sasl_username,
        password=kafka.sasl_password.get_secret_value(),
        ssl_context=context,
        mechanism=kafka.sasl_mechanism.value,
    )


def describe(kafka: KafkaSettings) -> str:
    """How the clients connect, for messages (never the password): ``SASL_SSL, SCRAM-SHA-512
    as 'gpufrag'``."""
    protocol = kafka.security_protocol
    if not protocol.sasl or kafka.sasl_mechanism is None:
        return protocol.value
    return f"{protocol.value}, {kafka.sasl_mechanism.value} as {kafka.sasl_username!r}"
