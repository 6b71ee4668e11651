"""The HBase client on a local cluster of 2 region servers and 2 Thrift gateways (each its own JVM),
in its own state folder and on its own ports: one gateway SIGKILLed while writes stream keeps the
writes going through the other (every row there once, one version per cell), a fan-out scan with a
gateway killed mid-scan returns exactly the rows of a brute-force scan, and a restarted gateway is
taken back in. The measured failover and return times are logged (``gateway_failover_measured``)."""

from __future__ import annotations

import itertools
import os
import signal
import time
import uuid
from collections.abc import Iterator

import anyio
import pytest
import structlog

from connectors.hbase import HBaseClient
from connectors.hbase.thrift2 import load_idl, open_client
from devstack import LocalStack
from devstack.settings import StackSettings
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.errors import HBaseError
from pipeline.rowkey import compile_rowkey
from pipeline.rowkey.splits import split_points
from pipeline.runtime.read.reader import Reader
from pipeline.settings import FamilySpec, HBaseSettings, RouteSpec

from .fault_support import own_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

log = structlog.get_logger("hbase_ingest.test")

# clear of the shared stack (9090-9093, 2181, 16000, 16020) and of test_cluster_stack (9190-9201, 2281, 161xx)
PORTS = {"kafka_port": 9292, "kafka_controller_port": 9293, "zookeeper_port": 2381, "master_port": 16200,
         "regionserver_port": 16220, "thrift_port": 9290, "thrift2_port": 9291}
SPEC = "[salt(host, 8)][host][_][long(ts)]"
ROWKEY = compile_rowkey(SPEC)
HOSTS = [f"h{i:03d}" for i in range(40)]
T0 = 1_700_000_000_000
ORIGIN = Origin(TopicPartition("gateway-test", 0), 0)
ROUTE_COLUMNS = {"d:h": {"field": "host"}, "d:n": {"field": "n", "encoding": "long"}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("gateways")
    yield from own_stack(StackSettings.model_validate({"state_dir": root / "state", "region_servers": 2,
                                                     "gateways": 2, **PORTS}))


def settings_for(cluster: LocalStack, servers: list[str | None]) -> HBaseSettings:
    return HBaseSettings(gateways=[{"host": g.host, "port": g.thrift_port, "thrift2_port": g.thrift2_port,
                                    "server": s} for g, s in zip(cluster.gateways, servers, strict=True)],
                         timeout_ms=30_000, probe_interval_ms=500, probe_timeout_ms=1000, pool_size=4)


def mutation(table: str, host: str, n: int) -> Mutation:
    ts = T0 + n
    return Mutation(table, ROWKEY.build({"host": host, "ts": ts}), MutationKind.PUT,
                    {b"d:h": host.encode(), b"d:n": n.to_bytes(8, "big", signed=True)}, ts, ORIGIN)


def kill(cluster: LocalStack, name: str) -> float:
    proc = cluster.procs[name]
    pid = proc.pid()
    assert pid is not None, f"{name} is not running"
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


Versions = dict[bytes, dict[bytes, list[tuple[bytes, int]]]]


def every_version(cluster: LocalStack, table: str, gateway: int = 1) -> Versions:
    """Brute force: every row, every version of every cell, through one gateway's Thrift2."""
    idl = load_idl()
    g = cluster.gateways[gateway]
    client = open_client(g.host, g.thrift2_port, 60_000)
    out: Versions = {}
    try:
        scanner = client.openScanner(table.encode(), idl.TScan(maxVersions=10, caching=2000))
        try:
            while batch := client.getScannerRows(scanner, 2000):
                for r in batch:
                    assert r.row not in out, f"row {r.row!r} came twice from one scan"
                    cells = out[r.row] = {}
                    for cv in r.columnValues:
                        cells.setdefault(cv.family + b":" + cv.qualifier, []).append((cv.value, cv.timestamp))
        finally:
            client.closeScanner(scanner)
    finally:
        client.close()
    return out


async def region_servers(hb: HBaseClient, table: str) -> list[tuple[bytes, bytes, str]]:
    return [(r.start_key, r.end_key, f"{r.server}:{r.port}") for r in await hb.regions(table)]


def region_of(regions: list[tuple[bytes, bytes, str]], key: bytes) -> str:
    for start, end, server in regions:
        if start <= key and (not end or key < end):
            return server
    raise AssertionError(f"no region holds {key!r}")


async def create_table(cluster: LocalStack, table: str) -> list[str | None]:
    """The table, pre-split into 8 regions and balanced over both region servers; the server (host:port)
    each gateway is declared to sit with: gateway j with region server j."""
    async with HBaseClient(settings_for(cluster, [None, None])) as hb:
        await hb.create_table(table, {"d": FamilySpec(versions=10)}, split_points(ROWKEY, 8))
        servers = sorted({s for _, _, s in await region_servers(hb, table)})
    by_port = {int(s.rpartition(":")[2]): s for s in servers}
    return [by_port.get(PORTS["regionserver_port"] + j) for j in range(2)]


async def write_one(hb: HBaseClient, table: str, batch: list[Mutation], server: str | None) -> int:
    """Write one batch to its region's server (a locality hint), retrying retryable errors as the
    runtime's writer does; the number of failed attempts."""
    failed = 0
    while True:
        try:
            await hb.write(table, batch, server=server)
        except HBaseError as exc:
            if not exc.retryable:
                raise
            failed += 1
            await anyio.sleep(0.2)
        else:
            return failed


def wait_up(hb: HBaseClient, name: str, timeout_s: float = 60.0) -> float:
    t0 = time.monotonic()
    while hb.statistics()["gateways"][name]["state"] != "up":
        assert time.monotonic() - t0 < timeout_s, f"{name} not taken back in: {hb.statistics()['gateways'][name]}"
        time.sleep(0.05)
    return time.monotonic() - t0


def test_writes_fail_over_to_the_other_gateway_and_it_is_taken_back_in(cluster: LocalStack) -> None:
    table = f"gw_{uuid.uuid4().hex[:8]}"
    rows = [mutation(table, h, n) for h in HOSTS for n in range(300)]  # 12,000 rows
    measured: dict[str, float] = {}

    async def run() -> None:
        servers = await create_table(cluster, table)
        assert None not in servers, f"regions are not on both region servers: {servers}"
        async with HBaseClient(settings_for(cluster, servers)) as hb:
            regions = await region_servers(hb, table)
            by_region: dict[str, list[Mutation]] = {}
            for m in rows:
                by_region.setdefault(region_of(regions, m.row), []).append(m)
            # batches of at most 100 rows of one region, the regions interleaved in time
            batches = sorted((ms[i:i + 100] for ms in by_region.values() for i in range(0, len(ms), 100)),
                             key=lambda b: b[0].timestamp or 0)
            server_of: list[str | None] = [region_of(regions, b[0].row) for b in batches]
            g1, g2 = (f"{g.host}:{g.thrift_port}" for g in cluster.gateways)

            # locality: each batch goes to the gateway of its region's server
            first = [i for i in range(len(batches)) if server_of[i] == servers[0]][:5] + \
                [i for i in range(len(batches)) if server_of[i] == servers[1]][:3]
            before = {g: s["calls"] for g, s in hb.statistics()["gateways"].items()}
            for i in first:
                await write_one(hb, table, batches[i], server_of[i])
            calls = {g: s["calls"] - before[g] for g, s in hb.statistics()["gateways"].items()}
            assert calls == {g1: 5, g2: 3}

            # the rest by 4 concurrent writers; gateway-1 killed after a third of them
            queue = iter(i for i in range(len(batches)) if i not in first)
            completed: list[float] = []
            failed: list[int] = []
            killed: list[float] = []

            async def writer() -> None:
                for i in queue:
                    failed.append(await write_one(hb, table, batches[i], server_of[i]))
                    completed.append(time.monotonic())
                    if len(completed) == len(batches) // 3 and not killed:
                        killed.append(await anyio.to_thread.run_sync(kill, cluster, "gateway-1"))

            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(writer)
            t_kill = killed[0]
            after = [t for t in completed if t > t_kill]
            gaps = [b - a for a, b in itertools.pairwise(completed) if b > t_kill]
            measured["first_write_after_kill_s"] = after[0] - t_kill
            measured["longest_gap_between_writes_after_kill_s"] = max(gaps)
            measured["failed_attempts"] = sum(failed)
            stats = hb.statistics()["gateways"]
            measured["failovers"] = stats[g1]["failovers"]
            assert stats[g1]["state"] == "down" and stats[g1]["downs"] == 1 and stats[g1]["failovers"] >= 1, stats
            assert stats[g2]["state"] == "up" and stats[g2]["errors"] == 0, stats
            assert sum(failed) == 0  # every failed call was retried on the other gateway inside write()
            assert max(gaps) < 10 and len(after) > len(batches) // 3

            # the killed gateway restarted: taken back in by the probe, and used again
            report = await anyio.to_thread.run_sync(cluster.up)
            assert "gateway-1" in [d.name for d in report.died]
            measured["restart_s"] = time.monotonic() - t_kill
            measured["taken_back_in_after_restart_s"] = await anyio.to_thread.run_sync(wait_up, hb, g1)
            before = hb.statistics()["gateways"][g1]["calls"]
            await write_one(hb, table, batches[0], servers[0])
            assert hb.statistics()["gateways"][g1]["calls"] == before + 1

    anyio.run(run)
    log.info("gateway_failover_measured", test="writes", **{k: round(v, 3) for k, v in measured.items()})
    got = every_version(cluster, table)
    want = {m.row: {c: [(v, m.timestamp)] for c, v in m.cells.items()} for m in rows}
    assert len(got) == len(want)
    assert got == want  # every row once, byte for byte, one version per cell


@pytest.mark.parametrize("processes", [0, 2], ids=["threads", "processes"])
def test_a_fan_out_scan_with_a_gateway_killed_mid_scan_returns_every_row_once(cluster: LocalStack,
                                                                             processes: int) -> None:
    """Pages fetched in worker threads, or in worker processes (``scan_in_process``)."""
    table = f"gw_scan_{uuid.uuid4().hex[:8]}"
    rows = [mutation(table, h, n) for h in HOSTS for n in range(250)]
    route = RouteSpec(name="gw", topic="t", table=table, rowkey=SPEC, columns=ROUTE_COLUMNS)
    measured: dict[str, float] = {}

    async def run() -> None:
        servers = await create_table(cluster, table)
        async with HBaseClient(settings_for(cluster, servers)) as hb:
            for i in range(0, len(rows), 1000):
                await hb.write(table, rows[i:i + 1000])
            g2 = f"{cluster.gateways[1].host}:{cluster.gateways[1].thrift_port}"
            start_calls = hb.statistics()["gateways"][g2]["calls"]
            killed: list[float] = []

            async def killer() -> None:
                # mid-scan: once the second gateway served 15 pages of this scan
                while hb.statistics()["gateways"][g2]["calls"] < start_calls + 15:
                    await anyio.sleep(0.005)
                killed.append(await anyio.to_thread.run_sync(kill, cluster, "gateway-2"))

            async with Reader(hb, page_size=100, first_page=25, concurrency=4, processes=processes) as reader, \
                    anyio.create_task_group() as tg:
                tg.start_soon(killer)
                with anyio.fail_after(300):
                    got = await reader.scan(route).collect()
                t_end = time.monotonic()
                assert killed, "the scan ended before the gateway could be killed: make it longer"
                measured["scan_after_kill_s"] = t_end - killed[0]
                stats = hb.statistics()["gateways"][g2]
                assert stats["state"] == "down" and stats["failovers"] >= 1, stats
                keys = [r.key for r in got]
                assert len(keys) == len(set(keys)), "a row came twice"
                assert {r.key: (r.fields["host"], r.columns["d:n"]) for r in got} == {
                    m.row: (m.cells[b"d:h"].decode(), int.from_bytes(m.cells[b"d:n"], "big", signed=True))
                    for m in rows}
                brute = await anyio.to_thread.run_sync(every_version, cluster, table, 0)  # gateway-2 is dead
                assert sorted(keys) == sorted(brute)

                await anyio.to_thread.run_sync(cluster.up)
                measured["taken_back_in_after_restart_s"] = await anyio.to_thread.run_sync(wait_up, hb, g2)
                # the same reader (its worker processes too) scans again: the restarted gateway serves
                # pages and is not taken out again by a socket opened before it died
                downs, calls = stats["downs"], hb.statistics()["gateways"][g2]["calls"]
                with anyio.fail_after(300):
                    again = await reader.scan(route).collect()
                assert sorted(r.key for r in again) == sorted(keys)
                stats = hb.statistics()["gateways"][g2]
                assert stats["state"] == "up" and stats["downs"] == downs and stats["calls"] > calls, stats

    anyio.run(run)
    log.info("gateway_failover_measured", test=f"scan in {processes or 'no'} processes",
             **{k: round(v, 3) for k, v in measured.items()})
