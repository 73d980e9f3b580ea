"""The Kafka security settings: each missing or unused one refused with its own variable, and
the SASL password never shown, whatever prints the settings or their errors."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from models import GpufragSettings, KafkaSettings
from streams.app.console.setting_errors import setting_lines

PASSWORD = "pw-7f3a9c-never-shown"


def lines_for(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[str]:
    """The lines a command prints for these GPUFRAG_KAFKA__* variables (no others set)."""
    for name in [n for n in os.environ if n.startswith("GPUFRAG_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(f"GPUFRAG_KAFKA__{name.upper()}", value)
    with pytest.raises(ValidationError) as raised:
        GpufragSettings()
    lines = setting_lines(raised.value)
    assert lines is not None
    return lines


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_a_sasl_protocol_names_each_missing_setting(
    monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    assert lines_for(monkeypatch, security_protocol=protocol) == [
        f"setting GPUFRAG_KAFKA__SASL_MECHANISM: required with security_protocol {protocol} "
        "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
        f"setting GPUFRAG_KAFKA__SASL_USERNAME: required with security_protocol {protocol}",
        f"setting GPUFRAG_KAFKA__SASL_PASSWORD: required with security_protocol {protocol}",
    ]
    # given only the password, the other two are still named
    assert [
        line.split(":")[0]
        for line in lines_for(monkeypatch, security_protocol=protocol, sasl_password=PASSWORD)
    ] == ["setting GPUFRAG_KAFKA__SASL_MECHANISM", "setting GPUFRAG_KAFKA__SASL_USERNAME"]


def test_credentials_and_tls_files_the_protocol_would_not_use_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = lines_for(
        monkeypatch, sasl_username="u", sasl_password=PASSWORD, tls_ca_file="/etc/ca.pem"
    )
    assert lines == [
        "setting GPUFRAG_KAFKA__SASL_USERNAME: set, but security_protocol PLAINTEXT sends no "
        "SASL credentials: use SASL_SSL (or SASL_PLAINTEXT), or unset it",
        "setting GPUFRAG_KAFKA__SASL_PASSWORD: set, but security_protocol PLAINTEXT sends no "
        "SASL credentials: use SASL_SSL (or SASL_PLAINTEXT), or unset it",
        "setting GPUFRAG_KAFKA__TLS_CA_FILE: set, but security_protocol PLAINTEXT uses no TLS: "
        "use SSL or SASL_SSL, or unset it",
    ]
    assert not any(PASSWORD in line for line in lines)
    # SASL over plain TCP: a CA file would sit unused
    (line,) = lines_for(
        monkeypatch,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password=PASSWORD,
        tls_check_hostname="false",
    )
    assert line.startswith("setting GPUFRAG_KAFKA__TLS_CHECK_HOSTNAME: set, but security_protocol")


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "sasl_username": "u"},
            "setting GPUFRAG_KAFKA__SASL_MECHANISM: Input should be 'PLAIN', 'SCRAM-SHA-256' "
            "or 'SCRAM-SHA-512'",
        ),
        (
            {"security_protocol": "TLS"},
            "setting GPUFRAG_KAFKA__SECURITY_PROTOCOL: Input should be 'PLAINTEXT', 'SSL', "
            "'SASL_PLAINTEXT' or 'SASL_SSL'",
        ),
        (
            {"security_protocol": "SSL", "tls_key_file": "/k.pem"},
            "setting GPUFRAG_KAFKA__TLS_KEY_FILE: set without tls_cert_file, the certificate it "
            "is the key of",
        ),
    ],
)
def test_a_bad_value_is_its_line(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], line: str
) -> None:
    assert line in lines_for(monkeypatch, **env)


def sasl_ssl(mechanism: str, **over: str) -> KafkaSettings:
    return KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_username="gpufrag",
        sasl_password=PASSWORD,
        **over,
    )


def test_a_complete_sasl_ssl_configuration_is_accepted() -> None:
    kafka = sasl_ssl("SCRAM-SHA-512", tls_ca_file="/etc/gpufrag/kafka/ca.crt")
    assert kafka.sasl_password is not None
    assert kafka.sasl_password.get_secret_value() == PASSWORD
    assert kafka.tls_check_hostname is True  # on unless turned off
    assert kafka.at("k:9093").sasl_password == kafka.sasl_password  # --bootstrap keeps it
    assert KafkaSettings().security_protocol == "PLAINTEXT"  # the default is unchanged


def test_the_password_is_in_no_repr_str_json_or_error() -> None:
    kafka = sasl_ssl("PLAIN")
    settings = GpufragSettings(kafka=kafka)
    shown = [
        repr(kafka),
        str(kafka),
        kafka.model_dump_json(),
        str(kafka.model_dump()),
        repr(settings),
        settings.model_dump_json(),
    ]
    assert all(PASSWORD not in text for text in shown)
    assert all("**********" in text for text in shown)
    # nor by the error of a configuration refused while it holds one
    for bad in ({"sasl_password": PASSWORD, "sasl_username": ""}, {"sasl_password": PASSWORD}):
        with pytest.raises(ValidationError) as raised:
            KafkaSettings(security_protocol="PLAINTEXT", **bad)
        assert PASSWORD not in str(raised.value)
