"""Backfill against the real Kafka and HBase: time windows, fixed ends, SIGINT + resume, idempotence."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, common_options, make_consumer, make_producer
from connectors.kafka import TopicPartition as KafkaTP
from pipeline.errors import ConfigError
from pipeline.runtime.backfill.run import (
    Backfill,
    SliceArgs,
    default_group,
    parse_offsets,
    parse_time,
    throttled_settings,
)
from pipeline.runtime.metrics import attach_metrics
from pipeline.settings import KafkaSettings, Settings

from .worker_support import (
    drop_tables,
    expected_cells,
    order_event,
    order_settings,
    setup,
    signal_and_wait,
    write_config,
)

MAY_2024_MS = 1_714_521_600_000  # 2024-05-01T00:00:00Z
# Records carry Kafka timestamps from a whole hour a day ago: recent enough that the broker's
# time-based retention (7 days by default) never deletes them while a test runs. (Fixed timestamps
# from 2024 were deleted by the retention check, every 5 minutes, in the middle of a test.)
BASE_MS = (int(time.time()) // 3600 - 24) * 3_600_000


def _backfill(settings: Settings, hbase: HBaseClient, args: SliceArgs, **options: Any) -> Backfill:
    return Backfill(settings, hbase, KafkaBroker(settings.kafka), args, **options)


async def _produce_timed(settings: Settings, topic: str, events: list[dict[str, Any]], partitions: int,
                         first: int = 0) -> None:
    """Event ``i`` goes to partition ``i % partitions`` with Kafka timestamp ``BASE_MS + i s``."""
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        futs = [await producer.send(topic, orjson.dumps(e), key=str(first + i).encode(),
                                    partition=(first + i) % partitions, timestamp_ms=BASE_MS + (first + i) * 1000)
                for i, e in enumerate(events)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


async def _committed(settings: KafkaSettings, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = make_consumer(settings, group_id=group)
    await consumer.start()
    try:
        return {p: await consumer.committed(KafkaTP(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def _delete_records(settings: KafkaSettings, before: dict[KafkaTP, int]) -> None:
    """What retention does to old segments: the partition's log starts at ``before`` from now on."""
    admin = AIOKafkaAdminClient(**common_options(settings, "-admin"))
    await admin.start()
    try:
        await admin.delete_records({tp: RecordsToDelete(off) for tp, off in before.items()}, timeout_ms=10_000)
    finally:
        await admin.close()


async def _index_rows(hbase: HBaseClient, settings: Settings) -> set[bytes]:
    return {k for k, _ in await hbase.scan_page(settings.routes[2].table, limit=100_000)}


async def _assert_exactly(hbase: HBaseClient, settings: Settings, events: list[dict[str, Any]]) -> None:
    """Every table holds exactly the rows of ``events``, with the expected bytes, one version each."""
    by_table: dict[str, dict[bytes, dict[bytes, bytes]]] = {}
    for e in events:
        for table, (row, cells) in expected_cells(settings, e).items():
            by_table.setdefault(table, {})[row] = cells
    for table, expected in by_table.items():
        got = dict(await hbase.scan_page(table, limit=len(expected) + 1000))
        assert set(got) == set(expected), (table, len(set(expected) - set(got)), len(set(got) - set(expected)))
        assert all(got[row] == cells for row, cells in expected.items()), table
        for row in list(expected)[:: max(1, len(expected) // 20)]:
            for column in expected[row]:
                assert len(await hbase.cell_versions(table, row, column, versions=5)) == 1


async def _snapshot(hbase: HBaseClient, settings: Settings) -> dict[str, list[Any]]:
    """Every row's latest cells with their timestamps, per table (byte-level comparison)."""
    out: dict[str, list[Any]] = {}
    for table in sorted({r.table for r in settings.routes}):
        def scan(c: Any, table: str = table) -> list[Any]:
            return [(k, sorted(v.items())) for k, v in c.table(table).scan(include_timestamp=True, batch_size=2000)]
        out[table] = await hbase.call(scan, table=table)
    return out


# -- pure helpers ------------------------------------------------------------------------------------------

def test_argument_parsing_and_group_naming() -> None:
    assert parse_offsets("0:10, 2:7") == {0: 10, 2: 7}
    for bad in ("0-10", "a:1", "1:2,1:3", ""):
        with pytest.raises(ValueError, match=r"PARTITION:OFFSET|given twice"):
            parse_offsets(bad)
    assert parse_time("2024-05-01T00:00:00Z") == MAY_2024_MS
    assert parse_time("2024-05-01T02:00:00+02:00") == MAY_2024_MS
    assert parse_time("2024-05-01T00:00:00") == MAY_2024_MS  # no zone: UTC
    assert parse_time(str(MAY_2024_MS)) == MAY_2024_MS
    with pytest.raises(ValueError, match="neither an ISO-8601 time nor epoch milliseconds"):
        parse_time("yesterday")
    with pytest.raises(ConfigError):
        SliceArgs("t", from_time_ms=1, from_offsets={0: 1})
    with pytest.raises(ConfigError):
        SliceArgs("t", from_time_ms=5, to_time_ms=5)
    settings = order_settings("x")
    a = SliceArgs("t", from_time_ms=BASE_MS)
    assert default_group(settings, a) == default_group(settings, SliceArgs("t", from_time_ms=BASE_MS))
    assert default_group(settings, a) != default_group(settings, SliceArgs("t", from_time_ms=BASE_MS + 1))
    assert default_group(settings, a).startswith("g-x.backfill.t.")
    assert throttled_settings(settings, 1000).kafka.max_poll_records == 100
    assert throttled_settings(settings, 1).kafka.max_poll_records == 1
    assert throttled_settings(settings, None) is settings


# -- against the stack ---------------------------------------------------------------------------------------

async def test_time_window_writes_exactly_the_events_in_it(hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=3)
    try:
        events = [order_event(i) for i in range(300)]
        await _produce_timed(settings, topic, events, 3)
        # [100 s, 200 s): events 100..199, spread over the three partitions
        args = SliceArgs(topic, from_time_ms=BASE_MS + 100_000, to_time_ms=BASE_MS + 200_000)
        backfill = _backfill(settings, hbase, args, state_dir=tmp_path)
        with anyio.fail_after(60):
            summary = await backfill.run()
        assert summary.complete and summary.events == 100 and summary.rows_written == 300
        assert summary.slice.start == {0: 34, 1: 33, 2: 33} and summary.slice.end == {0: 67, 1: 67, 2: 66}
        await _assert_exactly(hbase, settings, events[100:200])
        # the live group is untouched; the backfill group committed exactly the slice ends
        assert set((await _committed(settings.kafka, settings.kafka.group_id, topic, 3)).values()) == {None}
        assert await _committed(settings.kafka, backfill.group, topic, 3) == summary.slice.end
        # a window after the last record replays nothing and finishes at once
        late = _backfill(settings, hbase, SliceArgs(topic, from_time_ms=BASE_MS + 10_000_000), state_dir=tmp_path)
        with anyio.fail_after(30):
            assert (await late.run()).events == 0
    finally:
        await drop_tables(hbase, settings)


async def test_records_deleted_before_they_were_read_are_reported_as_skipped(
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=2)
    try:
        events = [order_event(i) for i in range(200)]  # event i: partition i % 2, offset i // 2
        await _produce_timed(settings, topic, events, 2)
        first = _backfill(settings, hbase, SliceArgs(topic), state_dir=tmp_path)
        slice_ = await first.prepare()  # resolved and stored, start offsets committed; not run
        assert slice_.start == {0: 0, 1: 0} and slice_.end == {0: 100, 1: 100} and first.deleted == {}
        # retention removes partition 0's first 30 records before the backfill gets to them
        await _delete_records(settings.kafka, {KafkaTP(topic, 0): 30})
        backfill = _backfill(settings, hbase, SliceArgs(topic), state_dir=tmp_path)
        await backfill.prepare()  # the stored slice, from offset 0: known lost before reading
        assert backfill.deleted == {0: (0, 30)}
        assert backfill.worker is not None
        metrics = attach_metrics(backfill.worker)
        with anyio.fail_after(60):
            summary = await backfill.run()
        # the slice completes (nothing can read those offsets any more) and says what it missed
        assert summary.complete and summary.skipped == 30 and summary.events == 170
        assert summary.deleted == {0: (0, 30)}
        assert metrics.registry.get_sample_value(
            "hbase_ingest_offsets_skipped_total", {"topic": topic, "partition": "0"}) == 30
        assert metrics.registry.get_sample_value(
            "hbase_ingest_offsets_skipped_total", {"topic": topic, "partition": "1"}) is None
        await _assert_exactly(hbase, settings, [e for i, e in enumerate(events) if i % 2 or i // 2 >= 30])
        assert await _committed(settings.kafka, backfill.group, topic, 2) == {0: 100, 1: 100}
    finally:
        await drop_tables(hbase, settings)


async def test_end_is_fixed_at_start_and_offsets_select_partitions(
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=2)
    try:
        events = [order_event(i) for i in range(100)]
        await _produce_timed(settings, topic, events, 2)
        # partition 1 only, from offset 10 (event 21) to the end as it is now
        backfill = _backfill(settings, hbase, SliceArgs(topic, from_offsets=parse_offsets("1:10")), state_dir=tmp_path)
        slice_ = await backfill.prepare()
        assert slice_.start == {0: 50, 1: 10} and slice_.end == {0: 50, 1: 50}
        # producers keep writing: the backfill still stops at the ends fixed above
        await _produce_timed(settings, topic, [order_event(i) for i in range(100, 140)], 2, first=100)
        with anyio.fail_after(60):
            summary = await backfill.run()
        assert summary.complete and summary.events == 40
        await _assert_exactly(hbase, settings, [events[i] for i in range(21, 100, 2)])
        # same arguments again: already complete, nothing replayed
        again = _backfill(settings, hbase, SliceArgs(topic, from_offsets={1: 10}), state_dir=tmp_path)
        with anyio.fail_after(30):
            repeat = await again.run()
        assert repeat.already_complete and repeat.events == 0
        # one group cannot hold two different slices
        with pytest.raises(ConfigError, match="other arguments"):
            await _backfill(settings, hbase, SliceArgs(topic), group=backfill.group, state_dir=tmp_path).prepare()
    finally:
        await drop_tables(hbase, settings)


def _spawn(config: Path, topic: str, state: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline", "backfill", "--config", str(config), "--topic", topic,
         "--state-dir", str(state), "--no-progress", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})


async def _interrupted_backfill(hbase: HBaseClient, settings: Settings, topic: str, tmp_path: Path,
                               *signals: signal.Signals) -> tuple[int, str]:
    """Run ``hbase-ingest backfill --rate 800`` (state in ``tmp_path / "state"``), send ``signals``
    once 300 orders are in HBase; returns the exit status and the output."""
    proc = _spawn(write_config(tmp_path / "b.toml", settings), topic, tmp_path / "state", "--rate", "800")
    try:
        with anyio.fail_after(60):
            while len(await _index_rows(hbase, settings)) < 300:
                assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
                await anyio.sleep(0.1)
    except BaseException:
        proc.kill()
        raise
    return await signal_and_wait(proc, *signals)


async def test_sigint_then_resume_has_no_gaps_and_replay_is_byte_identical(
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    settings = order_settings(unique, max_batch_rows=50, commit_interval_ms=200)
    topic = await setup(settings, hbase, partitions=4)
    try:
        n = 3000
        events = [order_event(i) for i in range(n)]
        await _produce_timed(settings, topic, events, 4)
        state = tmp_path / "state"
        code, text = await _interrupted_backfill(hbase, settings, topic, tmp_path, signal.SIGINT)
        assert code == 130, text[-2000:]
        assert "run the same command again to resume" in text
        group = default_group(settings, SliceArgs(topic))
        committed = await _committed(settings.kafka, group, topic, 4)
        done = sum(c or 0 for c in committed.values())
        assert 0 < done < n, committed
        # a graceful stop commits everything it wrote: nothing past the commits is in HBase
        assert len(await _index_rows(hbase, settings)) == done

        # producers carry on meanwhile: the resumed backfill keeps the end stored at its first start
        await _produce_timed(settings, topic, [order_event(i) for i in range(n, n + 200)], 4, first=n)
        resumed = _backfill(settings, hbase, SliceArgs(topic), state_dir=state)
        with anyio.fail_after(60):
            summary = await resumed.run()
        assert summary.resumed and summary.complete
        assert summary.events == n - done  # continues exactly at the commits: no gap, no re-read
        await _assert_exactly(hbase, settings, events)
        assert set((await _committed(settings.kafka, settings.kafka.group_id, topic, 4)).values()) == {None}

        # replaying the whole slice again rewrites the same cells: byte-identical tables
        before = await _snapshot(hbase, settings)
        replay = _backfill(settings, hbase, SliceArgs(topic), state_dir=state, restart=True)
        with anyio.fail_after(60):
            again = await replay.run()
        assert again.complete and again.events == n + 200  # restart re-resolves the end
        await _assert_exactly(hbase, settings, [order_event(i) for i in range(n + 200)])
        after = await _snapshot(hbase, settings)
        for table, rows in before.items():
            kept = dict(after[table])
            assert all(kept[row] == cells for row, cells in rows), table
    finally:
        await drop_tables(hbase, settings)


async def test_a_second_signal_stops_without_draining_and_commits_only_what_was_written(
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    # a drain that could last 10 minutes: the process must not wait for it after the second signal
    settings = order_settings(unique, max_batch_rows=50, commit_interval_ms=200, shutdown_timeout_s=600)
    topic = await setup(settings, hbase, partitions=4)
    try:
        n = 3000
        events = [order_event(i) for i in range(n)]  # event i: partition i % 4, offset i // 4
        await _produce_timed(settings, topic, events, 4)
        state = tmp_path / "state"
        code, text = await _interrupted_backfill(hbase, settings, topic, tmp_path, signal.SIGINT, signal.SIGTERM)
        assert code == 130 and "stopping now" in text, text[-2000:]
        group = default_group(settings, SliceArgs(topic))
        committed = await _committed(settings.kafka, group, topic, 4)
        # every event before the commits is in HBase (more may be: written, not yet acknowledged)
        written = await _index_rows(hbase, settings)
        for p, off in committed.items():
            missing = [i for i in range(p, (off or 0) * 4, 4) if f"ORD{i:08d}".encode() not in written]
            assert not missing, (p, off, missing[:5])
        resumed = _backfill(settings, hbase, SliceArgs(topic), state_dir=state)
        with anyio.fail_after(60):
            summary = await resumed.run()
        assert summary.complete and summary.events == n - sum(c or 0 for c in committed.values())
        await _assert_exactly(hbase, settings, events)
    finally:
        await drop_tables(hbase, settings)
