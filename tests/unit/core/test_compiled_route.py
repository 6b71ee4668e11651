"""One compiled route, shared: the writer's router, the reader, table creation and the read path's
page decoder use the same compiled rowkey for a route, and a changed spec compiles anew."""

from __future__ import annotations

import pytest

from connectors.memory import MemoryHBase
from pipeline.core.routes.router import Router, compile_route
from pipeline.errors import ConfigError
from pipeline.rowkey.splits import split_points
from pipeline.runtime.admin.tables import plan_tables
from pipeline.runtime.read.reader import Reader
from pipeline.settings import load_settings

ROUTE = {"name": "r", "topic": "events", "table": "t", "rowkey": "[salt(id, 4)][id]", "columns": {"f:v": "v"}}


def test_every_side_shares_the_route_compiled_once() -> None:
    settings = load_settings(None, routes=[ROUTE], tables=[{"name": "t", "families": {"f": {}}}])
    spec = settings.routes[0]
    compiled = compile_route(spec)
    assert compile_route(spec) is compiled
    assert Router(settings.routes).routes[0] is compiled  # the writer
    assert Reader(MemoryHBase()).design(spec)[0] is compiled.rowkey  # the reader
    plan = plan_tables(settings)[0]  # table creation: split keys from the same design
    assert list(plan.split_keys) == split_points(compiled.rowkey, 4)


def test_a_changed_spec_is_compiled_anew() -> None:
    a = load_settings(None, routes=[ROUTE]).routes[0]
    b = load_settings(None, routes=[{**ROUTE, "rowkey": "[id]"}]).routes[0]
    assert compile_route(a) is not compile_route(b)
    assert compile_route(b).rowkey.spec == "[id]"


def test_a_plan_that_cannot_split_says_why() -> None:
    too_few = load_settings(None, routes=[ROUTE], tables=[{"name": "t", "families": {"f": {}}}])
    with pytest.raises(ConfigError, match=r"16 regions exceed the 4 values of salt\(id, 4\)"):
        plan_tables(too_few, regions=16)
    plain = load_settings(None, routes=[{**ROUTE, "rowkey": "[id]"}],
                          tables=[{"name": "t", "families": {"f": {}}}])
    with pytest.raises(ConfigError, match="no leading salt/hash/bucket segment"):
        plan_tables(plain, regions=4)
