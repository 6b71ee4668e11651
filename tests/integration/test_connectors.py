"""connectors.hbase and connectors.kafka against the real servers."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from aiokafka import TopicPartition as KTP
from aiokafka.structs import ConsumerRecord

from connectors.hbase import HBaseClient
from connectors.hbase.scanrows import SMALL_PAGE_ROWS, CellRow
from connectors.kafka import create_topics, delete_topics, end_offsets, make_consumer, make_producer
from connectors.kafka.source import KafkaSource
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.errors import HBaseRequestError, HBaseUnavailable, KafkaError, TableNotFound
from pipeline.settings import FamilySpec, HBaseSettings, KafkaSettings

ORIGIN = Origin(TopicPartition("t", 0), 0)


def put(table: str, row: bytes, value: bytes, ts: int | None) -> Mutation:
    return Mutation(table, row, MutationKind.PUT, {b"d:v": value}, ts, ORIGIN)


async def test_create_table_with_split_keys_lists_regions(hbase: HBaseClient, unique: str) -> None:
    table = f"t_regions_{unique}"
    await hbase.create_table(table, {"d": FamilySpec(), "e": FamilySpec(versions=3)}, [b"\x20", b"\x10", b"\x30"])
    try:
        regions = await hbase.regions(table)
        assert [(r.start_key, r.end_key) for r in regions] == [
            (b"", b"\x10"), (b"\x10", b"\x20"), (b"\x20", b"\x30"), (b"\x30", b"")]
        assert all(r.server and r.port for r in regions)
        # region names hold the raw start key: escaped, so logs and metric labels stay printable
        assert regions[1].name.startswith(f"{table},\\x10,") and all(r.name.isprintable() for r in regions)
        assert await hbase.families(table) == {"d": 1, "e": 3}
        assert table in await hbase.tables()
    finally:
        await hbase.delete_table(table)
    assert table not in await hbase.tables()


async def test_timestamped_batch_replay_rewrites_same_cells(hbase: HBaseClient, unique: str) -> None:
    table = f"t_replay_{unique}"
    await hbase.create_table(table, {"d": FamilySpec(versions=5)})
    try:
        batch = [put(table, b"row%03d" % i, b"v%d" % i, 1_700_000_000_000 + i) for i in range(200)]
        await hbase.write(table, batch)
        await hbase.write(table, batch)  # a replay
        versions = await hbase.cell_versions(table, b"row007", b"d:v")
        assert versions == [(b"v7", 1_700_000_000_007)]
        assert await hbase.count(table) == 200
        await hbase.write(table, [Mutation(table, b"row007", MutationKind.DELETE, {}, None, ORIGIN)])
        assert await hbase.get(table, b"row007") == {}
        assert await hbase.count(table) == 199
    finally:
        await hbase.delete_table(table)


async def test_paged_scans_bounds_prefix_reverse_limit(hbase: HBaseClient, unique: str) -> None:
    table = f"t_scan_{unique}"
    await hbase.create_table(table, {"d": FamilySpec()}, [b"k050"])
    try:
        await hbase.write(table, [put(table, b"k%03d" % i, b"%d" % i, 1) for i in range(100)])
        page = await hbase.scan_page(table, start=b"k010", stop=b"k020")
        assert [k for k, _ in page] == [b"k%03d" % i for i in range(10, 20)]
        page = await hbase.scan_page(table, prefix=b"k09")
        assert [k for k, _ in page] == [b"k%03d" % i for i in range(90, 100)]
        page = await hbase.scan_page(table, reverse=True, limit=3)
        assert [k for k, _ in page] == [b"k099", b"k098", b"k097"]
        page = await hbase.scan_page(table, start=b"k060", stop=b"k040", reverse=True, limit=100)
        assert [k for k, _ in page] == [b"k%03d" % i for i in range(60, 40, -1)]
        assert len(await hbase.scan_page(table, limit=7)) == 7
        assert len(await hbase.scan_page(table, limit=2500)) == 100
        with pytest.raises(ValueError, match="prefix"):
            await hbase.scan_page(table, start=b"k1", prefix=b"k")
        # the reader's path: the same rows, cells as objects with the stored value and timestamp
        cells = await hbase.scan_cells(table, start=b"k048", stop=b"k052", columns=[b"d"])
        assert [k for k, _ in cells] == [b"k048", b"k049", b"k050", b"k051"]  # across the split
        assert [(q, c.value, c.timestamp) for q, c in cells[0][1].items()] == [(b"d:v", b"48", 1)]
        assert await hbase.scan_cells(table, limit=0) == []
        # small pages (one Thrift2 call) and big ones (Thrift1) give the same rows and cells
        await hbase.write(table, [put(table, b"k%03d" % i, b"x%d" % i, 2) for i in range(0, 100, 7)])
        cases: list[dict[str, Any]] = [
            {"start": b"k010", "stop": b"k090"}, {"prefix": b"k05"}, {"reverse": True},
            {"start": b"k060", "stop": b"k040", "reverse": True}, {"columns": [b"d:v"]},
            {"columns": [b"d:nothing"]}, {"filter": "KeyOnlyFilter()"}, {"start": b"k200"}]
        for case in cases:
            small = await hbase.scan_cells(table, limit=SMALL_PAGE_ROWS, **case)
            big = await hbase.scan_cells(table, limit=SMALL_PAGE_ROWS + 1, **case)
            assert [(k, [(q, c.value, c.timestamp) for q, c in v.items()]) for k, v in small] == \
                [(k, [(q, c.value, c.timestamp) for q, c in v.items()]) for k, v in big], case
            few = await hbase.scan_cells(table, limit=3, **case)
            assert [k for k, _ in few] == [k for k, _ in big][:3], case
        rows = await hbase.rows(table, [b"k001", b"k002", b"missing"])
        assert [k for k, _ in rows] == [b"k001", b"k002"]
    finally:
        await hbase.delete_table(table)


def cells_page() -> Callable[[list[CellRow], str], list[Any]]:
    """A scan worker process's transform: every row's cells as plain ``(column, value, timestamp)``."""
    def page(rows: list[CellRow], label: str) -> list[Any]:
        return [(k, [(q, c.value, c.timestamp) for q, c in cells.items()], label) for k, cells in rows]
    return page


async def test_pages_in_worker_processes_equal_thread_pages(hbase: HBaseClient, unique: str) -> None:
    # small pages take Thrift2 in the worker too, bigger ones Thrift1: both give the thread path's
    # Thrift1 page (cells, timestamps, bounds, direction, columns)
    table = f"t_scanproc_{unique}"
    await hbase.create_table(table, {"d": FamilySpec()}, [b"k150"])
    try:
        await hbase.write(table, [put(table, b"k%03d" % i, b"%d" % i, 1) for i in range(300)])
        await hbase.write(table, [put(table, b"k%03d" % i, b"x%d" % i, 2) for i in range(0, 300, 7)])
        limiter = anyio.CapacityLimiter(1)
        cases: list[dict[str, Any]] = [
            {}, {"start": b"k010", "stop": b"k290"}, {"reverse": True},
            {"start": b"k260", "stop": b"k040", "reverse": True}, {"columns": [b"d:v"]},
            {"columns": [b"d:nothing"]}, {"start": b"k900"}]
        for case in cases:
            big = cells_page()(await hbase.scan_cells(table, limit=SMALL_PAGE_ROWS + 1, **case), "L")
            for limit in (3, SMALL_PAGE_ROWS, SMALL_PAGE_ROWS + 1):
                got = await hbase.scan_in_process(table, limit=limit, transform=(cells_page, ()), label="L",
                                                  limiter=limiter, **case)
                assert got == big[:limit], (case, limit)
    finally:
        await hbase.delete_table(table)


async def test_counters_are_atomic_8_byte_big_endian(hbase: HBaseClient, unique: str) -> None:
    table = f"t_counter_{unique}"
    await hbase.create_table(table, {"c": FamilySpec()})
    try:
        results = await asyncio.gather(*(hbase.increment(table, b"u1", b"c:n", 2) for _ in range(20)))
        assert sorted(results) == list(range(2, 42, 2))
        assert await hbase.counter(table, b"u1", b"c:n") == 40
        raw = await hbase.get(table, b"u1")
        assert raw[b"c:n"] == (40).to_bytes(8, "big")
    finally:
        await hbase.delete_table(table)


async def test_truncate_keeps_splits(hbase: HBaseClient, unique: str) -> None:
    table = f"t_trunc_{unique}"
    await hbase.create_table(table, {"d": FamilySpec()}, [b"m"])
    try:
        await hbase.write(table, [put(table, b"a", b"1", 5), put(table, b"z", b"2", 5)])
        await hbase.truncate_table(table)
        assert await hbase.count(table) == 0
        assert len(await hbase.regions(table)) == 2
    finally:
        await hbase.delete_table(table)


async def test_errors_are_translated(hbase: HBaseClient, unique: str) -> None:
    table = f"t_err_{unique}"
    await hbase.create_table(table, {"d": FamilySpec()})
    try:
        with pytest.raises(HBaseRequestError, match=r"NoSuchColumnFamily|Column family zz"):
            await hbase.write(table, [Mutation(table, b"r", MutationKind.PUT, {b"zz:x": b"1"}, 1, ORIGIN)])
    finally:
        await hbase.delete_table(table)
    with pytest.raises(TableNotFound):
        await hbase.regions(f"missing_{unique}")
    # the Thrift2 gateway names a missing table by its name alone (no exception class): still TableNotFound,
    # not a server failure to retry; through Thrift2 (writes, small pages) and Thrift1 (bigger pages)
    missing = f"missing_{unique}"
    with pytest.raises(TableNotFound, match="table does not exist"):
        await hbase.write(missing, [Mutation(missing, b"r", MutationKind.PUT, {b"d:x": b"1"}, 1, ORIGIN)])
    for limit in (SMALL_PAGE_ROWS, SMALL_PAGE_ROWS + 1):
        with pytest.raises(TableNotFound, match="table does not exist"):
            await hbase.scan_cells(missing, limit=limit)


async def test_unreachable_gateway_is_unavailable() -> None:
    async with HBaseClient(HBaseSettings(port=1, thrift2_port=1, timeout_ms=1000)) as dead:
        with pytest.raises(HBaseUnavailable):
            await dead.tables()


async def test_kafka_topics_produce_consume(kafka_settings: KafkaSettings, unique: str) -> None:
    topic = f"it-{unique}"
    assert await create_topics(kafka_settings, {topic: 3}) == [topic]
    assert await create_topics(kafka_settings, {topic: 3}) == []
    try:
        producer = make_producer(kafka_settings)
        await producer.start()
        try:
            for p in range(3):
                await producer.send_and_wait(topic, b"m%d" % p, partition=p)
        finally:
            await producer.stop()
        assert await end_offsets(kafka_settings, topic) == {0: 1, 1: 1, 2: 1}
        consumer = make_consumer(kafka_settings, group_id=f"g-{unique}", topics=[topic])
        await consumer.start()
        try:
            got: set[bytes] = set()
            while len(got) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for msgs in batch.values():
                    got.update(m.value for m in msgs)
            assert got == {b"m0", b"m1", b"m2"}
        finally:
            await consumer.stop()
    finally:
        await delete_topics(kafka_settings, [topic])
    with pytest.raises(KafkaError, match="does not exist"):
        await end_offsets(kafka_settings, topic)


async def test_the_sources_records_are_the_decoded_records(kafka_settings: KafkaSettings, unique: str) -> None:
    """KafkaSource yields aiokafka's decoded records (no ConsumerRecord copy each), carrying what a
    plain consumer's ConsumerRecord carries: offset, timestamp, key, value, headers."""
    topic = f"it-decoded-{unique}"
    await create_topics(kafka_settings, {topic: 1})
    try:
        producer = make_producer(kafka_settings)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, None if i == 3 else b"v%d" % i, key=b"k%d" % i if i % 2 else None,
                                             partition=0, timestamp_ms=1_700_000_000_000 + i,
                                             headers=[("h", b"%d" % i)] if i else None)
        finally:
            await producer.stop()

        def fields(r: Any) -> tuple[Any, ...]:
            return r.offset, r.timestamp, r.key, r.value, list(r.headers)

        source = KafkaSource(kafka_settings, None, auto_offset_reset="earliest")
        source.assign([TopicPartition(topic, 0)])
        await source.start()
        try:
            got: list[Any] = []
            while len(got) < 5:
                got += (await source.fetch(1000, 100)).get(TopicPartition(topic, 0), [])
        finally:
            await source.stop()
        consumer = make_consumer(kafka_settings, group_id=None, auto_offset_reset="earliest")
        consumer.assign([KTP(topic, 0)])
        await consumer.start()
        try:
            plain: list[Any] = []
            while len(plain) < 5:
                plain += (await consumer.getmany(timeout_ms=1000)).get(KTP(topic, 0), [])
        finally:
            await consumer.stop()
        assert not any(isinstance(r, ConsumerRecord) for r in got)
        assert all(isinstance(r, ConsumerRecord) for r in plain)
        assert [fields(r) for r in got] == [fields(r) for r in plain]
        assert fields(got[3]) == (3, 1_700_000_000_003, b"k3", None, [("h", b"3")])
    finally:
        await delete_topics(kafka_settings, [topic])


async def _write_and_read_back(settings: HBaseSettings, table: str, batch: list[Mutation]) -> tuple[list[Any], ...]:
    """Write ``batch`` into a fresh ``table`` with a client on ``settings`` (its put encoder),
    read every cell back with its timestamp, and the errors of two refused writes (type, message)."""
    async with HBaseClient(settings) as hb:
        await hb.create_table(table, {"d": FamilySpec(versions=3), "e": FamilySpec()})
        try:
            await hb.write(table, batch)
            cells = [(row, {c: (cell.value, cell.timestamp) for c, cell in cols.items()})
                     for row, cols in await hb.scan_cells(table, limit=len(batch) + 10)]
            errors = []
            for target, column in ((table, b"zz:x"), (f"{table}_missing", b"d:x")):
                try:
                    await hb.write(target, [Mutation(target, b"r", MutationKind.PUT, {column: b"1"}, 1, ORIGIN)])
                except Exception as exc:
                    # the region's id and encoded name differ between the two tables' lives
                    errors.append((type(exc).__name__, re.sub(r",\d+\.[0-9a-f]+\.", ",<region>.", str(exc))))
            return cells, errors
        finally:
            await hb.delete_table(table)


async def test_the_direct_put_encoder_writes_the_cells_thriftpy2s_objects_write(
        hbase_settings: HBaseSettings, unique: str) -> None:
    """The same batch through both put encoders (connectors.hbase.putwire and thriftpy2's objects):
    the same rows, values and timestamps in HBase, the same errors."""
    table = f"t_putwire_{unique}"
    batch = [Mutation(table, bytes([i % 256, 0, 255]) + b"r%03d" % i, MutationKind.PUT,
                      {b"d:v": b"v%d" % i, b"d:": b"", b"e:a:b": bytes(range(256)) * (i % 3),
                       b"d:big": b"x" * (70_000 if i % 50 == 0 else 5)}, 1_700_000_000_000 + i, ORIGIN)
             for i in range(300)]
    batch.append(Mutation(table, b"server-time", MutationKind.PUT, {b"d:v": b"now"}, None, ORIGIN))
    got = {}
    for encoder in ("thriftpy2", "direct"):
        chosen = hbase_settings.model_copy(update={"put_encoder": encoder})
        got[encoder] = await _write_and_read_back(chosen, table, batch)
    (old_cells, old_errors), (new_cells, new_errors) = got["thriftpy2"], got["direct"]
    assert len(new_cells) == 301
    server_time = [(row, {c: v for c, (v, _) in cols.items()}) for row, cols in new_cells if row == b"server-time"]
    assert server_time == [(b"server-time", {b"d:v": b"now"})]
    assert [c for c in new_cells if c[0] != b"server-time"] == [c for c in old_cells if c[0] != b"server-time"]
    assert new_cells[0] == (b"\x00\x00\xffr000", {b"d:v": (b"v0", 1_700_000_000_000), b"d:": (b"", 1_700_000_000_000),
                                                  b"e:a:b": (b"", 1_700_000_000_000),
                                                  b"d:big": (b"x" * 70_000, 1_700_000_000_000)})
    assert [e[0] for e in new_errors] == ["HBaseRequestError", "TableNotFound"]
    assert new_errors == old_errors
