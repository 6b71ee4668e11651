"""The ``[stack]`` table and the ``HBASE_INGEST_STACK__*`` variables: validated by the local stack's
settings (devstack.settings), taken as given by the worker's, which does not read them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devstack.settings import StackProfile, StackSettings, load_profile, load_stack_settings
from pipeline.errors import ConfigError
from pipeline.settings import ENV_PREFIX, load_settings


@pytest.fixture(autouse=True)
def _no_inherited_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(var)


def test_file_keys_and_variables_reach_the_stack_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[stack]\nkafka_port = 19092\ncdc_tables = ["public.orders", "s.t"]\n[kafka]\nclient_id = "x"\n')
    monkeypatch.setenv("HBASE_INGEST_STACK__THRIFT_PORT", "19090")
    monkeypatch.setenv("hbase_ingest_stack__registry", "true")
    profile = load_profile(f)
    assert isinstance(profile, StackProfile) and isinstance(profile.stack, StackSettings)
    assert (profile.stack.kafka_port, profile.stack.thrift_port, profile.stack.registry) == (19092, 19090, True)
    assert profile.stack.cdc_tables == ["public.orders", "s.t"] and profile.kafka.client_id == "x"
    assert load_stack_settings(f) == profile.stack
    monkeypatch.setenv("HBASE_INGEST_STACK__CDC_TABLES", '["a.b"]')
    assert load_stack_settings(f).cdc_tables == ["a.b"]
    monkeypatch.setenv("HBASE_INGEST_STACK", '{"master_port": 17000}')
    assert load_stack_settings(None).master_port == 17000
    assert load_stack_settings(None) == load_stack_settings()


def test_the_worker_takes_the_stack_table_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.toml"
    f.write_text("[stack]\nkafka_port = 19092\n")
    monkeypatch.setenv("HBASE_INGEST_STACK__THRIFT_PORT", "19090")
    assert load_settings(f).stack == {"kafka_port": 19092, "thrift_port": "19090"}
    assert load_settings(None).stack == {"thrift_port": "19090"}
    monkeypatch.setenv("HBASE_INGEST_STACK__THRIFT_PORT__X", "1")
    with pytest.raises(ConfigError, match=r"HBASE_INGEST_STACK__THRIFT_PORT__X: not a setting"):
        load_settings(None)


@pytest.mark.parametrize(("text", "where"), [
    ("[stack]\nkafka_port = 70000\n", r"stack\.kafka_port: .*less than or equal to 65535"),
    ("[stack]\nthrift1_port = 9090\n", r"stack\.thrift1_port"),
    ('[stack]\ncdc_tables = ["orders"]\n', r"cdc_tables"),
])
def test_bad_stack_keys_are_refused(tmp_path: Path, text: str, where: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=where):
        load_profile(f)
    with pytest.raises(ConfigError, match=where):
        load_stack_settings(f)


@pytest.mark.parametrize(("var", "expected"), [
    ("HBASE_INGEST_STACK__THRIFT1_PORT", r"did you mean HBASE_INGEST_STACK__THRIFT_PORT\?"),
    ("HBASE_INGEST_STACK__HBASE_MASTER_PORT", r"did you mean HBASE_INGEST_STACK__MASTER_PORT\?"),
    ("HBASE_INGEST_STACK_KAFKA_PORT", r"did you mean HBASE_INGEST_STACK__KAFKA_PORT\?"),
])
def test_misspelt_stack_variable_is_refused_with_the_intended_name(
        monkeypatch: pytest.MonkeyPatch, var: str, expected: str) -> None:
    monkeypatch.setenv(var, "1")
    with pytest.raises(ConfigError, match=expected):
        load_stack_settings()
