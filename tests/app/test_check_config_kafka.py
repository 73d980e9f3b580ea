"""`gpufrag check-config` against the real broker's SASL_SSL and mTLS listeners: a good
configuration passes with its credentials; a wrong password, a CA that did not sign the
broker's certificate, a missing CA file and a missing client certificate are each one line
saying so, and the password is never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.check_config_helpers import Ran, run_check_config
from tests.secure_kafka import SecureKafka, self_signed_ca

pytestmark = pytest.mark.deploy

KAFKA_ONLY = ("--mode", "distributed", "--component", "worker")
"""A worker needs Kafka and the guardrails checked (nothing else to start here)."""


def check(kafka: SecureKafka, **over: str) -> Ran:
    ran = run_check_config(*KAFKA_ONLY, env=kafka.env(**over))
    assert kafka.password not in "\n".join(ran.lines) + ran.stderr  # never printed
    return ran


def kafka_line(ran: Ran) -> str:
    assert ran.returncode == 1, ran
    (line,) = ran.lines  # the one problem, the guardrails being fine
    assert line.startswith("kafka: "), ran
    return line


@pytest.mark.kafka
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_good_sasl_ssl_credentials_pass(kafka_secure: SecureKafka, mechanism: str) -> None:
    ran = check(kafka_secure, sasl_mechanism=mechanism)
    assert ran.returncode == 0, ran
    assert ran.lines[0].startswith("ok: kafka, guardrails (distributed: worker;"), ran


@pytest.mark.kafka
def test_a_wrong_password_is_an_authentication_line(kafka_secure: SecureKafka) -> None:
    line = kafka_line(check(kafka_secure, sasl_password="not-the-password"))
    assert line.startswith(
        "kafka: SASL authentication failed for user 'gpufrag' (mechanism SCRAM-SHA-512) at "
        f"{kafka_secure.sasl_ssl}: "
    ), line
    assert "not-the-password" not in line


@pytest.mark.kafka
def test_an_unknown_user_is_the_same_line(kafka_secure: SecureKafka) -> None:
    line = kafka_line(check(kafka_secure, sasl_username="nobody", sasl_mechanism="SCRAM-SHA-256"))
    assert "SASL authentication failed for user 'nobody' (mechanism SCRAM-SHA-256)" in line


@pytest.mark.kafka
def test_an_untrusted_ca_is_a_tls_handshake_line(kafka_secure: SecureKafka, tmp_path: Path) -> None:
    line = kafka_line(check(kafka_secure, tls_ca_file=self_signed_ca(tmp_path)))
    assert line == (
        f"kafka: TLS handshake with {kafka_secure.sasl_ssl} failed: unable to get local issuer "
        "certificate; is GPUFRAG_KAFKA__TLS_CA_FILE the CA that signed the broker's certificate?"
    )


@pytest.mark.kafka
def test_a_missing_ca_file_is_its_own_line(kafka_secure: SecureKafka, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    line = kafka_line(check(kafka_secure, tls_ca_file=str(missing)))
    assert line == (
        f"kafka: TLS CA file {missing} (GPUFRAG_KAFKA__TLS_CA_FILE) cannot be read: No such "
        "file or directory"
    )


@pytest.mark.kafka
def test_mtls_passes_with_the_client_certificate_and_is_told_without_it(
    kafka_secure: SecureKafka,
) -> None:
    base = {
        "GPUFRAG_KAFKA__BOOTSTRAP": kafka_secure.ssl,
        "GPUFRAG_KAFKA__SECURITY_PROTOCOL": "SSL",
        "GPUFRAG_KAFKA__TLS_CA_FILE": kafka_secure.ca_file,
    }
    with_cert = {
        **base,
        "GPUFRAG_KAFKA__TLS_CERT_FILE": kafka_secure.client_cert_file,
        "GPUFRAG_KAFKA__TLS_KEY_FILE": kafka_secure.client_key_file,
    }
    ran = run_check_config(*KAFKA_ONLY, env=with_cert)
    assert ran.returncode == 0, ran
    line = kafka_line(run_check_config(*KAFKA_ONLY, env=base))
    assert line.startswith(f"kafka: {kafka_secure.ssl} closed the connection ("), line
    assert "or requires a client certificate (GPUFRAG_KAFKA__TLS_CERT_FILE)" in line


def test_a_sasl_setting_missing_is_named_and_the_password_not_shown(tmp_path: Path) -> None:
    password = "pw-only-in-the-environment"
    env = {
        "GPUFRAG_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "GPUFRAG_KAFKA__SASL_PASSWORD": password,
        "GPUFRAG_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
    }
    ran = run_check_config(*KAFKA_ONLY, env=env)
    assert ran.returncode == 1, ran
    assert ran.lines == [
        "settings: setting GPUFRAG_KAFKA__SASL_USERNAME: required with security_protocol SASL_SSL"
    ], ran
    # complete, but nothing listening: the line names the address and the login, not the secret
    env["GPUFRAG_KAFKA__SASL_USERNAME"] = "gpufrag"
    env["GPUFRAG_KAFKA__BOOTSTRAP"] = "127.0.0.1:1"
    ran = run_check_config(*KAFKA_ONLY, env=env)
    assert ran.returncode == 1, ran
    assert ran.lines[0].startswith("kafka: no broker answered at 127.0.0.1:1"), ran
    assert password not in "\n".join(ran.lines) + ran.stderr
