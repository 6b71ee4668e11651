"""The fan-out reader against the real HBase: for random data and random queries on salted,
bucketed, reverse-time and hash-prefixed tables it returns exactly what a brute-force full scan +
filter + sort returns; limits, newest-first, empty buckets, single-scanner lookups and failing
ranges."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from connectors.hbase import HBaseClient
from devstack import LocalStack
from pipeline.errors import TableNotFound
from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.reader import QueryError, Reader, ReadRow, Scan
from pipeline.settings import HBaseClientKind
from tests.integration.reader_support import (
    DESIGNS,
    HOSTS,
    T0,
    create,
    load,
    mutation,
    route_of,
    settings_of,
)
from tests.reader_oracle import brute_force, brute_force_by_time

queries = st.fixed_dictionaries({
    "host": st.none() | st.sampled_from([*HOSTS, "nobody"]),
    "time_range": st.none() | st.tuples(st.integers(0, 40), st.integers(0, 40)).map(
        lambda t: (T0 + min(t), T0 + max(t))),  # reversed bounds are an error
    "newest_first": st.booleans(),
    "limit": st.none() | st.integers(0, 15),
    "page_size": st.integers(2, 50),
})


async def write_and_list(hb: HBaseClient, table: str, rowkey: Any, rows: set[tuple[str, int]]) -> list[bytes]:
    """Write ``rows`` (host, ts - T0) into ``table``; every key the table then holds."""
    if rows:
        await hb.write(table, [mutation(rowkey, table, h, T0 + t) for h, t in rows])
    return [k for k, _ in await hb.scan_page(table, limit=1_000_000)]


async def run_query(hb: HBaseClient, route: Any, page_size: int, processes: int,
                    **query: Any) -> tuple[Scan, list[ReadRow]]:
    """One query through a fresh reader (first pages of 3 rows): the scan and its rows."""
    async with Reader(hb, page_size=page_size, first_page=3, processes=processes) as reader:
        scan = reader.scan(route, **query)
        with anyio.fail_after(60):
            return scan, await scan.collect()


@pytest.mark.parametrize("design", list(DESIGNS))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 40)), max_size=30),
       query=queries, client=st.sampled_from(["thrift", "native"]))
def test_reader_equals_brute_force(stack: LocalStack, reader_tables: dict[str, str], design: str,
                                   rows: set[tuple[str, int]], query: dict[str, Any],
                                   client: HBaseClientKind) -> None:
    """Over the Thrift gateways and over HBase's RPC (``client = "native"``: writes and the reader's
    scans), drawn per example."""
    d = DESIGNS[design]
    table = reader_tables[design]
    rowkey = compile_rowkey(d.spec)
    route = route_of(design, table, d.spec)
    where = {"host": query["host"]} if query["host"] is not None else {}
    newest, limit, trange = query["newest_first"], query["limit"], query["time_range"]

    async def run() -> None:
        async with HBaseClient(settings_of(stack, client)) as hb:
            everything = await write_and_list(hb, table, rowkey, rows)
            want = brute_force(rowkey, everything, where, trange, newest and not d.time_desc,
                               limit, d.per_region and not where and limit is None)
            scan, got = await run_query(hb, route, query["page_size"], 0, where=where, time_range=trange,
                                        newest_first=newest, limit=limit)
        assert [r.key for r in got] == want
        for r in got:
            host, ts = r.fields["host"], r.fields["ts"]
            assert r.columns == {"d:h": host, "d:n": ts - T0, "d:j": {"host": host, "ts": ts}}
        assert scan.plan is not None
        if scan.plan.ranges:  # an empty time range plans nothing
            assert scan.plan.per_region is (d.per_region and not where)
        assert scan.plan.reverse is (newest and not d.time_desc)
        assert scan.stats.rows_returned == len(want)

    anyio.run(run)


@pytest.mark.parametrize("design", list(DESIGNS))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 40)), max_size=30),
       query=queries, limit=st.integers(1, 12), processes=st.sampled_from([0, 0, 2]))
def test_by_time_equals_brute_force(stack: LocalStack, reader_tables: dict[str, str], design: str,
                                    rows: set[tuple[str, int]], query: dict[str, Any], limit: int,
                                    processes: int) -> None:
    """``by_time``: the newest (or oldest) ``limit`` rows by time across every host, on entity-led
    designs (walked host by host) as on time-led ones, in threads and in worker processes."""
    d = DESIGNS[design]
    table = reader_tables[design]
    rowkey = compile_rowkey(d.spec)
    route = route_of(design, table, d.spec)
    where = {"host": query["host"]} if query["host"] is not None else {}
    newest, trange = query["newest_first"], query["time_range"]

    async def run() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            everything = await write_and_list(hb, table, rowkey, rows)
            want = brute_force_by_time(rowkey, everything, where, trange, newest, limit)
            scan, got = await run_query(hb, route, query["page_size"], processes, where=where,
                                        time_range=trange, newest_first=newest, limit=limit, by_time=True)
        assert [r.key for r in got] == want
        assert scan.plan is not None and scan.plan.order == "by-time"
        walked = sum(r.entities for r in scan.stats.ranges)
        if design != "bucketed" and not where:  # entity-led: walked host by host
            assert scan.plan.entity == ("host",)
            if scan.plan.ranges:  # each host probed once, however many rows it has
                assert walked == len({rowkey.decode(k)["host"] for k in everything})
        else:  # time-led, or one host: ranges read in time order, no walk
            assert scan.plan.entity == () and walked == 0

    anyio.run(run)


@pytest.mark.parametrize("design", list(DESIGNS))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.sets(st.tuples(st.sampled_from(HOSTS), st.integers(0, 40)), max_size=30),
       query=queries, span=st.tuples(st.integers(0, 40), st.integers(0, 40)),
       processes=st.sampled_from([0, 0, 2]))
def test_skip_scan_equals_brute_force(stack: LocalStack, reader_tables: dict[str, str], design: str,
                                      rows: set[tuple[str, int]], query: dict[str, Any],
                                      span: tuple[int, int], processes: int) -> None:
    """``skip_scan``: a time range read host by host (only each host's rows in the range) gives
    exactly the brute-force answer, in the logical order, on every design; entity-led ones are
    walked, each host probed once."""
    d = DESIGNS[design]
    table = reader_tables[design]
    rowkey = compile_rowkey(d.spec)
    route = route_of(design, table, d.spec)
    where = {"host": query["host"]} if query["host"] is not None else {}
    trange = (T0 + min(span), T0 + max(span))
    newest = query["newest_first"] and d.time_desc  # a skip scan reads forward
    limit = query["limit"]

    async def run() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            everything = await write_and_list(hb, table, rowkey, rows)
            want = brute_force(rowkey, everything, where, trange, False, limit,
                               d.per_region and not where and limit is None)
            scan, got = await run_query(hb, route, query["page_size"], processes, where=where,
                                        time_range=trange, newest_first=newest, limit=limit, skip_scan=True)
        assert [r.key for r in got] == want
        assert scan.plan is not None
        walked = sum(r.entities for r in scan.stats.ranges)
        if not scan.plan.ranges:  # an empty time range plans nothing
            assert walked == 0
        elif design != "bucketed" and not where:
            assert scan.plan.entity == ("host",)
            if limit is None:  # every host probed once, whatever its rows in the range
                assert walked == len({rowkey.decode(k)["host"] for k in everything})
                # only the rows in the range are read, plus each host's probe (first_page rows)
                assert scan.stats.rows_scanned <= len(want) + 3 * walked
        else:  # time-led, or one host: nothing to skip
            assert scan.plan.bounds is None and walked == 0

    anyio.run(run)


async def test_newest_first_with_reverse_timestamps_scans_forward(hbase: HBaseClient,
                                                                 unique: str) -> None:
    spec = "[salt(host, 4)][host][_][reverse_ts(ts)]"
    table, rowkey = f"t_reader_rts_{unique}", compile_rowkey(spec)
    await create(hbase, table, rowkey, 4)
    try:
        await load(hbase, table, rowkey, HOSTS, 40)
        async with Reader(hbase) as reader:
            scan = reader.scan(route_of("r", table, spec), where={"host": "web1"},
                               newest_first=True, limit=10)
            got = await scan.collect()
        assert [r.fields["ts"] - T0 for r in got] == list(range(39, 29, -1))
        assert scan.plan is not None and not scan.plan.reverse  # forward is already newest first
        # the salt is computable from host: one range, one scanner, only the limit scanned
        assert scan.stats.ranges_planned == 1
        assert scan.stats.scanners_opened == 1
        assert scan.stats.rows_scanned == 10
        assert {r.range_label for r in got} == {scan.plan.ranges[0].label}
    finally:
        await hbase.delete_table(table)


async def test_limit_is_pushed_down_and_empty_buckets_are_fine(hbase: HBaseClient,
                                                              unique: str) -> None:
    spec = "[salt(host, 16)][host][_][long(ts)]"
    table, rowkey = f"t_reader_limit_{unique}", compile_rowkey(spec)
    await create(hbase, table, rowkey, 16)
    try:
        await load(hbase, table, rowkey, ["web1", "web12"], 300)  # 14 buckets stay empty
        route = route_of("r", table, spec)
        async with Reader(hbase, page_size=100) as reader:
            everything = await reader.scan(route).collect()
            assert len(everything) == 600
            # logical order is byte order without the salt: "web12_" < "web1_" ("2" < "_")
            assert [r.fields["host"] for r in everything] == ["web12"] * 300 + ["web1"] * 300
            newest = reader.scan(route, newest_first=True, limit=7)
            got = await newest.collect()
        assert [(r.fields["host"], r.fields["ts"] - T0) for r in got] == [
            ("web1", t) for t in range(299, 292, -1)]
        assert newest.stats.ranges_planned == 16
        assert newest.stats.outcome == "limit"
        # no range returns more than the limit: 16 ranges x 7 rows at most, not 600
        assert newest.stats.rows_scanned <= 2 * 7
        assert all(r.rows_scanned <= 7 for r in newest.stats.ranges)
    finally:
        await hbase.delete_table(table)


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
async def test_disabled_table_mid_query_fails_naming_the_range(hbase: HBaseClient, unique: str,
                                                               processes: int) -> None:
    spec = "[salt(host, 8)][host][_][long(ts)]"
    table, rowkey = f"t_reader_fail_{unique}", compile_rowkey(spec)
    await create(hbase, table, rowkey, 8)
    try:
        await load(hbase, table, rowkey, [f"h{i}" for i in range(16)], 100)
        async with Reader(hbase, page_size=10, first_page=10, read_ahead=1,
                          processes=processes) as reader:
            scan = reader.scan(route_of("r", table, spec))
            with anyio.fail_after(60), pytest.raises(QueryError) as info:  # noqa: PT012 (fails mid-iteration)
                async with scan:
                    first = await scan.__anext__()
                    assert first.fields["host"] == "h0"
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(hbase.disable_table, table)
                    async for _ in scan:
                        pass
        err = info.value
        assert err.range_label is not None and err.range_label.startswith("salt=")
        assert err.range_label in str(err) and table in str(err)
        assert err.__cause__ is not None
        assert scan.stats.outcome == "failed"
    finally:
        await hbase.enable_table(table)
        await hbase.delete_table(table)


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
async def test_missing_table_fails_saying_so(hbase: HBaseClient, unique: str, processes: int) -> None:
    spec = "[salt(host, 8)][host][_][long(ts)]"
    table = f"t_reader_missing_{unique}"
    async with Reader(hbase, processes=processes) as reader:
        queries: list[dict[str, Any]] = [{}, {"where": {"host": "h1"}, "limit": 5}]  # 8 ranges; one range, one page
        for kwargs in queries:
            with anyio.fail_after(30), pytest.raises(QueryError, match=rf"{table}.*table does not exist") as info:
                await reader.scan(route_of("r", table, spec), **kwargs).collect()
            assert isinstance(info.value.__cause__, TableNotFound)


async def test_tiny_timeout_fails_naming_a_range(hbase: HBaseClient, unique: str) -> None:
    spec = "[salt(host, 8)][host][_][long(ts)]"
    table, rowkey = f"t_reader_timeout_{unique}", compile_rowkey(spec)
    await create(hbase, table, rowkey, 8)
    try:
        await load(hbase, table, rowkey, [f"h{i}" for i in range(8)], 50)
        async with Reader(hbase, timeout_s=0.001) as reader:
            with anyio.fail_after(30), pytest.raises(QueryError) as info:
                await reader.scan(route_of("r", table, spec)).collect()
        assert info.value.timed_out
        assert info.value.range_label is not None and info.value.range_label.startswith("salt=")
    finally:
        await hbase.delete_table(table)


def test_scan_command_explain_and_jsonl(stack: LocalStack, tmp_path: Path) -> None:
    from pipeline.cli import app

    spec = "[salt(host, 4)][host][_][long(ts)]"
    table, rowkey = f"t_reader_cli_{uuid.uuid4().hex[:8]}", compile_rowkey(spec)

    async def setup() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            await create(hb, table, rowkey, 4)
            await load(hb, table, rowkey, HOSTS, 5)

    async def teardown() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            await hb.delete_table(table)

    anyio.run(setup)
    try:
        config = tmp_path / "c.toml"
        config.write_text(
            f"[hbase]\nport = {stack.settings.thrift_port}\n"
            f"thrift2_port = {stack.settings.thrift2_port}\n\n"
            f'[[routes]]\nname = "m"\ntopic = "t"\ntable = "{table}"\nrowkey = "{spec}"\n'
            'columns = { "d:h" = "host", "d:n" = { field = "n", encoding = "long" } }\n')
        runner = CliRunner()
        res = runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--explain"])
        assert res.exit_code == 0, res.output
        assert "fan-out over 4 ranges" in res.output and "salt=3:" in res.output
        res = runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--where",
                                  "host=web1", "--from", str(T0 + 1), "--to", str(T0 + 3),
                                  "--newest-first", "--format", "jsonl"])
        assert res.exit_code == 0, res.output
        lines = [orjson.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        assert [x["fields"]["ts"] - T0 for x in lines] == [2, 1]
        # d:j is not mapped by this route: it comes out raw, escaped like the HBase shell
        assert lines[0]["columns"] == {"d:h": "web1", "d:n": 2,
                                       "d:j": '{"host":"web1","ts":1700000000002}'}
        # the same rows, byte for byte, with pages fetched and decoded in worker processes
        full = [runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--format", "jsonl",
                                    *extra]) for extra in ([], ["--processes", "2"])]
        assert [r.exit_code for r in full] == [0, 0], [r.output for r in full]
        assert full[0].stdout == full[1].stdout and full[0].stdout.count("\n") == len(HOSTS) * 5
        # newest 3 by time across every host: all at T0 + 4, ties in descending key order (the
        # key of web1 is web1_..., after web12...)
        res = runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--by-time",
                                  "--newest-first", "--limit", "3", "--format", "jsonl"])
        assert res.exit_code == 0, res.output
        lines = [orjson.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
        assert [(x["fields"]["host"], x["fields"]["ts"] - T0) for x in lines] == [
            ("z9", 4), ("web1", 4), ("web12", 4)]
        assert f"{len(HOSTS)} entities walked" in " ".join(res.stderr.split())
        res = runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--by-time"])
        assert res.exit_code != 0 and "by_time needs a limit" in res.output
        # a time range read host by host: the same rows as the filtered scan of every row
        span = ["--from", str(T0 + 1), "--to", str(T0 + 3), "--format", "jsonl"]
        plain, skip = [runner.invoke(app, ["scan", "--config", str(config), "--route", "m", *span, *extra])
                       for extra in ([], ["--skip-scan"])]
        assert [plain.exit_code, skip.exit_code] == [0, 0], skip.output
        assert skip.stdout == plain.stdout and skip.stdout.count("\n") == len(HOSTS) * 2
        assert f"{len(HOSTS)} entities walked" in " ".join(skip.stderr.split())
        assert "skip scan: each range is walked entity by entity (host)" in " ".join(skip.stderr.split())
        res = runner.invoke(app, ["scan", "--config", str(config), "--route", "m", "--skip-scan"])
        assert res.exit_code != 0 and "skip_scan needs a time range" in res.output
    finally:
        anyio.run(teardown)
