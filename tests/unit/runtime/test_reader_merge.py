"""The reader against an in-memory twin: for random data and queries it returns exactly what a
brute-force scan + filter + sort returns, whatever the page size, read-ahead and concurrency."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.reader import Reader
from pipeline.settings import RouteSpec
from tests.reader_oracle import brute_force, brute_force_by_time

from .test_reader_fake import FakeHBase

# spec -> (time stored descending, per-region plan)
DESIGNS = {
    "[salt(host, 4)][host][_][long(ts)]": (False, False),
    "[salt(host, 4)][host][_][reverse_ts(ts)]": (True, False),
    "[mod(ts, 4)][long(ts)][host]": (False, False),
    "[md5(host, 4)][host][_][long(ts)]": (False, True),
}
HOSTS = ["a", "b", "web1", "web12", "z"]
SPLITS = [b"4", b"8", b"c"]


def route_for(spec: str) -> RouteSpec:
    return RouteSpec(name="r", topic="t", table="t", rowkey=spec,
                     columns={"d:v": {"field": "v", "encoding": "long"}, "d:h": "host"})


def cells(host: str, ts: int) -> dict[bytes, bytes]:
    return {b"d:v": ts.to_bytes(8, "big", signed=True), b"d:h": host.encode()}


queries = st.fixed_dictionaries({
    "host": st.none() | st.sampled_from([*HOSTS, "nobody"]),
    "time_range": st.none() | st.tuples(st.integers(0, 50), st.integers(0, 50)).map(
        lambda t: (min(t), max(t))),  # reversed bounds are an error (tests/unit/runtime/test_reader_args.py)
    "newest_first": st.booleans(),
    "limit": st.none() | st.integers(0, 12),
})
tuning = st.fixed_dictionaries({
    "page_size": st.integers(1, 5), "first_page": st.integers(1, 3),
    "read_ahead": st.integers(0, 2), "concurrency": st.integers(1, 3),
})


@pytest.mark.parametrize("spec", list(DESIGNS))
@settings(max_examples=60, deadline=None)
@given(rows=st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 50)), max_size=40),
       query=queries, tune=tuning)
def test_reader_equals_brute_force(spec: str, rows: set[tuple[str, int]], query: dict[str, Any],
                                   tune: dict[str, int]) -> None:
    time_desc, per_region = DESIGNS[spec]
    rowkey = compile_rowkey(spec)
    hb = FakeHBase([(rowkey.build({"host": h, "ts": t}), cells(h, t)) for h, t in rows],
                   splits=SPLITS)
    where = {"host": query["host"]} if query["host"] is not None else {}
    newest, limit, trange = query["newest_first"], query["limit"], query["time_range"]
    descending = newest and not time_desc
    table_order = per_region and not where and limit is None
    want = brute_force(rowkey, hb.keys, where, trange, descending, limit, table_order)

    async def run() -> None:
        async with Reader(hb, **tune) as reader:  # type: ignore[arg-type]
            scan = reader.scan(route_for(spec), where=where, time_range=trange,
                               newest_first=newest, limit=limit)
            got = await scan.collect()
        assert [r.key for r in got] == want
        for r in got:
            assert r.columns == {"d:v": r.fields["ts"], "d:h": r.fields["host"]}
        assert scan.stats.rows_returned == len(want)
        assert scan.stats.scanners_opened == hb.calls
        if limit is not None and scan.plan is not None and scan.plan.matches is None:
            # pushdown: an exact range never fetches more than the limit (+1 row reverse paging
            # overlap per page)
            for range_stats in scan.stats.ranges:
                assert range_stats.rows_scanned <= limit
        assert hb.in_flight == 0
        assert hb.max_in_flight <= tune["concurrency"]

    anyio.run(run)


@pytest.mark.parametrize("spec", [*DESIGNS, "[time_bucket(ts, 10)][long(ts)][host]"])
@settings(max_examples=60, deadline=None)
@given(rows=st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 50)), max_size=40),
       query=queries, limit=st.integers(1, 12), tune=tuning)
def test_by_time_equals_brute_force(spec: str, rows: set[tuple[str, int]], query: dict[str, Any],
                                    limit: int, tune: dict[str, int]) -> None:
    """by_time: the newest/oldest ``limit`` rows by (time, logical key) across every host; an
    entity-led walk reads at most ``limit`` rows of each host and probes each host once."""
    rowkey = compile_rowkey(spec)
    hb = FakeHBase([(rowkey.build({"host": h, "ts": t}), cells(h, t)) for h, t in rows],
                   splits=SPLITS)
    where = {"host": query["host"]} if query["host"] is not None else {}
    newest, trange = query["newest_first"], query["time_range"]
    want = brute_force_by_time(rowkey, hb.keys, where, trange, newest, limit)

    async def run() -> None:
        async with Reader(hb, **tune) as reader:  # type: ignore[arg-type]
            scan = reader.scan(route_for(spec), where=where, time_range=trange,
                               newest_first=newest, limit=limit, by_time=True)
            got = await scan.collect()
        assert [r.key for r in got] == want
        assert scan.stats.scanners_opened == hb.calls
        assert hb.in_flight == 0
        plan = scan.plan
        assert plan is not None and plan.order == "by-time"
        if plan.entity and plan.ranges:
            hosts = {h for h, _ in rows}
            assert sum(r.entities for r in scan.stats.ranges) == len(hosts)
            # probes (one row each) plus at most ``limit`` rows per host, and the reverse-paging
            # overlap of one row per page
            assert scan.stats.rows_scanned <= len(hosts) * (1 + limit) + hb.calls

    anyio.run(run)


def test_by_time_prunes_hosts_that_cannot_enter_the_top() -> None:
    """Once ``limit`` rows are kept, a host whose first row is older than all of them costs its
    probe and one page, not its rows: 50 hosts x 200 rows, newest 5 by time."""
    spec = "[salt(host, 4)][host][_][reverse_ts(ts)]"
    rowkey = compile_rowkey(spec)
    data = [(rowkey.build({"host": f"h{h:02d}", "ts": 1000 * h + t}), cells(f"h{h:02d}", 1000 * h + t))
            for h in range(50) for t in range(200)]
    hb = FakeHBase(data, splits=SPLITS)

    async def run() -> None:
        async with Reader(hb, page_size=100, first_page=5, read_ahead=0, concurrency=1) as reader:
            scan = reader.scan(route_for(spec), newest_first=True, limit=5, by_time=True)
            got = await scan.collect()
        assert [r.fields["ts"] for r in got] == [49_199 - i for i in range(5)]
        assert sum(r.entities for r in scan.stats.ranges) == 50
        assert scan.stats.rows_scanned <= 50 * (1 + 5)  # not 10,000
        # a forward walk reads a host's first rows with its probe: mostly one call per host
        assert scan.stats.scanners_opened < 2 * 50

    anyio.run(run)


async def test_salt_computable_from_where_opens_one_scanner() -> None:
    spec = "[salt(host, 16)][host][_][long(ts)]"
    rowkey = compile_rowkey(spec)
    hb = FakeHBase([(rowkey.build({"host": h, "ts": t}), cells(h, t)) for h in HOSTS
                    for t in range(30)])
    async with Reader(hb) as reader:
        scan = reader.scan(route_for(spec), where={"host": "web1"}, newest_first=True, limit=5)
        got = await scan.collect()
    assert [r.fields["ts"] for r in got] == [29, 28, 27, 26, 25]
    assert scan.stats.ranges_planned == 1
    assert scan.stats.scanners_opened == 1
    assert scan.stats.outcome == "limit"
    snap = scan.statistics()
    assert snap.rows_returned == 5 and snap is not scan.stats and snap.elapsed_s > 0


async def test_early_break_releases_the_scans() -> None:
    spec = "[salt(host, 8)][host][_][long(ts)]"
    rowkey = compile_rowkey(spec)
    hb = FakeHBase([(rowkey.build({"host": h, "ts": t}), cells(h, t)) for h in HOSTS
                    for t in range(200)])
    async with Reader(hb, page_size=10, first_page=10) as reader:
        scan = reader.scan(route_for(spec))
        async with scan:
            async for row in scan:
                if row.fields["ts"] == 3:
                    break
        assert scan.stats.outcome == "closed"
        await anyio.sleep(0.05)
        assert all(r.state in ("done", "cancelled") for r in scan.stats.ranges)
        calls = hb.calls
        await anyio.sleep(0.05)
        assert hb.calls == calls  # nothing keeps paging
    # bounded: 8 ranges x (current + read-ahead) pages, not the whole table
    assert scan.stats.rows_scanned <= 8 * 3 * 10
    assert reader.statistics().queries_active == 0


async def test_batches_yield_the_rows_of_row_iteration_once() -> None:
    spec = "[salt(host, 4)][host][_][long(ts)]"
    rowkey = compile_rowkey(spec)
    hb = FakeHBase([(rowkey.build({"host": h, "ts": t}), cells(h, t)) for h in HOSTS
                    for t in range(40)])
    async with Reader(hb, page_size=7, first_page=3) as reader:
        want = [r.key for r in await reader.scan(route_for(spec), limit=150).collect()]
        scan = reader.scan(route_for(spec), limit=150)
        async with scan:
            first = [await scan.__anext__(), await scan.__anext__()]  # two rows one by one
            batches = [batch async for batch in scan.batches()]
    assert [r.key for r in first] + [r.key for b in batches for r in b] == want
    assert len(want) == 150 and all(batches)
    # a batch mixes ranges; every row keeps the label of the range it came from
    assert any(len({r.range_label for r in b}) > 1 for b in batches)
    assert all(r.range_label == f"salt={r.key[0]}" for b in batches for r in b)
    assert scan.stats.rows_returned == 150 and scan.stats.outcome == "limit"
