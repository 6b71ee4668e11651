"""The Kafka clients' security options: the password read from ``sasl_password_file``, and clear
errors naming a missing or empty password file and a missing CA file (never the password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.kafka import common_options
from pipeline.errors import ConfigError
from pipeline.settings import KafkaSettings

SECRET = "Fil3-Secret-canary"


def test_password_file_is_read_and_stripped(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text(SECRET + "\n")
    s = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                      sasl_plain_username="alice", sasl_password_file=pw)
    assert common_options(s)["sasl_plain_password"] == SECRET
    assert SECRET not in repr(s)


@pytest.mark.parametrize(("content", "expected"), [(None, "does not exist"), ("\n", "is empty")])
def test_missing_or_empty_password_file(tmp_path: Path, content: str | None, expected: str) -> None:
    pw = tmp_path / "pw"
    if content is not None:
        pw.write_text(content)
    s = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                      sasl_plain_username="alice", sasl_password_file=pw)
    with pytest.raises(ConfigError, match=expected) as bad:
        common_options(s)
    assert str(pw) in str(bad.value)


def test_missing_ca_file_is_named(tmp_path: Path) -> None:
    s = KafkaSettings(security_protocol="SSL", ssl_cafile=str(tmp_path / "ca.pem"))
    with pytest.raises(ConfigError, match="does not exist") as bad:
        common_options(s)
    assert str(tmp_path / "ca.pem") in str(bad.value)


def test_ca_file_without_a_certificate_is_named(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    s = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                      sasl_plain_password=SECRET, ssl_cafile=str(ca))
    with pytest.raises(ConfigError) as bad:
        common_options(s)
    assert str(ca) in str(bad.value) and SECRET not in str(bad.value)
