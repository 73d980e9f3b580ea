"""The Kafka security settings as clients use them: the same arguments for aiokafka and for Faust
(read back through Faust's own driver), unusable TLS files named, and, against the real
broker's SASL_SSL and mTLS listeners, records produced and consumed through the product's own
client builders, which a wrong password or a missing client certificate cannot do."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaConnectionError
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from connectors.kafka.admin import TopicRequest, ensure_topics
from connectors.kafka.producer import acked_producer
from connectors.kafka.security import (
    KafkaSecurityError,
    client_kwargs,
    describe,
    faust_credentials,
)
from models import GpufragSettings, KafkaSettings
from streams.distributed.app import WorkerConfig, build_app
from streams.pipeline import define_pipeline
from tests.secure_kafka import SecureKafka, self_signed_ca

SASL = {"sasl_username": "gpufrag", "sasl_password": "s3cret-pw"}


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [
        ("PLAINTEXT", None),
        ("SSL", None),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
    ],
)
def test_faust_gets_what_aiokafka_gets(
    protocol: str, mechanism: str | None, tmp_path: Path
) -> None:
    tls = protocol in ("SSL", "SASL_SSL")
    kafka = KafkaSettings(
        bootstrap="b:9093",
        security_protocol=protocol,
        sasl_mechanism=mechanism,
        tls_ca_file=self_signed_ca(tmp_path) if tls else None,
        **(SASL if mechanism else {}),
    )
    ours = client_kwargs(kafka)
    assert ours.pop("bootstrap_servers") == "b:9093"
    # what Faust's driver hands its consumer and producer for our credentials
    faust_side = dict(credentials_to_aiokafka_auth(faust_credentials(kafka)))
    assert faust_side.get("security_protocol") == protocol == ours["security_protocol"]
    if mechanism:
        assert faust_side["sasl_mechanism"] == ours["sasl_mechanism"] == mechanism
        assert faust_side["sasl_plain_username"] == ours["sasl_plain_username"] == "gpufrag"
        assert faust_side["sasl_plain_password"] == ours["sasl_plain_password"] == "s3cret-pw"
    else:
        assert "sasl_mechanism" not in ours
    if tls:
        for context in (ours["ssl_context"], faust_side["ssl_context"]):
            assert isinstance(context, ssl.SSLContext)
            assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    else:
        assert "ssl_context" not in ours and faust_side.get("ssl_context") is None


def test_the_worker_app_gives_them_to_its_producer_and_consumer(tmp_path: Path) -> None:
    kafka = KafkaSettings(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", **SASL
    )
    cfg = WorkerConfig(
        app_id="secure-test",
        bootstrap="127.0.0.1:1",
        credentials=faust_credentials(kafka),
        prefix="secure-test.",
        replication=1,
        datadir=str(tmp_path),
        pipeline=define_pipeline(GpufragSettings()),
    )
    app, _ = build_app(cfg)
    wanted = {k: v for k, v in client_kwargs(kafka).items() if k != "bootstrap_servers"}
    # the producer (gpufrag's idempotent one) merges these over its defaults
    producer_side = dict(app.producer._settings_auth())
    assert {k: producer_side[k] for k in wanted} == wanted
    assert app.producer._settings_extra() == {"acks": "all", "enable_idempotence": True}
    # the worker's consumer is built from the app's broker credentials the same way
    consumer_side = credentials_to_aiokafka_auth(app.conf.broker_credentials, app.conf.ssl_context)
    assert {k: consumer_side[k] for k in wanted} == wanted


def test_the_hostname_check_can_be_turned_off_the_certificate_check_cannot(
    tmp_path: Path,
) -> None:
    kafka = KafkaSettings(
        security_protocol="SSL", tls_ca_file=self_signed_ca(tmp_path), tls_check_hostname=False
    )
    context = client_kwargs(kafka)["ssl_context"]
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    ("files", "variable", "says"),
    [
        ({"tls_ca_file": "/nonexistent/ca.pem"}, "TLS_CA_FILE", "/nonexistent/ca.pem"),
        ({"tls_ca_file": "{tmp}"}, "TLS_CA_FILE", "cannot be read: Is a directory"),
        ({"tls_ca_file": "{text}"}, "TLS_CA_FILE", "holds no usable PEM certificate"),
        (
            {"tls_cert_file": "{ca}", "tls_key_file": "/nonexistent/k.pem"},
            "TLS_KEY_FILE",
            "TLS client key /nonexistent/k.pem",
        ),
        ({"tls_cert_file": "{ca}", "tls_key_file": "{text}"}, "TLS_CERT_FILE", "cannot be used"),
    ],
)
def test_an_unusable_tls_file_is_named_with_its_variable(
    files: dict[str, str], variable: str, says: str, tmp_path: Path
) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate\n")
    ca = self_signed_ca(tmp_path)
    filled = {k: v.format(tmp=tmp_path, text=text, ca=ca) for k, v in files.items()}
    kafka = KafkaSettings(security_protocol="SSL", **filled)
    with pytest.raises(KafkaSecurityError) as raised:
        client_kwargs(kafka)
    message = str(raised.value)
    assert says in message and f"(GPUFRAG_KAFKA__{variable})" in message, message
    with pytest.raises(KafkaSecurityError):
        faust_credentials(kafka)  # the worker's credentials are refused the same way


def test_describe_names_the_user_and_mechanism_never_the_password() -> None:
    kafka = KafkaSettings(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", **SASL
    )
    assert describe(kafka) == "SASL_PLAINTEXT, SCRAM-SHA-256 as 'gpufrag'"
    assert describe(KafkaSettings()) == "PLAINTEXT"


async def _round_trip(kafka: KafkaSettings) -> list[bytes]:
    """A topic made by the admin, three records through the acked producer, read back by a
    consumer: every client built from ``kafka``."""
    topic = f"t{uuid.uuid4().hex[:10]}.secure"
    assert await ensure_topics(kafka, [TopicRequest(topic, 2, {})]) == [topic]
    producer = acked_producer(kafka, client_id="test-secure")
    await producer.start()
    try:
        for n in range(3):
            await producer.send_and_wait(topic, key=b"k", value=f"v{n}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, **client_kwargs(kafka), auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        for _ in range(30):
            batch = await consumer.getmany(timeout_ms=1000)
            got += [r.value or b"" for records in batch.values() for r in records]
            if len(got) >= 3:
                break
    finally:
        await consumer.stop()
    return got


@pytest.mark.kafka
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
async def test_a_round_trip_over_sasl_ssl(kafka_secure: SecureKafka, mechanism: str) -> None:
    got = await _round_trip(kafka_secure.sasl(sasl_mechanism=mechanism))
    assert got == [b"v0", b"v1", b"v2"]


@pytest.mark.kafka
async def test_a_round_trip_over_mutual_tls(kafka_secure: SecureKafka) -> None:
    assert await _round_trip(kafka_secure.mtls()) == [b"v0", b"v1", b"v2"]


@pytest.mark.kafka
@pytest.mark.parametrize(
    "wrong",
    [
        {"sasl_password": "not-the-password"},
        {
            "security_protocol": "SSL",
            "sasl_mechanism": None,
            "sasl_username": None,
            "sasl_password": None,
        },
    ],
    ids=["wrong password", "no SASL"],
)
async def test_the_listener_refuses_clients_without_the_right_credentials(
    kafka_secure: SecureKafka, wrong: dict[str, str | None]
) -> None:
    """What makes the round trips above mean something: the broker does check."""
    producer = acked_producer(kafka_secure.sasl(**wrong), client_id="test-refused")
    with pytest.raises(KafkaConnectionError):
        await producer.start()
    await producer.stop()
