"""Pure helpers of the reader: reverse bounds, region clipping, the newest-first rule, explain
output, cell decoding and the scan command's argument parsing."""

from __future__ import annotations

import orjson
import pytest

from connectors.hbase import RegionInfo
from pipeline.cli.scan import parse_time, parse_where
from pipeline.errors import ConfigError
from pipeline.rowkey import compile_rowkey
from pipeline.rowkey.codecs import prefix_successor
from pipeline.rowkey.errors import PlanError
from pipeline.runtime.read.columns import CellDecodeError, compile_columns, decode_long
from pipeline.runtime.read.errors import QueryError
from pipeline.runtime.read.plan import (
    ScanRange,
    clip_to_regions,
    entity_fields,
    explain_lines,
    time_descending,
)
from pipeline.runtime.read.reader import Reader, reverse_lower_bound
from pipeline.settings import RouteSpec

from .test_reader_fake import FakeHBase


@pytest.mark.parametrize(("start", "bound"), [
    (b"", b""), (b"\x00", b""), (b"ab\x00", b"ab"), (b"\x05", b"\x04" + b"\xff" * 16),
])
def test_reverse_lower_bound(start: bytes, bound: bytes) -> None:
    assert reverse_lower_bound(start) == bound
    assert bound < start or not start


def region(start: bytes, end: bytes) -> RegionInfo:
    return RegionInfo("t", start, end, "rs", 1, 0, "n")


def test_clip_to_regions() -> None:
    regions = [region(b"", b"4"), region(b"4", b"8"), region(b"8", b"")]
    whole = clip_to_regions([ScanRange(b"", b"", "all")], regions)
    assert [(r.start, r.stop) for r in whole] == [(b"", b"4"), (b"4", b"8"), (b"8", b"")]
    assert whole[1].label.startswith("region 2/3")
    part = clip_to_regions([ScanRange(b"5", b"9", "x")], regions)
    assert [(r.start, r.stop) for r in part] == [(b"5", b"8"), (b"8", b"9")]
    assert clip_to_regions([ScanRange(b"5", b"6", "x")], regions)[0].stop == b"6"


@pytest.mark.parametrize(("spec", "desc"), [
    ("[salt(host, 4)][host][_][long(ts)]", False),
    ("[salt(host, 4)][host][_][reverse_ts(ts)]", True),
    ("[host][_][Long.MAX_VALUE - ts]", True),
    ("[host][_][long(ts, desc)]", True),
    ("[mod(ts, 8)][long(ts)][host]", False),
])
def test_newest_first_direction_rule(spec: str, desc: bool) -> None:
    rk = compile_rowkey(spec)
    assert time_descending(rk, rk.time_field) is desc


async def test_explain_per_region_plan() -> None:
    spec = "[md5(user, 4)][user][_][long(ts)]"
    route = RouteSpec(name="r", topic="t", table="t", rowkey=spec, columns={"d:u": "user"})
    async with Reader(FakeHBase(splits=[b"4", b"8"])) as reader:
        plan = await reader.plan(route, time_range=(0, 10), newest_first=True, limit=5)
        text = "\n".join(explain_lines(plan))
        assert plan.per_region and len(plan.ranges) == 3 and plan.reverse
        assert "per region (3 region range(s))" in text
        assert "filtered client-side" in text
        assert "first 5 rows in logical order" in text
        one = await reader.plan(route, where={"user": "u1"})
        assert not one.per_region and len(one.ranges) == 1
        assert "salt/bucket computed from the query" in "\n".join(explain_lines(one))


def test_columns_decode_by_route_mapping() -> None:
    route = RouteSpec(name="r", topic="t", table="t", rowkey="[a]", columns={
        "d:t": {"field": "t"}, "d:j": {"field": "j", "encoding": "json"},
        "d:n": {"field": "n", "encoding": "long"}})
    decode = compile_columns(route)
    cells = {b"d:t": "é".encode(), b"d:j": orjson.dumps({"a": [1]}),
             b"d:n": (-5).to_bytes(8, "big", signed=True), b"d:other": b"\x00"}
    assert decode(cells) == {"d:t": "é", "d:j": {"a": [1]}, "d:n": -5, "d:other": b"\x00"}
    with pytest.raises(CellDecodeError, match="d:n"):
        decode({b"d:n": b"\x01"})
    with pytest.raises(ValueError, match="expected 8 bytes, got 3"):
        decode_long(b"123")


def test_tally_counter_sums_the_family() -> None:
    route = RouteSpec(name="r", topic="t", table="t", rowkey="[a]",
                      counter={"column": "c:n", "mode": "tally"})
    decode = compile_columns(route)
    assert decode({b"c:e1": (2).to_bytes(8, "big"), b"c:e2": b"3"}) == {"c:n": 5}


def test_parse_time_and_where() -> None:
    assert parse_time("1700000000000", "--from") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z", "--from") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20", "--from") == 1_700_000_000_000
    with pytest.raises(ConfigError, match="--to"):
        parse_time("yesterday", "--to")
    rk = compile_rowkey("[salt(host, 4)][host][_][dec(code, 3)][long(ts)]")
    assert parse_where(["host=007", "code=7", "ts=12"], rk) == {"host": "007", "code": 7, "ts": 12}
    with pytest.raises(ConfigError, match="not a key field"):
        parse_where(["nope=1"], rk)
    with pytest.raises(ConfigError, match="numeric"):
        parse_where(["ts=abc"], rk)


@pytest.mark.parametrize(("spec", "before"), [
    ("[salt(host, 4)][host][_][long(ts)]", ("host",)),
    ("[rpad(host, '_', 8)][rpad(event, '_', 12)][reverse_ts(ts)]", ("host", "event")),
    ("[mod(ts, 8)][long(ts)][host]", ()),
    ("[md5(host, 4)][host][_][long(ts)]", ("host",)),
    ("[time_bucket(ts, 3600)][host][long(ts)]", ("host",)),  # a bucket orders hours, not rows
    ("[long(ts)][host]", ()),
])
def test_fields_ordered_before_time(spec: str, before: tuple[str, ...]) -> None:
    assert compile_rowkey(spec).ordered_before_time("ts") == before


async def test_explain_says_when_newest_first_is_per_entity() -> None:
    spec = "[salt(host, 4)][host][_][reverse_ts(ts)]"
    route = RouteSpec(name="r", topic="t", table="t", rowkey=spec, columns={"d:h": "host"})
    async with Reader(FakeHBase()) as reader:
        across = "\n".join(explain_lines(await reader.plan(route, newest_first=True, limit=5)))
        assert "note: newest first is per (host)" in across and "not by time" in across
        assert "key order: key order" not in across
        one = "\n".join(explain_lines(await reader.plan(route, where={"host": "a"}, newest_first=True)))
        assert "newest first is per" not in one
        oldest = "\n".join(explain_lines(await reader.plan(route)))
        assert "newest first is per" not in oldest


@pytest.mark.parametrize(("spec", "entity"), [
    ("[salt(host, 4)][host][_][reverse_ts(ts)]", ("host",)),
    ("[salt(host, 4)][host][_][metric][_][long(ts)]", ("host", "metric")),
    ("[md5(user, 4)][host][_][long(ts)]", ("user", "host")),  # the hash's input names the run too
    ("[mod(ts, 8)][long(ts)][host]", ()),
    ("[long(ts)][host]", ()),
    ("[time_bucket(ts, 3600)][long(ts)][host]", ()),  # hour, then time: still time order
    ("[host][_][time_bucket(ts, 3600)][long(ts)]", ("host",)),
])
def test_entity_fields(spec: str, entity: tuple[str, ...]) -> None:
    assert entity_fields(compile_rowkey(spec), "ts") == entity


@pytest.mark.parametrize(("spec", "text"), [
    ("[time_bucket(ts, 3600)][host][long(ts)]", r"time bucket time_bucket\(ts, 3600\) comes before host"),
    ("[host][_][md5(ts, 4)]", "stores 'ts' in order"),
])
def test_entity_fields_refuses_designs_it_cannot_walk(spec: str, text: str) -> None:
    with pytest.raises(PlanError, match=text):
        entity_fields(compile_rowkey(spec), "ts")


async def test_by_time_plan_explain_and_errors() -> None:
    spec = "[salt(host, 4)][host][_][reverse_ts(ts)]"
    route = RouteSpec(name="r", topic="t", table="t", rowkey=spec, columns={"d:h": "host"})
    async with Reader(FakeHBase()) as reader:
        newest = await reader.plan(route, newest_first=True, limit=5, by_time=True)
        assert newest.order == "by-time" and newest.entity == ("host",) and newest.bounds is not None
        assert not newest.reverse and newest.descending  # time stored descending: forward is newest
        text = "\n".join(explain_lines(newest))
        assert "by time: yes" in text and "walk: entity by entity, an entity being one (host)" in text
        assert "the newest 5 rows by ts across the query" in text
        assert "newest first is per" not in text  # that note is for the logical order
        oldest = await reader.plan(route, limit=5, by_time=True)
        assert oldest.reverse and not oldest.descending  # oldest of each host: its end, scanned back
        one = await reader.plan(route, where={"host": "a"}, newest_first=True, limit=5, by_time=True)
        assert one.entity == () and one.bounds is None and len(one.ranges) == 1
        with pytest.raises(QueryError, match="by_time needs a limit"):
            await reader.plan(route, by_time=True)
        untimed = RouteSpec(name="u", topic="t", table="t", rowkey="[salt(host, 4)][host]",
                            columns={"d:h": "host"})
        with pytest.raises(QueryError, match="by_time needs a time field"):
            await reader.plan(untimed, limit=5, by_time=True)
        with pytest.raises(TypeError, match="by_time must be a bool"):
            reader.scan(route, limit=5, by_time="yes")  # type: ignore[arg-type]


async def test_skip_scan_plan_explain_and_errors() -> None:
    spec = "[salt(host, 4)][host][_][long(ts)]"
    route = RouteSpec(name="r", topic="t", table="t", rowkey=spec, columns={"d:h": "host"})
    async with Reader(FakeHBase()) as reader:
        plan = await reader.plan(route, time_range=(10, 20), skip_scan=True)
        assert plan.order == "logical" and plan.entity == ("host",) and plan.bounds is not None
        assert len(plan.ranges) == 4 and plan.matches is not None and not plan.reverse
        text = "\n".join(explain_lines(plan))
        assert "walk: skip scan, entity by entity, an entity being one (host)" in text
        assert "only each one's rows in the time range" in text
        skip_to, parts = plan.bounds(compile_rowkey(spec).build({"host": "web1", "ts": 15}))
        assert len(parts) == 1 and skip_to == prefix_successor(parts[0][0][:-8])  # the host's end
        one = await reader.plan(route, where={"host": "a"}, time_range=(10, 20), skip_scan=True)
        assert one.bounds is None and "not needed, where gives the whole entity (host)" in one.notes[-1]
        timeled = RouteSpec(name="b", topic="t", table="t", rowkey="[mod(ts, 4)][long(ts)][host]",
                            columns={"d:h": "host"})
        led = await reader.plan(timeled, time_range=(10, 20), skip_scan=True)
        assert led.bounds is None and "not needed, the key leads with the time" in led.notes[-1]
        with pytest.raises(QueryError, match="skip_scan needs a time range"):
            await reader.plan(route, skip_scan=True)
        untimed = route.model_copy(update={"rowkey": "[salt(host, 4)][host]"})
        with pytest.raises(QueryError, match="skip_scan needs a time field"):
            await reader.plan(untimed, time_range=(10, 20), skip_scan=True)
        with pytest.raises(QueryError, match="skip_scan with by_time"):
            await reader.plan(route, time_range=(10, 20), limit=3, by_time=True, skip_scan=True)
        with pytest.raises(QueryError, match="reads it backward"):
            await reader.plan(route, time_range=(10, 20), newest_first=True, skip_scan=True)
        reverse = route.model_copy(update={"rowkey": "[salt(host, 4)][host][_][reverse_ts(ts)]"})
        assert (await reader.plan(reverse, time_range=(10, 20), newest_first=True, skip_scan=True)).bounds
        bucketed = route.model_copy(update={"rowkey": "[time_bucket(ts, 3600)][host][long(ts)]"})
        with pytest.raises(QueryError, match="a skip scan cannot walk"):
            await reader.plan(bucketed, time_range=(10, 20), skip_scan=True)
        with pytest.raises(TypeError, match="skip_scan must be a bool"):
            reader.scan(route, time_range=(10, 20), skip_scan=1)  # type: ignore[arg-type]
