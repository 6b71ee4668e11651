"""A database's changes into HBase, end to end, through the real servers: random DML on the local
stack's PostgreSQL (inserts, updates of plain and of indexed columns, primary-key changes and swaps,
deletes, deletes and re-inserts of one key in one transaction, multi-row transactions; negative keys and
bigint's extremes, NULL buyers that come and go, sellers and buyers holding the delimiter), captured by
Debezium in Kafka Connect, ingested by three workers that are SIGKILLed and restarted at random while
Kafka Connect itself is SIGKILLed and restarted once (it re-sends what it had not flushed); then the
whole topic replayed by a backfill on top. The main table and both index tables must equal what
PostgreSQL holds, compared row by row directly and through the project's reader, and the only dead
letters are the seller index's refusals of sellers holding its delimiter."""

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
from devstack import LocalStack
from devstack.connect import connector_properties
from pipeline.core.model import TopicPartition
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.deadletter import HEADER_PREFIX
from pipeline.runtime.read.reader import Reader
from pipeline.settings import Settings, load_settings

from .changelog_support import cdc_settings, expected_tables, profile_toml
from .fault_support import WorkerProcess, committed_offsets, up_until_ok
from .worker_support import drop_tables

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

OPERATIONS = 24_000
KEYS = 3_000
TOPIC = "shop.public.orders"
SENTINEL = 2_000_000_000  # written last: once it is in HBase, every change before it was captured
TICK_ROWS = 40  # ids SENTINEL + 1..TICK_ROWS; Kafka's key hash leaves a partition without one with odds of about 1e-5
EXTREMES = (-(2**63), 2**63 - 1)  # order_id is a bigint
SWAP_ID = 0  # the key swap's temporary id: the workload gives orders ids ±1, ±2, ... and the extremes


class Workload:
    """Random DML in transactions of 1-8 operations, as SQL text; a model of the live keys only
    chooses valid targets (PostgreSQL holds the truth).

    ``edges`` adds the values that broke routes before: a quarter of new ids negative, bigint's
    extremes (inserted, updated, moved, swapped and deleted like any order, and live at the end), a NULL
    buyer in about a third of inserts and buyer updates, buyers holding ``_`` (``b_x_7``), and sellers
    holding ``_`` (``s_07``) in a few inserts and updates: the seller index refuses those (a dead letter
    for its route), and a seller moving across the delimiter must leave no stale and no missing index
    row (the old row's delete stands when the new one is refused; a row never written is not deleted)."""

    def __init__(self, seed: int, edges: bool = False) -> None:
        self.rng = random.Random(seed)
        self.edges = edges
        self.live: set[int] = set()
        #: per live order: (its seller holds ``_``, its buyer is NULL)
        self.traits: dict[int, tuple[bool, bool]] = {}
        self.next_id = 1
        self.counts: dict[str, int] = {}
        #: how often the edges came up (apart from ``counts``, whose sum is the operations)
        self.edge_counts: dict[str, int] = {}

    def _new_id(self) -> int:
        oid = self.next_id
        self.next_id += 1
        if not self.edges:
            return oid
        free = [x for x in EXTREMES if x not in self.live]
        if free and self.rng.random() < 0.02:
            return self.rng.choice(free)
        return -oid if self.rng.random() < 0.25 else oid

    def _buyer(self) -> str:
        r = self.rng
        if not self.edges:
            return f"'b{r.randrange(200):03d}'"
        pick = r.random()
        return "NULL" if pick < 0.33 else f"'b_x_{r.randrange(200)}'" if pick < 0.5 else f"'b{r.randrange(200):03d}'"

    def _seller(self, delimited: bool) -> str:
        n = self.rng.randrange(40)
        return f"'s_{n:02d}'" if delimited else f"'s{n:02d}'"

    def _values(self, oid: int) -> str:
        r = self.rng
        status = r.choice(["'new'", "'paid'", "'sent'", "NULL"])
        delimited = self.edges and r.random() < 0.02
        seller, buyer = self._seller(delimited), self._buyer()
        self.traits[oid] = (delimited, buyer == "NULL")
        return f"({oid}, {seller}, {buyer}, {r.randrange(1, 10**7)}, {status}, now())"

    def _count(self, what: str, counts: dict[str, int] | None = None) -> None:
        counts = self.counts if counts is None else counts
        counts[what] = counts.get(what, 0) + 1

    def _update_indexed(self, oid: int) -> str:
        delimited, was_null = self.traits[oid]
        if self.edges and self.rng.random() < (0.5 if delimited else 0.02):  # across, and mostly back
            delimited = not delimited
            self._count("seller_to_delimited" if delimited else "seller_from_delimited", self.edge_counts)
        seller, buyer = self._seller(delimited), self._buyer()
        self.traits[oid] = (delimited, buyer == "NULL")
        if was_null != (buyer == "NULL"):
            self._count("buyer_from_null" if was_null else "buyer_to_null", self.edge_counts)
        return f"UPDATE orders SET seller_id = {seller}, buyer_id = {buyer} WHERE order_id = {oid};"

    def transaction(self) -> str:
        r = self.rng
        sql = ["BEGIN;"]
        for _ in range(r.randrange(1, 9)):
            pick = r.random()
            if not self.live or (pick < 0.22 and len(self.live) < KEYS):
                oid = self._new_id()
                self.live.add(oid)
                sql.append(f"INSERT INTO orders VALUES {self._values(oid)};")
                self._count("insert")
                continue
            oid = r.choice(sorted(self.live)) if len(self.live) < 64 else r.choice(tuple(self.live))
            if self.edges and r.random() < 0.01 and self.live.intersection(EXTREMES):
                oid = r.choice(sorted(self.live.intersection(EXTREMES)))
            if pick < 0.50:
                status = r.choice(["'new'", "'paid'", "'sent'", "NULL"])
                sql.append(f"UPDATE orders SET status = {status}, amount_cents = {r.randrange(1, 10**7)}, "
                           f"updated_at = now() WHERE order_id = {oid};")
                self._count("update_plain")
            elif pick < 0.66:
                sql.append(self._update_indexed(oid))
                self._count("update_indexed")
            elif pick < 0.72:
                new = self._new_id()
                self.live.discard(oid)
                self.live.add(new)
                self.traits[new] = self.traits.pop(oid)
                sql.append(f"UPDATE orders SET order_id = {new} WHERE order_id = {oid};")
                self._count("update_key")
            elif pick < 0.76 and len(self.live) > 1:
                other = r.choice(tuple(self.live - {oid}))
                sql += [f"UPDATE orders SET order_id = {SWAP_ID} WHERE order_id = {oid};",
                        f"UPDATE orders SET order_id = {oid} WHERE order_id = {other};",
                        f"UPDATE orders SET order_id = {other} WHERE order_id = {SWAP_ID};"]
                self.traits[oid], self.traits[other] = self.traits[other], self.traits[oid]
                self._count("swap_keys")
            elif pick < 0.88:
                self.live.discard(oid)
                del self.traits[oid]
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
        for oid in EXTREMES if self.edges else ():
            if oid not in self.live:  # the extremes end up in the tables compared
                self.live.add(oid)
                out.append(f"INSERT INTO orders VALUES {self._values(oid)};")
                self._count("insert")
        return out


def _pg_rows(stack: LocalStack) -> dict[int, dict[str, Any]]:
    assert stack.cdc is not None
    rows = stack.cdc.pg.sql("SELECT order_id, seller_id, coalesce(buyer_id, '\\N'), amount_cents, "
                            "coalesce(status, '\\N') FROM orders;")
    return {int(o): {"order_id": int(o), "seller_id": s, "buyer_id": None if b == "\\N" else b,
                     "amount_cents": int(a), "status": None if t == "\\N" else t} for o, s, b, a, t in rows}


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


Tables = dict[str, dict[bytes, dict[bytes, bytes]]]


def _compare(want: Tables, got: Tables) -> dict[str, tuple[list[bytes], list[bytes], list[bytes]]]:
    """table -> (rows missing from HBase, stale rows HBase holds beyond ``want``, rows whose cells differ)."""
    out = {}
    for table, rows in want.items():
        have = got[table]
        out[table] = ([k for k in rows if k not in have], [k for k in have if k not in rows],
                      [k for k in rows if k in have and have[k] != rows[k]])
    return out


def _diff(want: Tables, got: Tables) -> str:
    problems = []
    for table, (missing, stale, wrong) in _compare(want, got).items():
        if missing or stale or wrong:
            example = [(k, got[table][k], want[table][k]) for k in wrong[:1]]
            problems.append(f"{table}: {len(missing)} missing (e.g. {missing[:2]}), {len(stale)} stale "
                            f"(e.g. {stale[:2]}), {len(wrong)} differ (e.g. {example})")
    return "; ".join(problems)


def _tally(want: Tables, got: Tables) -> dict[str, str]:
    """Per table, the rows compared and how many were missing, stale or differing."""
    return {table: f"rows={len(want[table])} missing={len(m)} stale={len(s)} differ={len(w)}"
            for table, (m, s, w) in _compare(want, got).items()}


async def _dead_letters(settings: Settings) -> dict[tuple[str | None, str], int]:
    """(route, reason) -> how many records the dead-letter topic holds, from its headers (route None:
    a record refused as a whole)."""
    topic = settings.kafka.dead_letter_topic
    ends = await end_offsets(settings.kafka, topic)
    counts: dict[tuple[str | None, str], int] = {}
    consumer = make_consumer(settings.kafka, group_id=None, topics=[topic], auto_offset_reset="earliest")
    await consumer.start()
    try:
        last: dict[int, int] = {}
        with anyio.fail_after(120):
            while any(last.get(p, -1) + 1 < e for p, e in ends.items()):
                for tp, msgs in (await consumer.getmany(timeout_ms=1000)).items():
                    last[tp.partition] = msgs[-1].offset
                    for m in msgs:
                        if m.offset >= ends[tp.partition]:
                            continue
                        headers = {name: value or b"" for name, value in m.headers}
                        route = headers.get(f"{HEADER_PREFIX}route")
                        where = (None if route is None else route.decode(),
                                 headers.get(f"{HEADER_PREFIX}reason", b"").decode())
                        counts[where] = counts.get(where, 0) + 1
    finally:
        await consumer.stop()
    return counts


def _shown(dead: dict[tuple[str | None, str], int]) -> dict[str, int]:
    return {f"{route}/{reason}": n for (route, reason), n in sorted(dead.items(), key=str)}


def _check_dead_letters(dead: dict[tuple[str | None, str], int], seller_route: str, when: str) -> None:
    """The only dead letters are the seller index's refusals of sellers holding its delimiter. A route that
    could not find the row a change addresses (``no_before_image``, ``missing_field``) or refused a NULL key
    (``null_key``: a Debezium route skips it) would leave an index row stale or missing."""
    wrong = {reason for _, reason in dead} & {"no_before_image", "missing_field", "null_key"}
    assert not wrong, f"{when}: dead letters {_shown(dead)}"
    assert set(dead) == {(seller_route, "contains_delimiter")}, f"{when}: dead letters {_shown(dead)}"


async def test_random_dml_reaches_main_and_index_tables_through_kills_and_a_replay(
        cdc_stack: LocalStack, hbase: HBaseClient, tmp_path: Path, unique: str,
        capsys: pytest.CaptureFixture[str]) -> None:
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
    workload = Workload(seed=33, edges=True)
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
        seller_route = settings.routes[1].name
        dead = await _dead_letters(settings)
        problems = _diff(want, await _hbase_tables(hbase, settings))
        assert not problems, f"after the stream: {problems}; dead letters {_shown(dead)}"
        _check_dead_letters(dead, seller_route, "after the stream")
        # what the workload left for the tables to prove: orders of a delimited seller (in the main table
        # and the buyer index, not the seller index), NULL buyers (not in the buyer index), the extremes
        shape = {"delimited_sellers": sum("_" in r["seller_id"] for r in pg.values()),
                 "null_buyers": sum(r["buyer_id"] is None for r in pg.values()),
                 "delimited_buyers": sum("_" in (r["buyer_id"] or "") for r in pg.values()),
                 "negative_ids": sum(o < 0 for o in pg)}
        assert all(shape.values()) and set(EXTREMES) <= set(pg), (shape, workload.edge_counts)

        # through the project's reader: the main table's rows, decoded
        async with Reader(hbase) as reader:
            read = [r async for r in reader.scan(settings.routes[0])]
        assert {r.fields["order_id"] for r in read} == set(pg)
        for r in read:
            row = pg[r.fields["order_id"]]
            assert r.columns.get("o:s") == row["seller_id"] and r.columns.get("o:a") == row["amount_cents"]
            assert r.columns.get("o:b") == row["buyer_id"] and r.columns.get("o:t") == row["status"], (
                r.key, r.columns, row)

        # this run's changes replayed on top by a backfill: nothing changes
        ends = await end_offsets(settings.kafka, TOPIC)
        spec = ",".join(f"{p}:{first[p]}" for p in sorted(ends))
        out = await run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "pipeline", "backfill", "-c", str(config), "-t", TOPIC, "--from-offset", spec,
             "--no-progress", "--no-metrics"], capture_output=True, text=True, timeout=600))
        assert out.returncode == 0, out.stderr[-3000:]
        got = await _hbase_tables(hbase, settings)
        dead = await _dead_letters(settings)
        problems = _diff(want, got)
        assert not problems, f"after the backfill: {problems}; dead letters {_shown(dead)}"
        _check_dead_letters(dead, seller_route, "after the backfill")
        rows = sum(len(v) for v in want.values())
        changes = sum(ends.values()) - sum(first.values())
        with capsys.disabled():  # the figures, on the terminal of every run
            sys.stdout.write(f"\n[cdc figures] operations={sum(workload.counts.values())} {workload.counts} "
                             f"edges={workload.edge_counts} final={shape} kills={kills} dml_s={dml_s:.1f} "
                             f"changes={changes} rows_compared={rows} tables={_tally(want, got)} "
                             f"dead_letters={_shown(dead)}\n")
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
                                             f"WHERE order_id BETWEEN {ticks.start} AND {ticks.stop - 1};")
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
