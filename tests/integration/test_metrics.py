"""The metrics endpoint of a real worker: counters, lag, readiness, skew, and ``top --once``."""

from __future__ import annotations

import os
import random
import sys
from collections import defaultdict
from functools import partial
from typing import Any

import anyio
import orjson

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics
from pipeline.core.model import TopicPartition
from pipeline.rowkey import compile_rowkey
from pipeline.rowkey.splits import split_points
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics import metrics_of, serve_metrics
from pipeline.settings import FamilySpec, MetricsSettings, load_settings
from tests.http_get import http_get

from .worker_support import drop_tables, order_event, order_settings, produce, setup, stop_offsets

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


async def _scrape(port: int) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    status, body = await http_get(port, "/metrics")
    assert status == 200
    out: Samples = defaultdict(dict)
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = float(s.value)
    return out


def _total(samples: Samples, name: str) -> float:
    return sum(samples.get(name, {}).values())


async def test_counters_match_processed_events_and_lag_reaches_zero(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=4)
    try:
        good = [orjson.dumps(order_event(i)) for i in range(500)]
        bad = [b"{not json"] * 4 + [orjson.dumps({"order_number": "X"})] * 2
        await produce(settings, topic, good[:250] + bad + good[250:])
        ends = await stop_offsets(settings, topic)
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka))
        async with anyio.create_task_group() as tg:
            port: Any = await tg.start(partial(serve_metrics, MetricsSettings(port=0), worker,
                                               lag_interval_s=0.3, probe_interval_s=0.3))
            assert metrics_of(worker) is not None
            assert (await http_get(port, "/healthz"))[0] == 200
            status, body = await http_get(port, "/readyz")
            assert status == 503 and b"worker: not running" in body
            tg.start_soon(worker.run)
            with anyio.fail_after(60):
                while any(worker.stats.committed.get(tp, -1) < end for tp, end in ends.items()):
                    await anyio.sleep(0.1)
                while True:  # lag is refreshed in the background
                    s = await _scrape(port)
                    lag = s.get("hbase_ingest_consumer_lag", {})
                    if len(lag) == 4 and not any(lag.values()):
                        break
                    await anyio.sleep(0.2)
            assert _total(s, "hbase_ingest_events_consumed_total") == len(good) + len(bad) == worker.stats.consumed
            assert _total(s, "hbase_ingest_rows_written_total") == 3 * len(good) == worker.stats.rows_written
            assert s["hbase_ingest_dead_lettered_total"] == {
                (("reason", "undecodable"),): 4, (("reason", "missing_field"),): 2}
            assert _total(s, "hbase_ingest_batch_rows_count") == worker.stats.batches_written
            assert _total(s, "hbase_ingest_batch_rows_sum") == 3 * len(good)
            assert _total(s, "hbase_ingest_flush_seconds_count") == worker.stats.batches_written
            # every record is done (written or dead-lettered), each with a latency from its Kafka timestamp
            assert _total(s, "hbase_ingest_event_latency_seconds_count") == len(good) + len(bad)
            assert 0 < _total(s, "hbase_ingest_event_latency_seconds_sum") < 60 * (len(good) + len(bad))
            assert _total(s, "hbase_ingest_committed_offset") == sum(ends.values())
            assert _total(s, "hbase_ingest_log_end_offset") == sum(ends.values())
            by_region = s["hbase_ingest_region_rows_written_total"]
            assert sum(by_region.values()) == 3 * len(good)
            assert {dict(k)["table"] for k in s["hbase_ingest_region_skew"]} == {r.table for r in settings.routes}
            with anyio.fail_after(10):
                while (await http_get(port, "/readyz"))[0] != 200:
                    await anyio.sleep(0.1)
            assert s["hbase_ingest_in_flight_bytes"][()] == 0

            # the terminal view scrapes the same endpoint
            result = await anyio.run_process(
                [sys.executable, "-m", "pipeline", "top", "--url", f"127.0.0.1:{port}", "--once",
                 "--interval", "0.2"], check=False, env={**os.environ, "COLUMNS": "160", "NO_COLOR": "1"})
            out = result.stdout.decode()
            assert result.returncode == 0, result.stderr.decode()[-2000:]
            assert f"events {len(good) + len(bad):,}" in out and "ready" in out
            assert all(f"{r.table}: rows per region" in out for r in settings.routes)
            worker.request_stop()
            with anyio.fail_after(30):
                while worker.ready:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    finally:
        await drop_tables(hbase, settings)


async def test_skew_gauge_exposes_a_timestamp_first_hotspot(hbase: HBaseClient, unique: str) -> None:
    """One load, two designs, 8 regions each: ``[long(timestamp)][id]`` split at the quantiles of
    an earlier day sends every new row to its last region; ``[salt(id, 8)]...`` spreads them."""
    topic = f"clicks-{unique}"
    ts_first, salted = f"tsfirst_{unique}", f"salted_{unique}"
    designs = {ts_first: "[long(timestamp)][id]", salted: "[salt(id, 8)][long(timestamp)][id]"}
    settings = load_settings(
        None,
        routes=[{"name": t, "topic": topic, "table": t, "rowkey": spec, "timestamp_field": "timestamp",
                 "columns": {"d:v": "v"}} for t, spec in designs.items()],
        kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"},
        writer={"max_batch_rows": 100, "max_batch_age_ms": 50, "commit_interval_ms": 200})
    now = 1_714_521_600_000
    rng = random.Random(7)

    def event(ts: int) -> dict[str, Any]:
        return {"id": f"u{rng.randrange(10_000):05d}", "timestamp": ts, "v": "x" * 20}

    earlier = [event(now - 86_400_000 + i * 60_000) for i in range(1000)]  # yesterday
    tsk = compile_rowkey(designs[ts_first])
    splits = {ts_first: split_points(tsk, 8, sample_keys=[tsk.build(e) for e in earlier]),
              salted: split_points(compile_rowkey(designs[salted]), 8)}
    await create_topics(settings.kafka, {topic: 2, settings.kafka.dead_letter_topic: 1})
    for table, points in splits.items():
        assert len(points) == 7
        await hbase.create_table(table, {"d": FamilySpec()}, points)
    try:
        await produce(settings, topic, [orjson.dumps(event(now + i * 10)) for i in range(2000)])
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        async with anyio.create_task_group() as tg:
            port: Any = await tg.start(serve_metrics, MetricsSettings(port=0), worker)
            with anyio.fail_after(60):
                summary = await worker.run()
            s = await _scrape(port)
            tg.cancel_scope.cancel()
        assert summary.rows_written == 4000
        skew = {dict(k)["table"]: v for k, v in s["hbase_ingest_region_skew"].items()}
        assert skew[ts_first] == 8.0  # every row in one of 8 regions
        assert skew[salted] < 1.5
        window: dict[str, list[float]] = defaultdict(list)
        for labels, rows in s["hbase_ingest_region_window_rows"].items():
            window[dict(labels)["table"]].append(rows)
        assert sorted(window[ts_first]) == [0] * 7 + [2000]
        assert len(window[salted]) == 8 and min(window[salted]) > 0
    finally:
        await drop_tables(hbase, load_settings(None, routes=[{"name": t, "topic": topic, "table": t,
                                                              "rowkey": "[id]", "columns": {"d:v": "v"}}
                                                             for t in designs]))


def test_reader_latency_hook_is_per_worker() -> None:
    from connectors.memory import MemoryBroker, MemoryHBase
    from pipeline.runtime.metrics import attach_metrics

    settings = order_settings("hook")
    a, b = (attach_metrics(Worker(settings, MemoryHBase(), MemoryBroker())) for _ in range(2))
    a.observe_query("seller", 0.02)
    assert b"hbase_ingest_reader_query_seconds_count{table=\"seller\"} 1.0" in a.render()
    assert b"reader_query_seconds_count{" not in b.render()
    assert TopicPartition("t", 0) not in a.assigned
