"""Failures and time limits: one failing range fails the query at once, naming the range; a timeout
names the range waited on; nothing waits on a hung range."""

from __future__ import annotations

import anyio
import pytest

from pipeline.errors import HBaseUnavailable
from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.reader import QueryError, Reader
from pipeline.settings import RouteSpec

from .test_reader_fake import FakeHBase

SPEC = "[salt(host, 8)][host][_][long(ts)]"
ROUTE = RouteSpec(name="r", topic="t", table="t", rowkey=SPEC, columns={"d:h": "host"})
ROWKEY = compile_rowkey(SPEC)
ROWS = [(ROWKEY.build({"host": f"h{h}", "ts": t}), {b"d:h": b"x"}) for h in range(20)
        for t in range(50)]


async def test_a_failing_range_fails_the_query_promptly_while_others_hang() -> None:
    # salt=3 fails on its first page; every other range hangs forever after its first page
    def fail(start: bytes, stop: bytes, reverse: bool) -> bool:
        return start[:1] == b"\x03"

    def hang(start: bytes, stop: bytes, reverse: bool) -> bool:
        return len(start) > 1  # a continuation page (start = last key + 0x00)

    hb = FakeHBase(ROWS, fail=fail, hang=hang)
    async with Reader(hb, page_size=5, first_page=5) as reader:
        scan = reader.scan(ROUTE)
        with anyio.fail_after(5), pytest.raises(QueryError) as info:
            await scan.collect()
    err = info.value
    assert err.range_label == "salt=3"
    assert "salt=3" in str(err) and "'t'" in str(err)
    assert isinstance(err.__cause__, HBaseUnavailable)
    assert scan.stats.outcome == "failed"
    assert hb.in_flight == 0  # leaving the reader cancelled the hung pages
    assert reader.statistics().queries_failed == 1


async def test_failure_after_rows_were_returned() -> None:
    pages: dict[bytes, int] = {}

    def fail(start: bytes, stop: bytes, reverse: bool) -> bool:
        salt = start[:1]
        pages[salt] = pages.get(salt, 0) + 1
        return salt == b"\x05" and pages[salt] == 3

    hb = FakeHBase(ROWS, fail=fail)
    got = 0
    async with Reader(hb, page_size=4, first_page=4) as reader:
        with anyio.fail_after(5), pytest.raises(QueryError) as info:  # noqa: PT012 (fails mid-iteration)
            async for _ in reader.scan(ROUTE):
                got += 1
    assert got > 0
    assert info.value.range_label == "salt=5"


async def test_timeout_names_the_range_waited_on() -> None:
    def hang(start: bytes, stop: bytes, reverse: bool) -> bool:
        return start[:1] == b"\x06"

    hb = FakeHBase(ROWS, hang=hang)
    # The merge takes the ranges' first pages in order, so it names the first range without a page
    # when the deadline passes: salt=6 only if salts 0-5 delivered theirs by then. Their one page
    # each comes in milliseconds, but a loaded machine once took over 0.2 s: 1 s leaves room.
    async with Reader(hb, timeout_s=1.0) as reader:
        scan = reader.scan(ROUTE)
        with anyio.fail_after(5), pytest.raises(QueryError) as info:
            await scan.collect()
    assert info.value.timed_out
    assert info.value.range_label == "salt=6"
    assert scan.stats.outcome == "timeout"
    assert hb.in_flight == 0


async def test_limit_stops_and_cancels_outstanding_scans() -> None:
    hb = FakeHBase(ROWS)
    async with Reader(hb, page_size=3, first_page=3) as reader:
        scan = reader.scan(ROUTE, limit=4)
        got = await scan.collect()
        assert len(got) == 4
        assert scan.stats.outcome == "limit"
        await anyio.sleep(0.05)
        calls = hb.calls
        await anyio.sleep(0.05)
        assert hb.calls == calls
    assert hb.in_flight == 0
    # each of the 8 ranges stops at the limit: at most 4 rows each, never the whole bucket
    assert all(r.rows_scanned <= 4 for r in scan.stats.ranges)


async def test_scan_needs_an_entered_reader() -> None:
    reader = Reader(FakeHBase(ROWS))
    with pytest.raises(RuntimeError):
        await reader.scan(ROUTE).collect()


async def test_planning_errors_are_query_errors() -> None:
    async with Reader(FakeHBase(ROWS)) as reader:
        with pytest.raises(QueryError) as info:
            await reader.scan(ROUTE, where={"nope": 1}).collect()
    assert "nope" in str(info.value)
    spec = "[salt(host, 4)][host]"  # no time field
    route = RouteSpec(name="x", topic="t", table="t", rowkey=spec, columns={"d:h": "host"})
    async with Reader(FakeHBase()) as reader:
        with pytest.raises(QueryError, match="time field"):
            await reader.scan(route, newest_first=True).collect()
