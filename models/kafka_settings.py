"""The Kafka settings group: where the bus is, and how gpufrag's clients authenticate to it.

Part of the one settings model (``models.settings.GpufragSettings``), in its own module so each
module stays small; every option is documented here, once. ``connectors.kafka.security`` turns
the security options into every client's arguments (aiokafka's and Faust's).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from models.settings_group import Group as _Group

__all__ = ["KafkaSettings", "SaslMechanism", "SecurityProtocol"]


class SecurityProtocol(StrEnum):
    """Kafka's names for what a listener speaks (``security.protocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(StrEnum):
    """The SASL mechanisms gpufrag's clients (aiokafka) speak with a user name and password."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


FilePath = Annotated[str, Field(min_length=1, max_length=4096)]
"""A file's path, as the process sees it (a mounted Secret's, in a pod)."""

_MECHANISMS = ", ".join(m.value for m in SaslMechanism)
_SASL_FIELDS = ("sasl_mechanism", "sasl_username", "sasl_password")
_TLS_FIELDS = ("tls_ca_file", "tls_cert_file", "tls_key_file", "tls_check_hostname")


class KafkaSettings(_Group):
    # a refused password must not be quoted by a validation error (a log, a traceback)
    model_config = ConfigDict(hide_input_in_errors=True)

    bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers, comma-separated host:port."""
    topic_prefix: str = ""
    """Prepended to every topic name (one cluster, several gpufrag installations or tests)."""
    replication: Annotated[int, Field(ge=1, le=32767)] = 1
    """Replication factor for topics gpufrag creates; 3 on a real cluster (Kafka's is 16-bit)."""
    max_source_lag_s: Annotated[float, Field(gt=0)] = 600.0
    """Event-time seconds a source may fall behind the most advanced one before the workers stop
    waiting for its progress reports (a watcher stopped for good); its events that come after the
    others' progress has passed them are dead-lettered as late, so keep this above any real
    source's delay."""
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    """What the listener at ``bootstrap`` speaks, as Kafka names it: PLAINTEXT, SSL (TLS),
    SASL_PLAINTEXT (a user and password over plain TCP) or SASL_SSL (both). Every gpufrag
    client (publishers, the workers' Faust consumer and producer, sink, alert, actuate, topic
    creation, ``check-config``) uses it; the ``sasl_*`` settings are required with the SASL
    protocols and refused without them, the ``tls_*`` ones likewise refused without TLS, so a
    credential never sits unused while the connection goes out without it."""
    sasl_mechanism: SaslMechanism | None = Field(default=None, validate_default=True)
    """PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512: what the broker's listener enables. SCRAM never
    sends the password itself; PLAIN does, so use it only over SASL_SSL."""
    sasl_username: Annotated[str, Field(min_length=1)] | None = Field(
        default=None, validate_default=True
    )
    """The SASL user."""
    sasl_password: Annotated[SecretStr, Field(min_length=1)] | None = Field(
        default=None, validate_default=True
    )
    """The SASL user's password. A secret: shown as ``**********`` by every repr, log line and
    error, and read only where a client is built (in a pod, from a Secret)."""
    tls_ca_file: FilePath | None = None
    """PEM file of the CA(s) that signed the brokers' certificates; unset: the system's CAs."""
    tls_cert_file: FilePath | None = None
    """PEM client certificate, for a listener that requires one (mTLS, ``ssl.client.auth``);
    may hold the private key too."""
    tls_key_file: FilePath | None = None
    """PEM private key of ``tls_cert_file`` when that file does not hold it (unencrypted)."""
    tls_check_hostname: bool = True
    """Check that a broker's certificate names the host connected to. Turn off only for a
    broker whose certificate lacks its address (a test broker), never to silence a wrong CA:
    the certificate is still checked against the CA either way."""

    @field_validator(*_SASL_FIELDS)
    @classmethod
    def _sasl_fits_protocol(cls, value: object, info: ValidationInfo) -> object:
        protocol = info.data.get("security_protocol")
        if protocol is None:  # refused itself: one line is enough
            return value
        if protocol.sasl and value is None:
            hint = f" ({_MECHANISMS})" if info.field_name == "sasl_mechanism" else ""
            raise ValueError(f"required with security_protocol {protocol}{hint}")
        if not protocol.sasl and value is not None:
            raise ValueError(
                f"set, but security_protocol {protocol} sends no SASL credentials: "
                "use SASL_SSL (or SASL_PLAINTEXT), or unset it"
            )
        return value

    @field_validator(*_TLS_FIELDS)
    @classmethod
    def _tls_fits_protocol(cls, value: object, info: ValidationInfo) -> object:
        protocol = info.data.get("security_protocol")
        unset = value is None or (info.field_name == "tls_check_hostname" and value is True)
        if protocol is not None and not protocol.tls and not unset:
            raise ValueError(
                f"set, but security_protocol {protocol} uses no TLS: use SSL or SASL_SSL, or "
                "unset it"
            )
        no_cert = "tls_cert_file" in info.data and info.data["tls_cert_file"] is None
        if info.field_name == "tls_key_file" and value is not None and no_cert:
            raise ValueError("set without tls_cert_file, the certificate it is the key of")
        return value

    def at(self, bootstrap: str | None) -> KafkaSettings:
        """These settings with another bootstrap address (a command's ``--bootstrap``, which
        wins over ``GPUFRAG_KAFKA__BOOTSTRAP``), the security ones unchanged."""
        return self if not bootstrap else self.model_copy(update={"bootstrap": bootstrap})
