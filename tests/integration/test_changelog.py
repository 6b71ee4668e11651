"""Changelog routes against the real Kafka and HBase: Debezium change events of a table of orders (made
by :mod:`.changelog_support`, with updates of indexed columns, primary-key changes, deletes and
re-inserts of one key in one transaction) into a main table and two index tables. The tables must
equal the source table after the stream, after a re-send of part of it (Kafka Connect is
at-least-once), and after the whole topic is replayed by another group on top; a compacted topic's
tombstones delete by key. Bad envelopes go to the dead-letter topic with their reason."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, make_consumer, make_producer
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import Settings, load_settings

from .changelog_support import Change, SourceTable, cdc_settings, expected_tables
from .worker_support import drop_tables, stop_offsets

PARTITIONS = 4


async def _send(settings: Settings, topic: str, changes: list[Change]) -> None:
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        futs = [await producer.send(topic, c.value, key=c.key, headers=c.headers) for c in changes]
        for f in futs:
            await f
    finally:
        await producer.stop()


async def _ingest(settings: Settings, hbase: HBaseClient, topic: str) -> Any:
    worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
    with anyio.fail_after(180):
        return await worker.run()


async def _assert_tables(hbase: HBaseClient, want: dict[str, dict[bytes, dict[bytes, bytes]]]) -> int:
    """Every table equals ``want`` (rows, cells, values; one version per cell's latest). Returns rows compared."""
    compared = 0
    for table, rows in want.items():
        got = {k: v for k, v in await hbase.scan_page(table, limit=len(rows) + 1000)}
        extra = sorted(set(got) - set(rows))
        missing = sorted(set(rows) - set(got))
        assert not extra and not missing, f"{table}: {len(extra)} stale rows (e.g. {extra[:3]}), " \
                                          f"{len(missing)} missing (e.g. {missing[:3]})"
        wrong = [k for k in rows if got[k] != rows[k]]
        assert not wrong, f"{table}: {len(wrong)} rows differ, e.g. {wrong[0]!r}: {got[wrong[0]]} != {rows[wrong[0]]}"
        compared += len(rows)
    return compared


@pytest.fixture
async def cdc(hbase: HBaseClient, unique: str) -> Any:
    settings = cdc_settings(unique)
    topic = settings.routes[0].topic
    await create_topics(settings.kafka, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    try:
        yield settings, topic
    finally:
        await drop_tables(hbase, settings)


async def test_debezium_changes_keep_main_and_index_tables_equal_to_the_source(
        hbase: HBaseClient, cdc: tuple[Settings, str]) -> None:
    settings, topic = cdc
    source = SourceTable(seed=33)
    source.run(3000)
    assert source.ops.get("d", 0) > 100 and source.ops.get("u", 0) > 500
    await _send(settings, topic, source.changes)
    summary = await _ingest(settings, hbase, topic)
    assert summary.dead_lettered == 0
    want = expected_tables(settings, source.rows)
    assert await _assert_tables(hbase, want) > 500

    # Kafka Connect re-sends after a crash: the last 40% of the stream again, in order
    await _send(settings, topic, source.changes[len(source.changes) * 6 // 10:])
    await _ingest(settings, hbase, topic)
    await _assert_tables(hbase, want)

    # a replay of the whole topic by another group, on top
    replay = settings.model_copy(update={"kafka": settings.kafka.model_copy(update={"group_id": settings.kafka.group_id
                                                                                    + "-replay"})})
    await _ingest(replay, hbase, topic)
    await _assert_tables(hbase, want)


async def test_envelopes_that_cannot_be_applied_go_to_the_dead_letter_topic(
        hbase: HBaseClient, cdc: tuple[Settings, str]) -> None:
    settings, topic = cdc
    key = orjson.dumps({"order_id": 1})
    row = {"order_id": 1, "seller_id": "s1", "buyer_id": "b1", "amount_cents": 5, "status": "new"}
    source = {"lsn": 10, "ts_ms": 1}
    bad = {
        "unsupported_op": {"op": "t", "before": None, "after": None, "source": source},
        "no_before_image": {"op": "u", "before": None, "after": row, "source": source},
        "missing_field": {"op": "c", "before": None, "after": {"order_id": 1}, "source": source},
    }
    good = {"op": "c", "before": None, "after": row, "source": {"lsn": 20, "ts_ms": 2}}
    changes = [Change(key, orjson.dumps(v)) for v in bad.values()] + [Change(key, orjson.dumps(good))]
    await _send(settings, topic, changes)
    summary = await _ingest(settings, hbase, topic)
    # every route refuses the truncate (one dead letter, of no route); the row without its columns costs the
    # routes of named columns (the table of every column takes what there is); the update without a before
    # image costs the two index routes only (the main table is keyed on the primary key and takes it)
    named = [r.name for r in settings.routes if not r.dynamic_columns]
    assert summary.dead_lettered == 1 + len(named) + 2
    consumer = make_consumer(settings.kafka, group_id=None, topics=[settings.kafka.dead_letter_topic],
                             auto_offset_reset="earliest")
    await consumer.start()
    seen: dict[str, dict[str, bytes]] = {}
    routes: list[tuple[str, bytes | None]] = []
    try:
        with anyio.fail_after(30):
            while len(routes) < summary.dead_lettered:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    for m in msgs:
                        h = dict(m.headers)
                        seen[h["hbase-ingest.reason"].decode()] = h
                        routes.append((h["hbase-ingest.reason"].decode(), h.get("hbase-ingest.route")))
    finally:
        await consumer.stop()
    assert set(seen) == set(bad)
    names = {r.name: r.name.encode() for r in settings.routes if r.table != settings.routes[0].table}
    assert sorted(routes, key=str) == sorted([*(("missing_field", n.encode()) for n in named), ("unsupported_op", None),
                                              *(("no_before_image", n) for n in names.values() if n != b"orders_all")],
                                             key=str)
    assert b"REPLICA IDENTITY FULL" in seen["no_before_image"]["hbase-ingest.error"]
    assert all(h["hbase-ingest.source.topic"] == topic.encode() for h in seen.values())
    want = expected_tables(settings, {1: row})  # the columns-less row's one cell is rewritten by the good one
    await _assert_tables(hbase, want)


async def test_a_compacted_topic_s_tombstones_delete_by_key(hbase: HBaseClient, unique: str) -> None:
    topic = f"users-{unique}"
    settings = load_settings(
        None, topics=[{"name": topic, "key_format": "text"}],
        routes=[{"name": "users", "topic": topic, "table": f"users_{unique}", "rowkey": "[$key]",
                 "timestamp_field": "$offset", "on_tombstone": "delete",
                 "columns": {"u:n": "name", "u:m": {"field": "email", "required": False, "null": "delete"}}}],
        tables=[{"name": f"users_{unique}", "families": {"u": {"versions": 3}}}],
        kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})
    await create_topics(settings.kafka, {settings.kafka.dead_letter_topic: 1})
    await _compacted_topic(settings, topic)
    await create_tables(hbase, settings, recreate=True)
    try:
        changes = [Change(b"ann", orjson.dumps({"name": "Ann", "email": "a@x"})),
                   Change(b"bob", orjson.dumps({"name": "Bob", "email": "b@x"})),
                   Change(b"ann", None),                                   # ann is gone
                   Change(b"bob", orjson.dumps({"name": "Bob", "email": None})),  # bob's email is gone
                   Change(b"cid", orjson.dumps({"name": "Cid"})),
                   Change(b"ann", orjson.dumps({"name": "Ann 2"})),        # ann is back, newer than her delete
                   Change(b"dan", orjson.dumps({"name": "Dan"})),
                   Change(b"dan", None)]
        await _send(settings, topic, changes)
        await _ingest(settings, hbase, topic)
        want = {settings.routes[0].table: {b"ann": {b"u:n": b"Ann 2"}, b"bob": {b"u:n": b"Bob"},
                                           b"cid": {b"u:n": b"Cid"}}}
        await _assert_tables(hbase, want)
        replay = settings.model_copy(update={"kafka": settings.kafka.model_copy(update={"group_id": f"r-{unique}"})})
        await _ingest(replay, hbase, topic)  # a replay converges: the same cells at the same offsets
        await _assert_tables(hbase, want)
    finally:
        await drop_tables(hbase, settings)


async def _compacted_topic(settings: Settings, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # the project's admin helper makes plain topics

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        await admin.close()
