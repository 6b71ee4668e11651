from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.settings import load_settings


def test_defaults_load_without_a_file() -> None:
    s = load_settings()
    assert s.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert s.hbase.port == 9090 and s.hbase.thrift2_port == 9091


def test_environment_overrides_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[kafka]\nbootstrap_servers = "a:1"\nclient_id = "x"\n')
    monkeypatch.setenv("HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS", "b:2")
    s = load_settings(f)
    assert s.kafka.bootstrap_servers == "b:2"
    assert s.kafka.client_id == "x"


def test_unknown_key_is_named(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[writer]\nmax_batch_rowz = 5\n")
    with pytest.raises(ConfigError, match=r"writer\.max_batch_rowz: unknown key"):
        load_settings(f)


def test_wrong_value_names_key_and_value(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[hbase]\nport = "ninety"\n')
    with pytest.raises(ConfigError, match=r"hbase\.port: .*integer.*'ninety'"):
        load_settings(f)


def test_route_family_must_exist_in_declared_table(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("""
[[tables]]
name = "t"
families = { d = {} }

[[routes]]
name = "r"
topic = "x"
table = "t"
rowkey = "[a]"
columns = { "x:v" = "a" }
""")
    with pytest.raises(ConfigError, match="route 'r' writes family 'x'"):
        load_settings(f)


def test_secret_is_not_shown(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[kafka]\nsecurity_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                 'sasl_plain_username = "u"\nsasl_plain_password = "hunter2"\n')
    s = load_settings(f)
    assert "hunter2" not in repr(s)
    assert s.kafka.sasl_plain_password is not None
    assert s.kafka.sasl_plain_password.get_secret_value() == "hunter2"


def test_bad_toml_is_reported(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[kafka\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(f)
