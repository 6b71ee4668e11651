"""A database's changes into HBase, end to end, through the real servers: random DML on the local
stack's PostgreSQL (inserts, updates of plain and of indexed columns, primary-key changes and swaps,
deletes, deletes and re-inserts of one key in one transaction, multi-row transactions), captured by
Debezium in Kafka Connect, ingested by three workers that are SIGKILLed and restarted at random while
Kafka Connect itself is SIGKILLed and restarted once (it re-sends what it had not flushed); then the
whole topic replayed by a backfill on top. The main table and both index tables must equal what
PostgreSQL holds, compared row by row directly and through the project's reader."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.to_thread import run_sync

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, end_offsets, make_consumer
from connectors.stack import LocalStack
from connectors.stack.connect import connector_properties
from pipeline.core.model import TopicPartition
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.read.reader import Reader
from pipeline.settings import Settings, load_settings

from .changelog_support import cdc_settings, expected_tables, profile_toml
from .fault_support import WorkerProcess, committed_offsets, up_until_ok
from .worker_support import drop_tables

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

OPERATIONS = 50_000
KEYS = 3_000
TOPIC = "shop.public.orders"
SENTINEL = 2_000_000_000  # written last: once it is in HBase, every change before it was captured
TICK_ROWS = 40  # ids above SENTINEL; Kafka's key hash leaves a partition without one with odds of about 1e-5


class Workload:
    """Random DML in transactions of 1-8 operations, as SQL text; a model of the live keys only
    chooses valid targets (PostgreSQL holds the truth)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.live: set[int] = set()
        self.next_id = 1
        self.counts: dict[str, int] = {}

    def _values(self, oid: int) -> str:
        r = self.rng
        status = r.choice(["'new'", "'paid'", "'sent'", "NULL"])
        return f"({oid}, 's{r.randrange(40):02d}', 'b{r.randrange(200):03d}', {r.randrange(1, 10**7)}, {status}, now())"

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def transaction(self) -> str:
        r = self.rng
        sql = ["BEGIN;"]
        for _ in range(r.randrange(1, 9)):
            pick = r.random()
            if not self.live or (pick < 0.22 and len(self.live) < KEYS):
                oid = self.next_id
                self.next_id += 1
                self.live.add(oid)
                sql.append(f"INSERT INTO orders VALUES {self._values(oid)};")
                self._count("insert")
                continue
            oid = r.choice(sorted(self.live)) if len(self.live) < 64 else r.choice(tuple(self.live))
            if pick < 0.50:
                status = r.choice(["'new'", "'paid'", "'sent'", "NULL"])
                sql.append(f"UPDATE orders SET status = {status}, amount_cents = {r.randrange(1, 10**7)}, "
                           f"updated_at = now() WHERE order_id = {oid};")
                self._count("update_plain")
            elif pick < 0.66:
                sql.append(f"UPDATE orders SET seller_id = 's{r.randrange(40):02d}', "
                           f"buyer_id = 'b{r.randrange(200):03d}' WHERE order_id = {oid};")
                self._count("update_indexed")
            elif pick < 0.72:
                new = self.next_id
                self.next_id += 1
                self.live.discard(oid)
                self.live.add(new)
                sql.append(f"UPDATE orders SET order_id = {new} WHERE order_id = {oid};")
                self._count("update_key")
            elif pick < 0.76 and len(self.live) > 1:
                other = r.choice(tuple(self.live - {oid}))
                sql += [f"UPDATE orders SET order_id = -1 WHERE order_id = {oid};",
                        f"UPDATE orders SET order_id = {oid} WHERE order_id = {other};",
                        f"UPDATE orders SET order_id = {other} WHERE order_id = -1;"]
                self._count("swap_keys")
            elif pick < 0.88:
                self.live.discard(oid)
                sql.append(f"DELETE FROM orders WHERE order_id = {oid};")
                self._count("delete")
            else:
                sql += [f"DELETE FROM orders WHERE order_id = {oid};",
                        f"INSERT INTO orders VALUES {self._values(oid)};"]
                self._count("delete_and_reinsert")
        sql.append("COMMIT;")
        return "\n".join(sql)

    def script(self, operations: int) -> list[str]:
        out = []
        while sum(self.counts.values()) < operations:
            out.append(self.transaction())
        return out


def _pg_rows(stack: LocalStack) -> dict[int, dict[str, Any]]:
    assert stack.cdc is not None
    rows = stack.cdc.pg.sql("SELECT order_id, seller_id, buyer_id, amount_cents, coalesce(status, '\\N') FROM orders;")
    return {int(o): {"order_id": int(o), "seller_id": s, "buyer_id": b, "amount_cents": int(a),
                     "status": None if t == "\\N" else t} for o, s, b, a, t in rows}


async def _hbase_tables(hbase: HBaseClient, settings: Settings) -> dict[str, dict[bytes, dict[bytes, bytes]]]:
    out = {}
    for r in settings.routes:
        got: dict[bytes, dict[bytes, bytes]] = {}
        start = b""
        while True:
            page = await hbase.scan_page(r.table, start=start, limit=5000)
            got.update(page)
            if len(page) < 5000:
                break
            start = page[-1][0] + b"\x00"
        out[r.table] = got
    return out


def _diff(want: dict[str, dict[bytes, dict[bytes, bytes]]], got: dict[str, dict[bytes, dict[bytes, bytes]]]) -> str:
    problems = []
    for table, rows in want.items():
        have = got[table]
        missing = [k for k in rows if k not in have]
        stale = [k for k in have if k not in rows]
        wrong = [k for k in rows if k in have and have[k] != rows[k]]
        if missing or stale or wrong:
            example = [(k, have[k], rows[k]) for k in wrong[:1]]
            problems.append(f"{table}: {len(missing)} missing (e.g. {missing[:2]}), {len(stale)} stale "
                            f"(e.g. {stale[:2]}), {len(wrong)} differ (e.g. {example})")
    return "; ".join(problems)


async def test_random_dml_reaches_main_and_index_tables_through_kills_and_a_replay(
        cdc_stack: LocalStack, hbase: HBaseClient, tmp_path: Path, unique: str) -> None:
    stack = cdc_stack
    assert stack.cdc is not None
    settings = cdc_settings(unique, topic=TOPIC, max_batch_rows=500, concurrency=2)
    settings = settings.model_copy(update={"kafka": settings.kafka.model_copy(update={"max_poll_records": 2000})})
    config = tmp_path / "cdc.toml"
    config.write_text(profile_toml(settings))
    assert load_settings(config).routes == settings.routes
    await create_tables(hbase, settings, recreate=True)
    await run_sync(stack.cdc.pg.sql, "DELETE FROM orders;")
    # The stack's topic keeps every earlier run's changes (its state outlives a `stack down`): this run's
    # group starts where the topic ends now. Changes still on their way land after these offsets and are
    # read too; the DELETE above empties the table first, so the changes from here on converge to it.
    first = await end_offsets(settings.kafka, TOPIC)
    await KafkaBroker(settings.kafka).commit_group(
        settings.kafka.group_id, {TopicPartition(TOPIC, p): o for p, o in first.items()})
    workload = Workload(seed=33)
    script = workload.script(OPERATIONS)
    crew = [WorkerProcess(config, tmp_path / f"worker-{n}.log", stack) for n in range(3)]
    rng = random.Random(7)
    kills = {"workers": 0, "connect": 0}
    try:
        for w in crew:
            w.start()
        done = threading.Event()

        def run_dml() -> None:
            assert stack.cdc is not None
            for start in range(0, len(script), 200):
                stack.cdc.pg.sql("\n".join(script[start:start + 200]), timeout_s=120)
                time.sleep(0.05)
            stack.cdc.pg.sql(f"INSERT INTO orders VALUES ({SENTINEL}, 's00', 'b000', 1, 'last', now());")
            done.set()

        dml = threading.Thread(target=run_dml, daemon=True)
        t0 = time.monotonic()
        dml.start()
        connect_killed = False
        while not done.is_set():
            await anyio.sleep(rng.uniform(2.0, 5.0))
            if not connect_killed and time.monotonic() - t0 > 8:
                pid = stack.procs["connect"].pid()
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                connect_killed = True
                kills["connect"] += 1
                await run_sync(up_until_ok, stack, 240)
                continue
            victim = rng.choice(crew)
            victim.kill()
            kills["workers"] += 1
            await anyio.sleep(rng.uniform(0.3, 1.5))
            victim.start()
        await run_sync(dml.join)
        assert connect_killed, "the DML ended before Connect could be killed"
        dml_s = time.monotonic() - t0

        # every change captured (the sentinel is in Kafka) and committed by the workers
        main = settings.routes[0].table

        async def caught_up() -> bool:
            ends = await end_offsets(settings.kafka, TOPIC)
            committed = await committed_offsets(settings, TOPIC, len(ends))
            sentinel = await hbase.get(main, SENTINEL.to_bytes(8, "big"))
            return bool(sentinel) and committed == {p: e for p, e in ends.items()}

        t1 = time.monotonic()
        while not await caught_up():
            if time.monotonic() - t1 >= 300:
                ends = await end_offsets(settings.kafka, TOPIC)
                committed = await committed_offsets(settings, TOPIC, len(ends))
                sentinel = bool(await hbase.get(main, SENTINEL.to_bytes(8, "big")))
                alive = [w.alive for w in crew]
                raise AssertionError(f"the workers did not commit every change within 300 s: ends {dict(ends)}, "
                                     f"committed {committed}, sentinel in HBase {sentinel}, workers alive {alive}; "
                                     f"last worker output: {crew[0].output()[-1500:]}")
            await anyio.sleep(1)
        for w in crew:
            assert await run_sync(w.stop) == 0, w.output()[-3000:]
        pg = await run_sync(_pg_rows, stack)
        want = expected_tables(settings, pg)
        problems = _diff(want, await _hbase_tables(hbase, settings))
        assert not problems, f"after the stream: {problems}"

        # through the project's reader: the main table's rows, decoded
        async with Reader(hbase) as reader:
            read = [r async for r in reader.scan(settings.routes[0])]
        assert {r.fields["order_id"] for r in read} == set(pg)
        for r in read:
            row = pg[r.fields["order_id"]]
            assert r.columns.get("o:s") == row["seller_id"] and r.columns.get("o:a") == row["amount_cents"]
            assert r.columns.get("o:t") == row["status"], (r.key, r.columns, row)

        # this run's changes replayed on top by a backfill: nothing changes
        ends = await end_offsets(settings.kafka, TOPIC)
        spec = ",".join(f"{p}:{first[p]}" for p in sorted(ends))
        out = await run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "pipeline", "backfill", "-c", str(config), "-t", TOPIC, "--from-offset", spec,
             "--no-progress", "--no-metrics"], capture_output=True, text=True, timeout=600))
        assert out.returncode == 0, out.stderr[-3000:]
        problems = _diff(want, await _hbase_tables(hbase, settings))
        assert not problems, f"after the backfill: {problems}"
        rows = sum(len(v) for v in want.values())
        changes = sum(ends.values()) - sum(first.values())
        sys.stdout.write(f"\n[cdc figures] operations={sum(workload.counts.values())} {workload.counts} "
                         f"kills={kills} dml_s={dml_s:.1f} rows_compared={rows} per_table="
                         f"{ {t: len(v) for t, v in want.items()} } changes={changes}\n")
    finally:
        for w in crew:
            w.kill()
        await drop_tables(hbase, settings)


# -- the flattened form on a compacted topic ----------------------------------------------------------


def _rest(stack: LocalStack, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{stack.settings.connect_port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read()
    return json.loads(text) if text else None


async def remove_connector(stack: LocalStack, name: str, slot: str) -> None:
    """Delete connector ``name`` (if it was registered) and drop its replication ``slot``."""
    assert stack.cdc is not None
    with contextlib.suppress(Exception):  # a test that failed before registering it
        await run_sync(_rest, stack, "DELETE", f"/connectors/{name}")
    for _ in range(20):  # the slot is free once the connector's task has stopped
        try:
            await run_sync(stack.cdc.pg.sql, f"SELECT pg_drop_replication_slot('{slot}') FROM pg_replication_slots "
                                             f"WHERE slot_name = '{slot}';")
        except Exception:
            await anyio.sleep(1)
        else:
            return


async def _compacted(settings: Settings, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # the project's helper makes plain topics

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        # segments roll every second and the cleaner takes any dirty segment: compaction within the test
        await admin.create_topics([NewTopic(topic, 4, 1, topic_configs={
            "cleanup.policy": "compact", "segment.ms": "1000", "min.cleanable.dirty.ratio": "0.001",
            "min.compaction.lag.ms": "0", "delete.retention.ms": "86400000"})])
    finally:
        await admin.close()


async def _readable(settings: Settings, topic: str, since: dict[int, int]) -> tuple[int, int]:
    """Of the records at or after ``since`` (partition -> offset) a consumer reads now: (all of them,
    tombstones whose delete record (``__deleted`` true, same key) compaction has removed)."""
    ends = await end_offsets(settings.kafka, topic)
    consumer = make_consumer(settings.kafka, group_id=None, topics=[topic], auto_offset_reset="earliest")
    await consumer.start()
    count = 0
    deleted: dict[bytes, int] = {}
    alone = 0
    try:
        last: dict[int, int] = {}
        while any(last.get(p, -1) + 1 < e for p, e in ends.items() if e):
            for tp, msgs in (await consumer.getmany(timeout_ms=1000)).items():
                last[tp.partition] = msgs[-1].offset
                for m in msgs:
                    if m.offset < since.get(tp.partition, 0) or m.key is None:
                        continue
                    count += 1
                    if m.value is None:
                        alone += deleted.pop(m.key, 0) == 0
                    elif b'"__deleted":"true"' in m.value:
                        deleted[m.key] = 1
    finally:
        await consumer.stop()
    return count, alone


async def test_the_flattened_form_on_a_compacted_topic_converges_by_key(
        cdc_stack: LocalStack, hbase: HBaseClient, tmp_path: Path, unique: str) -> None:
    stack = cdc_stack
    assert stack.cdc is not None
    prefix, slot = f"flat{unique}", f"flat_{unique}"
    topic = f"{prefix}.public.orders"
    table = f"flat_orders_{unique}"
    settings = load_settings(
        None, topics=[{"name": topic, "key_format": "json"}],
        tables=[{"name": table, "families": {"o": {"versions": 5}}}],
        routes=[{"name": "orders", "topic": topic, "table": table, "rowkey": "[long($key.order_id)]",
                 "timestamp_field": "$offset", "on_tombstone": "delete", "deleted_field": "__deleted",
                 "columns": {"o:s": "seller_id", "o:b": "buyer_id",
                             "o:a": {"field": "amount_cents", "encoding": "long"},
                             "o:t": {"field": "status", "null": "delete"}}}],
        kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}", "max_poll_records": 2000},
        writer={"max_batch_rows": 500, "concurrency": 2, "commit_interval_ms": 200})
    config = tmp_path / "flat.toml"
    config.write_text(
        f'[kafka]\ngroup_id = "g-{unique}"\ndead_letter_topic = "dlq-{unique}"\nmax_poll_records = 2000\n\n'
        f'[[topics]]\nname = "{topic}"\nkey_format = "json"\n\n'
        f'[[tables]]\nname = "{table}"\nfamilies = {{ o = {{ versions = 5 }} }}\n\n'
        f'[[routes]]\nname = "orders"\ntopic = "{topic}"\ntable = "{table}"\nrowkey = "[long($key.order_id)]"\n'
        'timestamp_field = "$offset"\non_tombstone = "delete"\ndeleted_field = "__deleted"\n'
        'columns = { "o:s" = "seller_id", "o:b" = "buyer_id", "o:a" = { field = "amount_cents", encoding = "long" }, '
        '"o:t" = { field = "status", null = "delete" } }\n')
    assert load_settings(config).routes == settings.routes
    await create_tables(hbase, settings, recreate=True)
    await _compacted(settings, topic)
    await run_sync(stack.cdc.pg.sql, "DELETE FROM orders;")
    props = connector_properties(stack.settings, stack.cdc.pg.password_file)
    props |= {"name": prefix, "topic.prefix": prefix, "slot.name": slot, "table.include.list": "public.orders",
              "transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
              "transforms.unwrap.delete.tombstone.handling.mode": "rewrite-with-tombstone",
              "transforms.unwrap.add.fields": "lsn"}
    await run_sync(_rest, stack, "POST", "/connectors", {"name": prefix, "config": props})
    worker = WorkerProcess(config, tmp_path / "worker.log", stack)
    try:
        workload = Workload(seed=34)
        script = workload.script(OPERATIONS // 5)
        half = len(script) // 2
        # the first half with the worker running: it writes rows as they change
        worker.start()
        for start in range(0, half, 200):
            await run_sync(stack.cdc.pg.sql, "\n".join(script[start:min(half, start + 200)]), "shop", 120.0)
        await anyio.sleep(5)
        worker.kill()
        # the second half while it is away, deleting many of those rows; the log cleaner then compacts
        # each such key down to its tombstone, so the worker learns of those deletes from tombstones alone
        for start in range(half, len(script), 200):
            await run_sync(stack.cdc.pg.sql, "\n".join(script[start:start + 200]), "shop", 120.0)
        await run_sync(stack.cdc.pg.sql, f"INSERT INTO orders VALUES ({SENTINEL}, 's00', 'b000', 1, 'last', now());")
        # The cleaner never touches a partition's active segment, and a segment rolls only when a record is
        # appended to it after segment.ms: Connect may ship the whole second half within one second, into one
        # active segment. Rows updated while we wait keep appending (their ids spread over all 4 partitions).
        ticks = range(SENTINEL + 1, SENTINEL + 1 + TICK_ROWS)
        await run_sync(stack.cdc.pg.sql, "INSERT INTO orders VALUES " + ", ".join(
            f"({i}, 's00', 'b000', 0, 'tick', now())" for i in ticks) + ";")
        resume = await committed_offsets(settings, topic, 4)
        t0 = time.monotonic()
        while True:
            total = sum((await end_offsets(settings.kafka, topic)).values()) - sum(resume.values())
            readable, alone = await _readable(settings, topic, resume)
            if alone >= 100:
                break
            assert time.monotonic() - t0 < 240, f"compaction left only {alone} tombstones alone within 240 s"
            await anyio.sleep(2)
            await run_sync(stack.cdc.pg.sql, f"UPDATE orders SET amount_cents = amount_cents + 1 "
                                             f"WHERE order_id > {SENTINEL};")
        worker.start()

        async def caught_up() -> bool:
            ends = await end_offsets(settings.kafka, topic)
            committed = await committed_offsets(settings, topic, len(ends))
            return bool(await hbase.get(table, SENTINEL.to_bytes(8, "big"))) and committed == dict(ends)

        t1 = time.monotonic()
        while not await caught_up():
            assert time.monotonic() - t1 < 300, "the worker did not commit every change within 300 s"
            await anyio.sleep(1)
        assert await run_sync(worker.stop) == 0, worker.output()[-3000:]
        pg = await run_sync(_pg_rows, stack)
        want = {table: expected_tables(cdc_settings(unique), pg)[f"orders_{unique}"]}
        got = await _hbase_tables(hbase, settings)
        problems = _diff(want, got)
        assert not problems, f"after the compacted topic: {problems}"
        out = await run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "pipeline", "backfill", "-c", str(config), "-t", topic, "--from-offset",
             ",".join(f"{p}:0" for p in range(4)), "--no-progress", "--no-metrics"],
            capture_output=True, text=True, timeout=600))
        assert out.returncode == 0, out.stderr[-3000:]
        problems = _diff(want, await _hbase_tables(hbase, settings))
        assert not problems, f"after the backfill: {problems}"
        sys.stdout.write(f"\n[cdc figures] flattened+compacted: operations={sum(workload.counts.values())} "
                         f"records after the worker's stop={total}, readable after compaction={readable}, of them "
                         f"tombstones whose delete record was compacted away={alone}; "
                         f"rows compared={len(want[table])}\n")
    finally:
        worker.kill()
        await remove_connector(stack, prefix, slot)
        await drop_tables(hbase, settings)
