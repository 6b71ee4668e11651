"""The ingest worker against the real Kafka and HBase."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, make_consumer
from connectors.kafka import TopicPartition as KafkaTP
from pipeline.errors import ConfigError
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import KafkaSettings, Settings

from .worker_support import (
    drop_tables,
    expected_cells,
    order_event,
    order_settings,
    produce,
    setup,
    signal_and_wait,
    stop_offsets,
    write_config,
)

N = 600


async def _committed(settings: KafkaSettings, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = make_consumer(settings, group_id=group)
    await consumer.start()
    try:
        out = {}
        for p in range(partitions):
            out[p] = await consumer.committed(KafkaTP(topic, p)) or 0
        return out
    finally:
        await consumer.stop()


async def _assert_all_landed(hbase: HBaseClient, settings: Settings, events: list[dict[str, Any]],
                             partly: tuple[dict[str, Any], str] | None = None) -> None:
    """Every event's rows and nothing else; ``partly``: an event and the one table it landed in."""
    by_table: dict[str, dict[bytes, dict[bytes, bytes]]] = {}
    for e in events:
        for table, (row, cells) in expected_cells(settings, e).items():
            by_table.setdefault(table, {})[row] = cells
    if partly is not None:
        event, only = partly
        row, cells = expected_cells(settings, event)[only]
        by_table[only][row] = cells
    for table, expected in by_table.items():
        got = {k: v for k, v in await hbase.scan_page(table, limit=len(expected) + 100)}
        assert set(got) == set(expected), f"{table}: {len(set(expected) - set(got))} rows missing"
        for row, cells in expected.items():
            assert got[row] == cells, (table, row)
        # every cell has exactly one version, written with the event's timestamp
        row, _ = next(iter(expected.items()))
        for column in expected[row]:
            versions = await hbase.cell_versions(table, row, column, versions=5)
            assert len(versions) == 1


async def test_every_event_lands_with_exact_bytes_in_every_table(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase)
    try:
        events = [order_event(i) for i in range(N)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(120):
            summary = await worker.run()
        assert summary.consumed == N and summary.dead_lettered == 0
        assert summary.rows_written == 3 * N
        await _assert_all_landed(hbase, settings, events)
        committed = await _committed(settings.kafka, settings.kafka.group_id, topic, 4)
        assert sum(committed.values()) == N
    finally:
        await drop_tables(hbase, settings)


async def test_bad_input_goes_to_dead_letter_topic_and_worker_carries_on(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique, max_cell_bytes=1000)
    topic = await setup(settings, hbase, partitions=1)
    try:
        good = [order_event(i) for i in range(20)]
        bad = {
            "undecodable": b"{not json",
            "not_an_object": b"[1, 2, 3]",
            "missing_field": orjson.dumps({k: v for k, v in order_event(900).items() if k != "seller_id"}),
            "bad_type": orjson.dumps({**order_event(901), "timestamp": "yesterday"}),
            "key_too_long": orjson.dumps({**order_event(902), "order_number": "X" * 40000}),
            "value_too_large": orjson.dumps({**order_event(903), "buyer_id": "B" * 2000}),
        }
        values = [orjson.dumps(e) for e in good[:10]] + list(bad.values()) + [orjson.dumps(e) for e in good[10:]]
        await produce(settings, topic, values, headers=[("trace-id", b"t-42"), ("empty", None)])
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(120):
            summary = await worker.run()
        # every route refuses the first five (one dead letter each, of no route); value_too_large costs the
        # seller and index routes only (a dead letter each), and the buyer route writes its row
        assert summary.dead_lettered == len(bad) + 1
        await _assert_all_landed(hbase, settings, good, partly=(orjson.loads(bad["value_too_large"]),
                                                                settings.routes[1].table))

        consumer = make_consumer(settings.kafka, group_id=None, topics=[settings.kafka.dead_letter_topic],
                                 auto_offset_reset="earliest", max_partition_fetch_bytes=16 * 1024 * 1024)
        await consumer.start()
        try:
            seen: dict[tuple[str, str | None], tuple[bytes, dict[str, bytes]]] = {}
            with anyio.fail_after(30):
                while len(seen) < len(bad) + 1:
                    for msgs in (await consumer.getmany(timeout_ms=500)).values():
                        for m in msgs:
                            h = dict(m.headers)
                            route = h.get("hbase-ingest.route")
                            seen[h["hbase-ingest.reason"].decode(), route and route.decode()] = (m.value, h)
        finally:
            await consumer.stop()
        assert set(seen) == {(reason, None) for reason in bad if reason != "value_too_large"} | {
            ("value_too_large", "seller"), ("value_too_large", "index")}
        for (reason, _), (value, headers) in seen.items():
            original = bad[reason]
            assert value == original
            assert headers["hbase-ingest.source.topic"] == topic.encode()
            assert headers["hbase-ingest.source.partition"] == b"0"
            assert int(headers["hbase-ingest.source.offset"]) == 10 + list(bad).index(reason)
            assert headers["hbase-ingest.error"]
            assert headers["trace-id"] == b"t-42"  # the original record's headers are kept
            assert headers["empty"] is None  # a header with no value stays one
    finally:
        await drop_tables(hbase, settings)


async def test_config_that_cannot_work_fails_at_start(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    with pytest.raises(ConfigError, match=f"route 'seller': table 'seller_{unique}' does not exist"):
        await Worker(settings, hbase, KafkaBroker(settings.kafka)).check_tables()
    await setup(settings, hbase)
    try:
        broken = order_settings(unique)
        routes = [r.model_dump() for r in broken.routes]
        routes[0]["columns"] = {"zz:b": {"field": "buyer_id"}}
        from pipeline.settings import load_settings

        broken = load_settings(None, routes=routes, kafka=broken.kafka.model_dump(mode="json"))
        with pytest.raises(ConfigError, match="has no column family zz"):
            await Worker(broken, hbase, KafkaBroker(broken.kafka)).check_tables()
        routes[0]["columns"] = {"o:b": {"field": "buyer_id"}}
        routes[0]["rowkey"] = "[seller_id][long(timestamp"
        with pytest.raises(ConfigError, match="route 'seller': rowkey"):
            Worker(load_settings(None, routes=routes), hbase, KafkaBroker(settings.kafka))
    finally:
        await drop_tables(hbase, settings)


def _spawn(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", "--config", str(config),
                             "--log-level", "WARNING"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


async def _wait_rows(hbase: HBaseClient, table: str, at_least: int, limit_s: float = 120) -> int:
    with anyio.fail_after(limit_s):
        while True:
            n = await hbase.count(table)
            if n >= at_least:
                return n
            await anyio.sleep(0.2)


async def test_kill_9_then_restart_loses_nothing_and_adds_no_versions(
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    # one writer and small batches keep the worker mid-stream when the kill lands
    settings = order_settings(unique, max_batch_rows=20, commit_interval_ms=300, concurrency=1)
    topic = await setup(settings, hbase)
    try:
        events = [order_event(i) for i in range(20_000)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        proc = _spawn(write_config(tmp_path / "w.toml", settings))
        try:
            await _wait_rows(hbase, settings.routes[2].table, 300)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        landed = await hbase.count(settings.routes[2].table)
        assert landed < len(events), "the kill came too late to test a restart"
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(180):
            summary = await worker.run()
        assert summary.consumed >= len(events) - landed  # re-delivered from the last commit
        await _assert_all_landed(hbase, settings, events)
        for table in {r.table for r in settings.routes}:
            assert await hbase.count(table) == len(events)
    finally:
        await drop_tables(hbase, settings)


@pytest.mark.parametrize("signals", [(signal.SIGTERM,), (signal.SIGTERM, signal.SIGINT)],
                         ids=["sigterm-drains", "second-signal-stops-now"])
async def test_sigterm_drains_commits_and_leaves(hbase: HBaseClient, unique: str, tmp_path: Path,
                                                 signals: tuple[signal.Signals, ...]) -> None:
    # a drain may take up to 10 minutes: after a second signal the process must not wait for it
    settings = order_settings(unique, max_batch_rows=20, concurrency=1, max_in_flight_bytes=64 * 1024,
                              shutdown_timeout_s=600)
    topic = await setup(settings, hbase)
    try:
        events = [order_event(i) for i in range(20_000)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        proc = _spawn(write_config(tmp_path / "w.toml", settings))
        try:
            await _wait_rows(hbase, settings.routes[2].table, 200)
        except BaseException:
            proc.kill()
            raise
        code, out = await signal_and_wait(proc, *signals)
        assert code == (0 if len(signals) == 1 else 130), out[-2000:]
        committed = await _committed(settings.kafka, settings.kafka.group_id, topic, 4)
        # everything below each committed offset is in HBase (nothing committed past unwritten data)
        index = {k for k, _ in await hbase.scan_page(settings.routes[2].table, limit=len(events) + 1)}
        consumer = make_consumer(settings.kafka, group_id=None)
        await consumer.start()
        try:
            for p, off in committed.items():
                if off == 0:
                    continue
                tp = KafkaTP(topic, p)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                got = 0
                with anyio.fail_after(30):
                    while got < off:
                        for msgs in (await consumer.getmany(tp, timeout_ms=500)).values():
                            for m in msgs:
                                if m.offset < off:
                                    got += 1
                                    assert orjson.loads(m.value)["order_number"].encode() in index
        finally:
            await consumer.stop()
        assert 0 < sum(committed.values()) < len(events), "SIGTERM should land mid-stream"
    finally:
        await drop_tables(hbase, settings)


async def test_two_workers_in_one_group_split_partitions_exactly_once(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=6)
    try:
        a, b = (Worker(settings, hbase, KafkaBroker(settings.kafka)) for _ in range(2))
        events = [order_event(i) for i in range(1200)]
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            tg.start_soon(b.run)
            with anyio.fail_after(60):  # a stable group of two: the six partitions split between them
                while not ((pa := a.progress.assigned) and (pb := b.progress.assigned) and len(pa | pb) == 6
                           and not pa & pb):
                    await anyio.sleep(0.1)
            await produce(settings, topic, [orjson.dumps(e) for e in events])
            ends = await stop_offsets(settings, topic)
            with anyio.fail_after(120):
                while not all({**a.stats.committed, **b.stats.committed}.get(tp, 0) >= e for tp, e in ends.items()):
                    await anyio.sleep(0.2)
            a.request_stop()
            b.request_stop()
        assert a.stats.consumed > 0 and b.stats.consumed > 0
        assert a.stats.consumed + b.stats.consumed == len(events)
        assert a.stats.rows_written + b.stats.rows_written == 3 * len(events)
        await _assert_all_landed(hbase, settings, events)
    finally:
        await drop_tables(hbase, settings)
