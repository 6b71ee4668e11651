"""The fan-out reader with pages fetched and decoded in worker processes (``Reader(processes=N)``),
against the real HBase: random queries on every design return exactly the brute-force answer and
exactly what the thread path returns (keys, decoded fields and columns, range labels); an
undecodable row fails the query naming it; an early stop leaves nothing running. (A range failing
mid-query is tested in both modes in test_reader.py.)"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from connectors.hbase import HBaseClient
from devstack import LocalStack
from pipeline.core.model import Mutation, MutationKind
from pipeline.rowkey import RowKey, compile_rowkey
from pipeline.runtime.read.reader import QueryError, Reader
from pipeline.settings import HBaseSettings
from tests.integration.reader_support import (
    DESIGNS,
    HOSTS,
    ORIGIN,
    T0,
    create,
    load,
    mutation,
    route_of,
    settings_of,
)
from tests.reader_oracle import brute_force


def random_query(rnd: random.Random) -> dict[str, Any]:
    lo, hi = sorted((rnd.randint(0, 40), rnd.randint(0, 40)))  # reversed bounds are an error
    return {"host": rnd.choice([None, None, *HOSTS, "nobody"]),
            "time_range": rnd.choice([None, (T0 + lo, T0 + hi)]),
            "newest_first": rnd.random() < 0.5,
            "limit": rnd.choice([None, None, 0, 1, rnd.randint(2, 30)]),
            "page_size": rnd.randint(2, 50)}


@pytest.mark.parametrize("design", list(DESIGNS))
def test_processes_equal_brute_force_and_threads(stack: LocalStack, reader_tables: dict[str, str],
                                                 design: str) -> None:
    d, table = DESIGNS[design], reader_tables[design]
    rowkey = compile_rowkey(d.spec)
    route = route_of(design, table, d.spec)
    rnd = random.Random(f"processes-{design}")
    rows = {(rnd.choice(HOSTS), rnd.randint(0, 40)) for _ in range(60)}

    async def run() -> None:
        async with HBaseClient(settings_of(stack)) as hb:
            await hb.write(table, [mutation(rowkey, table, h, T0 + t) for h, t in rows])
            everything = [k for k, _ in await hb.scan_page(table, limit=1_000_000)]
            async with Reader(hb, processes=2, first_page=3) as procs, Reader(hb, first_page=3) as threads:
                for _ in range(25):
                    q = random_query(rnd)
                    where = {"host": q["host"]} if q["host"] is not None else {}
                    want = brute_force(rowkey, everything, where, q["time_range"],
                                       q["newest_first"] and not d.time_desc, q["limit"],
                                       d.per_region and not where and q["limit"] is None)
                    args: dict[str, Any] = {"where": where, "time_range": q["time_range"],
                                            "newest_first": q["newest_first"], "limit": q["limit"]}
                    procs.page_size = threads.page_size = q["page_size"]
                    with anyio.fail_after(60):
                        got = await procs.scan(route, **args).collect()
                        same = await threads.scan(route, **args).collect()
                    assert [r.key for r in got] == want, q
                    assert got == same, q  # fields, columns and range labels too
                    assert all(type(r) is type(same[0]) for r in got)

    anyio.run(run)


@asynccontextmanager
async def salted_table(hbase: HBaseClient, name: str, buckets: int, hosts: list[str], n: int
                       ) -> AsyncIterator[tuple[str, str, RowKey]]:
    """A table of ``[salt(host, buckets)][host][_][long(ts)]`` with ``n`` rows per host, dropped
    afterwards: ``(table, spec, rowkey)``."""
    spec = f"[salt(host, {buckets})][host][_][long(ts)]"
    rowkey = compile_rowkey(spec)
    await create(hbase, name, rowkey, buckets)
    try:
        await load(hbase, name, rowkey, hosts, n)
        yield name, spec, rowkey
    finally:
        await hbase.delete_table(name)


async def test_processes_undecodable_row_is_named(hbase: HBaseClient, unique: str) -> None:
    async with salted_table(hbase, f"t_reader_pbad_{unique}", 4, ["web1"], 20) as (table, spec, rowkey):
        bad = rowkey.build({"host": "web1", "ts": T0 + 7})
        await hbase.write(table, [Mutation(table, bad, MutationKind.PUT, {b"d:n": b"xyz"}, None, ORIGIN)])
        async with Reader(hbase, processes=1) as reader:
            with anyio.fail_after(60), pytest.raises(QueryError) as info:
                await reader.scan(route_of("r", table, spec), where={"host": "web1"}).collect()
        err = info.value
        assert "does not decode" in str(err) and "d:n" in str(err) and "web1" in str(err)
        assert err.range_label is not None


async def test_processes_filter_in_the_workers(hbase: HBaseClient, unique: str) -> None:
    # a time range without the host: every bucket is read whole and filtered by time. The workers
    # decode only the rows the filter keeps, so an undecodable row outside the range does not fail
    # the query (nor does it in threads, which filter before decoding); inside the range it does.
    async with salted_table(hbase, f"t_reader_pfilter_{unique}", 4, ["web1", "web2"], 20) as (table, spec, rowkey):
        bad = rowkey.build({"host": "web1", "ts": T0 + 7})
        await hbase.write(table, [Mutation(table, bad, MutationKind.PUT, {b"d:n": b"xyz"}, None, ORIGIN)])
        route = route_of("r", table, spec)
        async with Reader(hbase, processes=2) as procs, Reader(hbase) as threads:
            plan = await procs.plan(route, time_range=(T0 + 10, T0 + 15))
            assert plan.matches is not None and len(plan.ranges) == 4
            with anyio.fail_after(60):
                scans = [r.scan(route, time_range=(T0 + 10, T0 + 15)) for r in (procs, threads)]
                got, same = [await s.collect() for s in scans]
            assert [(r.fields["host"], r.fields["ts"] - T0) for r in got] == [
                (h, t) for h in ("web1", "web2") for t in range(10, 15)]
            assert got == same
            assert [(s.stats.rows_scanned, s.stats.rows_returned) for s in scans] == [(40, 10), (40, 10)]
            for reader in (procs, threads):
                with anyio.fail_after(60), pytest.raises(QueryError, match="does not decode"):
                    await reader.scan(route, time_range=(T0 + 5, T0 + 15)).collect()


async def test_processes_limit_stops_early(hbase: HBaseClient, unique: str) -> None:
    async with salted_table(hbase, f"t_reader_plimit_{unique}", 16, HOSTS, 200) as (table, spec, _), \
            Reader(hbase, page_size=50, processes=2) as reader:
        scan = reader.scan(route_of("r", table, spec), newest_first=True, limit=5)
        got = await scan.collect()
        # descending logical order (the key without its salt): the greatest host first
        assert [(r.fields["host"], r.fields["ts"] - T0) for r in got] == [
            ("z9", t) for t in range(199, 194, -1)]
        assert scan.stats.outcome == "limit"
        assert scan.stats.rows_scanned <= 16 * 6  # reverse ranges ask one row more (the bound)
        with anyio.fail_after(10):
            while reader.statistics().queries_active:
                await anyio.sleep(0.01)


async def test_processes_unreachable_gateway_fails_the_query_not_the_reader() -> None:
    # the workers are warmed in the background; every one failing to connect must not escape from
    # the reader's block (it did once: the failures came grouped), and the query names the range
    async with HBaseClient(HBaseSettings(port=1, thrift2_port=1, timeout_ms=1000)) as dead, \
            Reader(dead, processes=2) as reader:
        await anyio.sleep(2)  # long enough for the warm-up to have failed
        with anyio.fail_after(30), pytest.raises(QueryError, match="failed"):
            await reader.scan(route_of("r", "t_nowhere", "[salt(host, 4)][host][_][ts]"),
                              where={"host": "web1"}).collect()


def scan_workers() -> list[int]:
    """Pids of this process's scan worker processes (anyio's process workers)."""
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # gone meanwhile
            continue
        if ppid == me and b"anyio.to_process" in cmdline:
            pids.append(int(entry))
    return pids


async def test_processes_killed_worker_fails_the_query_naming_a_range(hbase: HBaseClient, unique: str) -> None:
    async with salted_table(hbase, f"t_reader_pkill_{unique}", 4, HOSTS, 100) as (table, spec, _), \
            Reader(hbase, page_size=5, processes=2) as reader:
        route = route_of("r", table, spec)
        first = await reader.scan(route).collect()  # workers started, the answer known
        assert len(first) == len(HOSTS) * 100
        killed = 0

        async def killer() -> None:
            nonlocal killed
            while True:  # the pool respawns workers: keep killing until the query gives up
                for pid in scan_workers():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        killed += 1
                await anyio.sleep(0.005)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                with pytest.raises(QueryError) as info:
                    await reader.scan(route).collect()
                tg.cancel_scope.cancel()
        assert killed
        err = info.value
        assert err.range_label is not None and f"range {err.range_label} failed" in str(err)
        assert "scan worker process died" in str(err)
        # the reader is still usable: new workers, the same answer
        with anyio.fail_after(60):
            assert await reader.scan(route).collect() == first
