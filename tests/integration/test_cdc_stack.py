"""The CDC stack (``stack up --cdc``): rows changed in PostgreSQL reach Kafka as Debezium change events
(schemaless JSON), and ``stack status`` shows PostgreSQL and Kafka Connect."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from typing import Any

import orjson

from connectors.kafka import TopicPartition, end_offsets, make_consumer, partitions
from devstack import LocalStack
from devstack.cdc import CdcServers
from devstack.pgserver import DATABASE, SlotRecord
from pipeline.errors import KafkaError
from pipeline.settings import KafkaSettings

ORDERS = "public.orders"
Record = tuple[dict[str, Any], dict[str, Any] | None]


def _cdc(stack: LocalStack) -> CdcServers:
    assert stack.cdc is not None
    return stack.cdc


async def _start_offsets(kafka: KafkaSettings, topic: str) -> dict[int, int]:
    """Partition -> end offset now (the topic has several partitions: a key's partition is Kafka's choice)."""
    try:
        return await end_offsets(kafka, topic)
    except KafkaError:  # no change event on this table yet: its topic does not exist
        return {}


async def _records_of(kafka: KafkaSettings, topic: str, start: dict[int, int], key: dict[str, Any],
                      until: int, timeout_s: float = 60.0) -> list[Record]:
    """The records of ``topic`` from ``start`` (partition -> offset; 0 where absent) whose key is ``key``
    (decoded), until ``until`` of them, in offset order (one key stays in one partition)."""
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    got: list[Record] = []
    try:
        deadline = time.monotonic() + timeout_s
        while topic not in await consumer.topics():  # made by `stack up` (or Connect) before the first event
            assert time.monotonic() < deadline, f"topic {topic} never appeared"
            await asyncio.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(await partitions(kafka, topic))]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, start.get(tp.partition, 0))
        while len(got) < until and time.monotonic() < deadline:
            batch = await consumer.getmany(*tps, timeout_ms=500)
            for msgs in batch.values():
                for msg in msgs:
                    if msg.key is not None and orjson.loads(msg.key) == key:
                        got.append((orjson.loads(msg.key),
                                    None if msg.value is None else orjson.loads(msg.value)))
    finally:
        await consumer.stop()
    return got


async def test_insert_update_delete_arrive_as_debezium_events(cdc_stack: LocalStack) -> None:
    cdc = _cdc(cdc_stack)
    kafka = KafkaSettings(bootstrap_servers=cdc_stack.bootstrap)
    topic = cdc.topic(ORDERS)
    order_id = secrets.randbelow(2**62) + 1  # a key no other run has used
    start = await _start_offsets(kafka, topic)
    # three transactions (psql commits each statement on its own)
    cdc.pg.sql(f"INSERT INTO {ORDERS} VALUES ({order_id}, 's-1', 'b-1', 1250, 'new', '2025-11-22T10:00:00Z');\n"
               f"UPDATE {ORDERS} SET status = 'paid', amount_cents = 1300 WHERE order_id = {order_id};\n"
               f"DELETE FROM {ORDERS} WHERE order_id = {order_id};\n")
    records = await _records_of(kafka, topic, start, {"order_id": order_id}, until=4)

    assert [r[1]["op"] if r[1] else None for r in records] == ["c", "u", "d", None]  # None: the tombstone
    (_, created), (_, updated), (_, deleted), _ = records
    assert created and updated and deleted
    first = {"order_id": order_id, "seller_id": "s-1", "buyer_id": "b-1", "amount_cents": 1250, "status": "new",
             "updated_at": "2025-11-22T10:00:00.000000Z"}  # Debezium's ZonedTimestamp
    paid = {**first, "status": "paid", "amount_cents": 1300}
    assert created["before"] is None and created["after"] == first
    # REPLICA IDENTITY FULL: the whole old row, not just its key
    assert updated["before"] == first and updated["after"] == paid
    assert deleted["before"] == paid and deleted["after"] is None
    sources = [e["source"] for e in (created, updated, deleted)]
    assert all(s["db"] == DATABASE and s["schema"] == "public" and s["table"] == "orders" for s in sources)
    assert all(s["connector"] == "postgresql" and s["snapshot"] == "false" for s in sources)
    lsns = [s["lsn"] for s in sources]
    assert all(isinstance(n, int) for n in lsns) and lsns == sorted(lsns) and len(set(lsns)) == 3
    tx_ids = [s["txId"] for s in sources]
    assert all(isinstance(t, int) for t in tx_ids) and len(set(tx_ids)) == 3  # one transaction each
    assert all(isinstance(s["ts_ms"], int) and s["ts_ms"] > 1_600_000_000_000 for s in sources)
    assert all(isinstance(e["ts_ms"], int) and e["ts_ms"] >= e["source"]["ts_ms"] for e in (created, updated, deleted))


def test_slot_and_offsets_are_kept_together(cdc_stack: LocalStack) -> None:
    cdc = _cdc(cdc_stack)
    assert cdc.pg.slot_state() == "ok"
    assert cdc.pg.recorded_slot() == SlotRecord.wanted(cdc_stack.settings)
    assert cdc.pg.sync_slot() is False  # nothing to remake while they match (Connect holds the slot)


def test_second_up_reuses_the_cdc_processes(cdc_stack: LocalStack) -> None:
    cdc = _cdc(cdc_stack)
    pids = cdc.postgres.pid(), cdc.connect.pid()
    report = LocalStack(cdc_stack.settings).up()
    assert report.reused
    assert (cdc.postgres.pid(), cdc.connect.pid()) == pids
    # an `up` without --cdc keeps them as part of the stack
    plain = LocalStack(cdc_stack.settings.model_copy(update={"cdc": False}))
    assert plain.cdc is not None and [p.name for p in plain.topology().processes][-2:] == ["postgres", "connect"]


def test_status_names_postgres_and_connect(cdc_stack: LocalStack) -> None:
    st = cdc_stack.status()
    procs = {p.name: p for p in st.processes}
    settings = cdc_stack.settings
    assert procs["postgres"].ports == {"postgres": settings.postgres_port}
    assert procs["connect"].ports == {"connect": settings.connect_port}
    for name in ("postgres", "connect"):
        assert procs[name].state == "running" and procs[name].pid and procs[name].rss_mb
        assert procs[name].log.exists()
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "status"], capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "COLUMNS": "250"}).stdout
    flat = out.replace("\n", " ")
    for name in ("postgres", "connect"):
        assert f"{name} " in out and str(procs[name].pid) in out and str(procs[name].log) in flat
    assert f"postgres {settings.postgres_port}" in out and f"connect {settings.connect_port}" in out
    assert "ready" in out and "CDC" in out
