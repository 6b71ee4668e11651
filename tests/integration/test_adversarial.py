"""A topic of adversarial records through the worker, against the real Kafka and HBase: integers at
every 64-bit boundary (the timestamp 2**63 once stopped every worker of a group), values of every
JSON type where text is expected, nulls in every position, the delimiter and NUL bytes in keys,
Connect envelopes, tombstones, bytes that are no JSON, keys over HBase's limit.

The worker must never stop, must commit every offset, must write exactly what routing gives for each
record (the reference, record by record: rows compared cell by cell with HBase) and must dead-letter
each refusal once, with its route and reason. A route's refusal must cost that route only. Then the
index route is fixed and its dead letters re-driven into it (``backfill --route``): it gets their rows."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, make_consumer
from pipeline.core.model import MutationKind, TopicPartition
from pipeline.core.routes.router import Router
from pipeline.runtime.backfill.redrive import redrive_settings
from pipeline.runtime.backfill.run import Backfill, SliceArgs
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import Settings, load_settings

from .worker_support import drop_tables, produce, setup, stop_offsets

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

N = 3000
EDGES = [0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]


def _settings(unique: str) -> Settings:
    topic = f"adv-{unique}"
    routes = [
        {"name": "main", "topic": topic, "table": f"main_{unique}", "rowkey": "[salt(id, 4)][id]",
         "timestamp_field": "ts",
         "columns": {"d:v": "v", "d:j": {"field": "j", "encoding": "json", "required": False},
                     "d:n": {"field": "n", "encoding": "long", "required": False}}},
        {"name": "by_k", "topic": topic, "table": f"by_k_{unique}", "rowkey": "[k][_][id]", "timestamp_field": "ts",
         "columns": {"d:v": {"field": "v", "required": False}}},
        {"name": "by_k_escaped", "topic": topic, "table": f"by_ke_{unique}", "rowkey": "[text(k, escaped)][id]",
         "null_key": "skip", "timestamp_field": "ts", "columns": {"d:n": {"field": "n", "required": False}}},
    ]
    tables = [{"name": r["table"], "families": {"d": {"versions": 5}}} for r in routes]
    return load_settings(None, routes=routes, tables=tables,
                         writer={"max_batch_rows": 300, "max_batch_age_ms": 50, "commit_interval_ms": 200,
                                 "max_cell_bytes": 2000},
                         kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}",
                                "max_poll_records": 500})


def _odd(rng: random.Random) -> Any:
    return rng.choice([None, True, False, 0.1, 1e300, -0.0, "", "_", "a_b", "x\x00y", "é€", [1, "a"], {"a": {}},
                       "A" * 3000, rng.choice(EDGES)])


def _records(rng: random.Random) -> list[bytes | None]:
    """N values: mostly good events, each one of them or a tenth of them bent in one or more ways."""
    out: list[bytes | None] = []
    for i in range(N):
        event: dict[str, Any] = {"id": f"u{i}", "k": rng.choice(["x", "y", "z", "w"]), "ts": 1_700_000_000_000 + i,
                                 "v": f"v{i}", "j": {"i": i}, "n": i}
        shape = rng.random()
        if shape < 0.55:
            out.append(json.dumps(event).encode())
            continue
        for _ in range(rng.randrange(1, 3)):
            field = rng.choice(["id", "k", "k", "ts", "ts", "v", "j", "n", "drop"])
            if field == "drop":
                event.pop(rng.choice(list(event)), None)
            elif field == "id" and rng.random() < 0.5:
                event["id"] = rng.choice([i, -i, 2**64 + i, f"u{i}_x", f"u{i}\x00"])
            else:
                event[field] = _odd(rng)
        text = json.dumps(event).encode()
        kind = rng.random()
        if kind < 0.06:
            out.append(b'{"schema": {"type": "struct"}, "payload": ' + text + b"}")
        elif kind < 0.09:
            out.append(rng.choice([None, b"", b"{", b"[1]", b'"s"', b"\xff\xfe", b'{"id": "\\ud800"}',
                                   b'{"id": "k' + b"K" * 40000 + b'", "k": "x", "ts": 1, "v": "x"}']))
        else:
            out.append(text)
    return out


class _Rec:
    def __init__(self, offset: int, value: bytes | None) -> None:
        self.offset, self.value, self.key, self.timestamp = offset, value, None, 0
        self.headers: tuple[tuple[str, bytes | None], ...] = ()


async def _dead_letters(settings: Settings, expected: int) -> list[tuple[int, str | None, str]]:
    consumer = make_consumer(settings.kafka, group_id=None, topics=[settings.kafka.dead_letter_topic],
                             auto_offset_reset="earliest", max_partition_fetch_bytes=16 * 1024 * 1024)
    await consumer.start()
    seen: list[tuple[int, str | None, str]] = []
    try:
        with anyio.move_on_after(30):
            while len(seen) < expected:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    for m in msgs:
                        h = dict(m.headers)
                        route = h.get("hbase-ingest.route")
                        seen.append((int(h["hbase-ingest.source.offset"]), route.decode() if route else None,
                                     h["hbase-ingest.reason"].decode()))
        for msgs in (await consumer.getmany(timeout_ms=1000)).values():  # nothing more than expected
            seen += [(-1, None, "unexpected")] * len(msgs)
    finally:
        await consumer.stop()
    return seen


async def test_a_topic_of_adversarial_records_never_stops_the_worker(hbase: HBaseClient, unique: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    settings = _settings(unique)
    topic = await setup(settings, hbase, partitions=1)
    try:
        values = _records(random.Random(44))
        await produce(settings, topic, values, keys=[b"k"] * len(values))  # type: ignore[arg-type]
        # what routing decides for each record (the reference), to compare the worker's work with
        router = Router(settings.routes, settings.writer.max_key_bytes, settings.writer.max_cell_bytes)
        tp = TopicPartition(topic, 0)
        want: dict[str, dict[bytes, dict[bytes, bytes]]] = {r.table: {} for r in settings.routes}
        refusals: list[tuple[int, str | None, str]] = []
        for offset, value in enumerate(values):
            got = router.route_record(tp, _Rec(offset, value))
            for m in got.mutations:
                assert m.kind is MutationKind.PUT
                want[m.table].setdefault(m.row, {}).update(m.cells)
            refusals += [(offset, r.route, r.error.reason) for r in got.refusals]

        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(180):
            summary = await worker.run()  # a value that raised out of routing or the writer would raise here
        assert summary.consumed == N and summary.committed == {tp: N}
        assert summary.dead_lettered == len(refusals)

        rows = 0
        for table, expected in want.items():
            got_rows = dict(await hbase.scan_page(table, limit=N + 100))
            missing = set(expected) - set(got_rows)
            stale = set(got_rows) - set(expected)
            differ = [k for k in expected if k in got_rows and got_rows[k] != expected[k]]
            assert not (missing or stale or differ), f"{table}: {len(missing)} missing, {len(stale)} stale, " \
                                                     f"{len(differ)} differ"
            rows += len(expected)
        dead = await _dead_letters(settings, len(refusals))
        assert sorted(dead, key=str) == sorted(refusals, key=str)
        by_route = Counter((route, reason) for _, route, reason in dead)
        # the record that once stopped every worker, and one route's refusal costing that route only
        assert any(reason == "bad_type" for _, _, reason in dead)
        assert by_route[("by_k", "contains_delimiter")] > 0 and by_route[("by_k", "null_key")] > 0
        partial = {off for off, route, _ in dead if route is not None}
        assert sum(1 for off in partial if router.route_record(tp, _Rec(off, values[off])).mutations) > 100

        # the index fixed (a delimiter its values never hold), then its dead letters re-driven into it
        fixed = settings.model_copy(update={"routes": [
            r.model_copy(update={"rowkey": "[k][#][id]"}) if r.name == "by_k" else r for r in settings.routes]})
        redrive = redrive_settings(fixed, "by_k", settings.kafka.dead_letter_topic)
        by_k = Router([fixed.route("by_k")], settings.writer.max_key_bytes, settings.writer.max_cell_bytes)
        table = redrive.routes[0].table
        before = len(want[table])
        for offset in sorted({off for off, route, _ in refusals if route in ("by_k", None)}):
            for m in by_k.route_record(tp, _Rec(offset, values[offset])).mutations:
                want[table].setdefault(m.row, {}).update(m.cells)
        backfill = Backfill(redrive, hbase, KafkaBroker(settings.kafka), SliceArgs(settings.kafka.dead_letter_topic),
                            state_dir=tmp_path)
        with anyio.fail_after(120):
            again = await backfill.run()
        assert again.complete and len(want[table]) > before
        got_rows = dict(await hbase.scan_page(table, limit=N + 100))
        assert got_rows == want[table], f"{table}: {len(set(want[table]) - set(got_rows))} missing after the re-drive"

        routes = ", ".join(f"{route or '(record)'}/{reason} {n}" for (route, reason), n in sorted(by_route.items(),
                                                                                                   key=str))
        with capsys.disabled():  # the figures, on the terminal of every run
            sys.stdout.write(f"\n[adversarial] {N} records, {rows} rows compared over {len(want)} tables (0 missing, "
                             f"0 stale, 0 differing); {len(dead)} dead letters: {routes}; re-drive of by_k: "
                             f"{len(want[table]) - before} rows, {again.dead_lettered} dead letters again\n")
    finally:
        await drop_tables(hbase, settings)
