"""The secure listeners of the test broker (`deploy/local/kafka.sh start --secure`): SASL_SSL
(SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and SSL requiring a client certificate, read from the
``security.env`` the script writes, as gpufrag's own settings and as a command's environment."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models import KafkaSettings


@dataclass(frozen=True, slots=True)
class SecureKafka:
    plaintext: str
    """The same broker's plaintext listener: what a test itself reads the topics through."""
    sasl_ssl: str
    ssl: str
    ca_file: str
    client_cert_file: str
    client_key_file: str
    username: str
    password: str

    @classmethod
    def read(cls, security_env: Path) -> SecureKafka:
        values = dict(
            line.split("=", 1) for line in security_env.read_text().splitlines() if "=" in line
        )
        return cls(
            plaintext=values["PLAINTEXT"],
            sasl_ssl=values["SASL_SSL"],
            ssl=values["SSL"],
            ca_file=values["CA_FILE"],
            client_cert_file=values["CLIENT_CERT_FILE"],
            client_key_file=values["CLIENT_KEY_FILE"],
            username=values["USERNAME"],
            password=values["PASSWORD"],
        )

    def sasl_options(self, **over: Any) -> dict[str, Any]:
        """The SASL_SSL listener's settings (SCRAM-SHA-512), ``over`` replacing any of them."""
        options: dict[str, Any] = {
            "bootstrap": self.sasl_ssl,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": self.username,
            "sasl_password": self.password,
            "tls_ca_file": self.ca_file,
        }
        return {**options, **over}

    def sasl(self, **over: Any) -> KafkaSettings:
        return KafkaSettings(**self.sasl_options(**over))

    def mtls(self) -> KafkaSettings:
        """The SSL listener, with the client certificate it requires."""
        return KafkaSettings(
            bootstrap=self.ssl,
            security_protocol="SSL",
            tls_ca_file=self.ca_file,
            tls_cert_file=self.client_cert_file,
            tls_key_file=self.client_key_file,
        )

    def env(self, **over: Any) -> dict[str, str]:
        """``GPUFRAG_KAFKA__*`` variables for the SASL_SSL listener (a command's environment)."""
        return {f"GPUFRAG_KAFKA__{k.upper()}": str(v) for k, v in self.sasl_options(**over).items()}


def self_signed_ca(directory: Path) -> str:
    """A CA certificate made by openssl in ``directory`` (its path): one that signed nothing
    the broker holds, or just a real PEM certificate where a test needs one."""
    key, cert = directory / "other-ca.key", directory / "other-ca.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2"),
            *("-subj", "/CN=gpufrag untrusted test CA"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert)
