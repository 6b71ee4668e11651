"""The native RPC client against the real HBase: regions located through the RPC registry and a meta
scan agree with the Thrift gateway's, and so do those located through ZooKeeper when no master
answers; puts and deletes written natively read back through Thrift byte for byte; a missing column
family is refused with the Java exception named; the worker on ``[hbase] client = "native"`` writes
every row and dead-letters exactly what a region server refuses."""

from __future__ import annotations

import anyio
import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.hbase.native import NativeClient, Region
from connectors.kafka import KafkaBroker
from devstack import LocalStack
from pipeline.core.model import Mutation, MutationKind, Origin
from pipeline.core.model import TopicPartition as TP
from pipeline.errors import HBaseRequestError
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import FamilySpec, HBaseSettings

from .worker_support import drop_tables, expected_cells, order_event, order_settings, produce, setup, stop_offsets

SPLITS = [b"r0500", b"r1000", b"r1500"]
ROWS = 2000
T0 = 1_700_000_000_000
ORIGIN = Origin(TP("native", 0), 0)
PUT, DELETE, DELETE_VERSION = MutationKind.PUT, MutationKind.DELETE, MutationKind.DELETE_VERSION
INCREMENT = MutationKind.INCREMENT

Expected = dict[bytes, dict[bytes, tuple[bytes, int]]]


def batches(table: str) -> tuple[list[Mutation], list[Mutation], Expected]:
    """2,000 rows of three cells (two families, explicit timestamps), then deletes of every kind, and
    what the table must hold afterwards: row -> column -> (value, timestamp)."""
    puts, deletes = [], []
    expected: Expected = {}
    for i in range(ROWS):
        row, ts = b"r%04d" % i, T0 + i
        cells = {b"d:a": b"a%d" % i, b"d:bb": bytes([i % 256]) * (i % 40), b"e:c": i.to_bytes(8, "big")}
        puts.append(Mutation(table, row, PUT, cells, ts, ORIGIN))
        expected[row] = {col: (v, ts) for col, v in cells.items()}
        if i % 7 == 0:
            deletes.append(Mutation(table, row, DELETE, {b"d:bb": b""}, ts, ORIGIN))
            expected[row].pop(b"d:bb")
        if i % 11 == 0:
            deletes.append(Mutation(table, row, DELETE, {b"e": b""}, ts, ORIGIN))
            expected[row].pop(b"e:c")
        if i % 17 == 0:
            deletes.append(Mutation(table, row, DELETE_VERSION, {b"d:a": b""}, ts, ORIGIN))
            expected[row].pop(b"d:a")
        if i % 19 == 0:  # below the put's timestamp: hides nothing
            deletes.append(Mutation(table, row, DELETE, {b"d:a": b""}, ts - 1, ORIGIN))
        if i % 13 == 0:
            deletes.append(Mutation(table, row, DELETE, {}, ts, ORIGIN))
            expected[row].clear()
    return puts, deletes, {k: v for k, v in expected.items() if v}


async def test_native_writes_read_back_through_thrift(stack: LocalStack, hbase: HBaseClient,
                                                      hbase_settings: HBaseSettings, unique: str) -> None:
    table = f"native_{unique}"
    await hbase.create_table(table, {"d": FamilySpec(versions=3), "e": FamilySpec(versions=3)}, SPLITS)
    try:
        async with NativeClient([f"localhost:{stack.settings.master_port}"], timeout_s=20.0,
                                table_prefix=hbase_settings.table_prefix) as native:
            located = await native.regions(table)
            thrift_regions = await hbase.regions(table)
            assert len(located) == 4
            assert ([(r.start_key, r.end_key, r.region_id, r.port) for r in located]
                    == [(r.start_key, r.end_key, r.region_id, r.port) for r in thrift_regions])
            # no master answers (nothing listens on port 1): the meta-region-server znode names meta's server
            async with NativeClient(["localhost:1"], zookeeper_quorum=[f"localhost:{stack.settings.zookeeper_port}"],
                                    connect_timeout_s=5.0, table_prefix=hbase_settings.table_prefix) as via_zk:
                assert await via_zk.regions(table) == located

            puts, deletes, expected = batches(table)
            await native.write(table, puts[:1000])
            # a stale cache: one region that no server serves covers the table; the server answers
            # NotServingRegionException, the client re-reads meta and retries the failed actions only
            native._cache.put(Region(f"{table},,1.{'0' * 32}.".encode(), hbase_settings.table_prefix + table, b"", b"",
                                     1, located[0].host, located[0].port))
            before = native.statistics()
            await native.write(table, puts[1000:])
            after = native.statistics()
            assert after["retries"] == before["retries"] + 1
            assert after["region_refreshes"] == before["region_refreshes"] + 1
            assert after["actions_failed"] - before["actions_failed"] == 1000
            await native.write(table, deletes)

            stored = await hbase.scan_cells(table, limit=ROWS + 10)
            got = {k: {col: (c.value, c.timestamp) for col, c in cells.items()} for k, cells in stored}
            assert got == expected

            scanned = await native.scan(table, limit=ROWS + 10)
            assert {k: {c.family + b":" + c.qualifier: (c.value, c.timestamp) for c in cells}
                    for k, cells in scanned} == expected
            across = await native.scan(table, start=b"r0498", stop=b"r0503", limit=3)  # crosses the r0500 split
            assert [k for k, _ in across] == [b"r0498", b"r0499", b"r0500"]
            # reversed (start is the inclusive upper bound, stop the exclusive lower one) and column-bounded
            # scans read what the gateway reads, across every split
            for query in ({"reverse": True, "limit": ROWS + 10}, {"reverse": True, "start": b"r1001", "stop": b"r0498"},
                          {"reverse": True, "start": b"r1000", "limit": 7}, {"columns": [b"d:a", b"e"]},
                          {"start": b"r0400", "stop": b"r1600", "columns": [b"d"], "limit": 1150}):
                ours = await native.scan(table, **query)
                theirs = await hbase.scan_cells(table, **query)
                assert [(k, {c.family + b":" + c.qualifier: (c.value, c.timestamp) for c in cells})
                        for k, cells in ours] \
                    == [(k, {col: (c.value, c.timestamp) for col, c in cells.items()}) for k, cells in theirs], query

            # increments carry nonces: the same batch sent again by the same client (a retry after a lost
            # answer) counts once; two events counting into one cell count twice; a new client counts again
            incs = [Mutation(table, b"counter", INCREMENT, {b"d:n": b""}, None, Origin(TP("native", 0), i), amount=5)
                    for i in range(2)]
            await native.write(table, incs)
            await native.write(table, incs)
            assert await hbase.counter(table, b"counter", b"d:n") == 10
            async with NativeClient([f"localhost:{stack.settings.master_port}"],
                                    table_prefix=hbase_settings.table_prefix) as another:
                await another.write(table, incs[:1])
            assert await hbase.counter(table, b"counter", b"d:n") == 15

            with pytest.raises(HBaseRequestError, match="NoSuchColumnFamilyException") as info:
                await native.write(table, [Mutation(table, b"r0001", PUT, {b"nope:q": b"x"}, T0, ORIGIN)])
            assert "nope" in str(info.value)
            assert [f.index for f in info.value.failures] == [0]  # type: ignore[attr-defined]
    finally:
        await hbase.delete_table(table)


class _FamilyDroppedAfterCheck(HBaseClient):
    async def families(self, table: str) -> dict[str, int]:
        return {"o": 5, **await super().families(table)}


async def test_the_worker_writes_natively_and_dead_letters_what_hbase_refuses(
        stack: LocalStack, hbase: HBaseClient, hbase_settings: HBaseSettings, unique: str) -> None:
    """The guides' order design through the worker with ``client = "native"``. The index table lacks
    the route's family, as when an administrator dropped it after the worker's start-up check (the
    client below answers that check as it stood before), so each of its rows is refused by the region
    server (a ``Multi`` action failing with ``NoSuchColumnFamilyException``) and dead-lettered, while
    the same events' rows in the seller and buyer tables land."""
    settings = order_settings(unique)
    topic = await setup(settings, hbase)
    index = settings.routes[2].table
    await hbase.delete_table(index)
    await hbase.create_table(index, {"x": FamilySpec()})
    native = hbase_settings.model_copy(update={"client": "native",
                                               "masters": [f"localhost:{stack.settings.master_port}"]})
    try:
        events = [order_event(i) for i in range(200)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        async with _FamilyDroppedAfterCheck(native) as client:
            worker = Worker(settings, client, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
            with anyio.fail_after(120):
                summary = await worker.run()
            stats = client.statistics()["native"]
        assert summary.consumed == 200 and summary.dead_lettered == 200
        assert stats["multi_calls"] > 0 and stats["actions_failed"] >= 200
        assert await hbase.scan_page(index, limit=10) == []
        for route in settings.routes[:2]:
            want = {}
            for e in events:
                row, cells = expected_cells(settings, e)[route.table]
                want[row] = cells
            assert dict(await hbase.scan_page(route.table, limit=300)) == want, route.name
    finally:
        await drop_tables(hbase, settings)
