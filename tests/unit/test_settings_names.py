"""Topic, table, family and route names: the rules (pipeline.names) and how load_settings applies them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.names import (
    family_name_problem,
    route_name_problem,
    table_name_problem,
    table_prefix_problem,
    topic_name_problem,
)
from pipeline.settings import ENV_PREFIX, load_settings


@pytest.fixture(autouse=True)
def _no_inherited_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(var)


def route(**fields: Any) -> dict[str, Any]:
    return {"name": "r1", "topic": "events", "table": "tb", "rowkey": "[a]", "columns": {"d:a": "a"}, **fields}


def problems(**config: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(None, **config)
    return str(info.value)


# -- the rules ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["t", "events.v1", "a_b-c.d", "A9", "x" * 249, "..."])
def test_good_topic_names(name: str) -> None:
    assert topic_name_problem(name) is None


@pytest.mark.parametrize(("name", "problem"), [
    ("", "must not be empty"),
    (".", "cannot be named '.' or '..'"),
    ("..", "cannot be named '.' or '..'"),
    ("x" * 250, "at most 249 characters, this one 250"),
    ("bad name!", "only contain ASCII letters, digits, '.', '_' and '-' (not ' !')"),
    ("caf\u00e9", "(not '\u00e9')"),
    ("a/b", "(not '/')"),
])
def test_bad_topic_names(name: str, problem: str) -> None:
    found = topic_name_problem(name)
    assert found is not None and problem in found


@pytest.mark.parametrize("name", ["t", "T_1", "a.b-c", "ns:t", "ns_1:a.b", "default:t", "0t"])
def test_good_table_names(name: str) -> None:
    assert table_name_problem(name) is None


@pytest.mark.parametrize(("name", "problem"), [
    ("", "must not be empty"),
    ("bad name!", "only contain ASCII letters, digits, '_', '.' and '-' (not ' !')"),
    (".t", "must not start with '.' or '-'"),
    ("-t", "must not start with '.' or '-'"),
    ("ns:.t", "must not start with '.' or '-'"),
    ("ns:", "after the namespace's ':' must not be empty"),
    (":t", "namespace before ':' must not be empty"),
    ("a:b:c", "at most one ':'"),
    ("my-ns:t", "namespace may only contain ASCII letters, digits and '_' (not '-')"),
    ("hbase:meta", "holds HBase's own tables"),
    ("zookeeper", "refuses the table name 'zookeeper'"),
    ("zookeeper:t", "refuses the namespace 'zookeeper'"),
    ("t\u00e4", "(not '\u00e4')"),
])
def test_bad_table_names(name: str, problem: str) -> None:
    found = table_name_problem(name)
    assert found is not None and problem in found


@pytest.mark.parametrize(("prefix", "ok"), [("", True), ("dev_", True), ("dev:", True), ("dev:x_", True),
                                            ("-x", False), ("a b", False), (":", False), ("a:b:", False)])
def test_table_prefix(prefix: str, ok: bool) -> None:
    assert (table_prefix_problem(prefix) is None) is ok


@pytest.mark.parametrize(("name", "problem"), [
    ("", "must not be empty"), (".d", "must not start with '.'"), ("a:b", "(has ':')"), ("a/b", "(has '/')"),
    ("a\\b", "(has '\\\\')"), ("a\tb", "control characters"), ("recovered.edits", "refuses"),
])
def test_bad_family_names(name: str, problem: str) -> None:
    found = family_name_problem(name)
    assert found is not None and problem in found
    assert family_name_problem("d") is None and family_name_problem("cf-1.x") is None


@pytest.mark.parametrize(("name", "problem"), [
    ("", "must not be empty"), ("  ", "must not be empty"), (" r", "start or end with a space"),
    ("r\n", "start or end with a space"), ("r\x00s", "control characters"),
])
def test_bad_route_names(name: str, problem: str) -> None:
    found = route_name_problem(name)
    assert found is not None and problem in found
    assert route_name_problem("logs_by_host") is None and route_name_problem("orders by seller") is None


# -- as load_settings applies them ----------------------------------------------------------------


def test_route_names_topics_and_tables_are_checked() -> None:
    msg = problems(routes=[route(topic=""), route(name="", table="bad name!"), route(name="r3", table="")])
    assert "routes.0 (route 'r1').topic: a Kafka topic name must not be empty (got '')" in msg
    assert "routes.1 (route '').name: a route name must not be empty (got '')" in msg
    assert ("routes.1 (route '').table: an HBase table name may only contain ASCII letters, digits, '_', '.' "
            "and '-' (not ' !') (got 'bad name!')") in msg
    assert "routes.2 (route 'r3').table: an HBase table name must not be empty (got '')" in msg


def test_table_names_are_checked_and_unique() -> None:
    msg = problems(tables=[{"name": ""}, {"name": "t", "families": {}}, {"name": "u", "families": {"a:b": {}}}])
    assert "tables.0 (table '').name: an HBase table name must not be empty (got '')" in msg
    assert "tables.1 (table 't').families: a table needs at least one column family" in msg
    assert "tables.2 (table 'u').families: family 'a:b': a column family name must not contain ':'" in msg
    msg = problems(tables=[{"name": "t"}, {"name": "u"}, {"name": "t"}, {"name": "u"}])
    assert msg.endswith("(top level): table names must be unique; repeated: t, u")


def test_route_names_are_unique() -> None:
    msg = problems(routes=[route(), route(topic="other")])
    assert msg.endswith("(top level): route names must be unique; repeated: r1")


def test_route_column_families_are_checked() -> None:
    msg = problems(routes=[route(columns={".d:a": "a"})])
    assert msg.endswith("routes.0 (route 'r1'): column '.d:a': a column family name must not start with '.'")


def test_dead_letter_topic_is_checked() -> None:
    msg = problems(kafka={"dead_letter_topic": ""})
    assert "kafka.dead_letter_topic: a Kafka topic name must not be empty (got '')" in msg
    msg = problems(kafka={"dead_letter_topic": "events"}, routes=[route()])
    assert "kafka.dead_letter_topic 'events' is also the topic of route(s) r1" in msg


def test_table_prefix_is_checked_with_every_table_it_is_prepended_to() -> None:
    assert load_settings(None, hbase={"table_prefix": "dev:"}, routes=[route()]).hbase.table_prefix == "dev:"
    msg = problems(hbase={"table_prefix": "a b"})
    assert "hbase.table_prefix: it cannot start an HBase table name" in msg
    msg = problems(hbase={"table_prefix": "dev:"}, routes=[route(table="ns:t")], tables=[{"name": "ns:u"}])
    assert ("table 'ns:u' with hbase.table_prefix 'dev:' is 'dev:ns:u' in HBase: an HBase table name has at most "
            "one ':'") in msg
    assert "table 'ns:t' with hbase.table_prefix 'dev:' is 'dev:ns:t'" in msg
    msg = problems(hbase={"table_prefix": "zoo"}, routes=[route(table="keeper")])
    assert "is 'zookeeper' in HBase: HBase refuses the table name 'zookeeper'" in msg


def test_names_from_a_file(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[[tables]]\nname = "bad name!"\n')
    with pytest.raises(ConfigError, match=r"in .*c\.toml:\n  tables\.0 \(table 'bad name!'\)\.name: an HBase table"):
        load_settings(f)


def test_an_undeclared_table_with_a_bad_name_is_a_config_error() -> None:
    settings = load_settings()
    assert settings.table("t").families.keys() == {"d"}
    with pytest.raises(ConfigError, match=r"table 'bad name!': an HBase table name may only contain"):
        settings.table("bad name!")
