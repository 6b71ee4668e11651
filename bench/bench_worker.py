"""Worker throughput against its ceilings, measured in one run on the same stack.

(a) HBase write ceiling: the same rows, prebuilt, written with happybase batches from parallel threads.
(b) Kafka read ceiling: aiokafka reading the topic with no processing.
(c) Naive pipeline: decode + build key + one happybase ``put`` per event (on a subset, rate scaled).
(d) This worker (in a child process, for its own peak RSS), from the earliest offset until every row
    is written and committed.

Targets: (d) >= 0.8 x min(a, b); (d) >= 10 x (c); worker peak RSS <= 300 MB.
Figures go to bench/results/worker.json.

    python -m bench.bench_worker [--events 1000000] [--partitions 8] [--threads 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import happybase
import orjson

from bench.cpu import CpuMeter, status_mb
from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, delete_topics, end_offsets, make_consumer
from connectors.kafka import TopicPartition as KafkaTP
from connectors.kafka.records import DECODED_RECORDS
from devstack import LocalStack
from devstack.settings import load_stack_settings
from pipeline.core.examples import generate
from pipeline.core.model import Origin, TopicPartition
from pipeline.core.routes.router import Router
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.process.proctune import tune_process
from pipeline.runtime.produce import produce_events
from pipeline.settings import Settings, load_settings

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "bench-worker-events"
TABLE = "bench_worker"


def bench_settings(partitions: int) -> Settings:
    return load_settings(
        None,
        tables=[{"name": TABLE, "families": {"l": {}}, "regions": 16}],
        routes=[{"name": "logs", "topic": TOPIC, "table": TABLE,
                 "rowkey": "[salt(hostname, log_event, 16)][hostname][_][log_event][reverse_ts(timestamp)]",
                 "timestamp_field": "timestamp",
                 "columns": {"l:v": "value", "l:lv": "level", "l:m": "message"}}],
        writer={"max_batch_rows": 2000, "max_batch_bytes": 4 * 1024 * 1024, "max_batch_age_ms": 200,
                "concurrency": 8, "commit_interval_ms": 1000},
        kafka={"max_poll_records": 5000, "dead_letter_topic": "bench-worker-dlq"},
        hbase={"pool_size": 8},
    )


async def _recreate_table(settings: Settings) -> None:
    async with HBaseClient(settings.hbase) as hb:
        await create_tables(hb, settings, recreate=True)


def _prebuilt(settings: Settings, n: int) -> list[tuple[bytes, dict[bytes, bytes], int]]:
    router = Router(settings.routes)
    rows = []
    origin = Origin(TopicPartition(TOPIC, 0), 0)
    for _, event in generate("logs", n):
        (m,) = router.route(TOPIC, orjson.dumps(event), origin)
        rows.append((m.row, m.cells, m.timestamp or 0))
    return rows


def ceiling_hbase(settings: Settings, rows: list[tuple[bytes, dict[bytes, bytes], int]], threads: int) -> float:
    """(a) rows/s with happybase batches (1000 rows per send) from ``threads`` threads."""
    chunks = [rows[i::threads] for i in range(threads)]

    def run(chunk: list[tuple[bytes, dict[bytes, bytes], int]]) -> None:
        conn = happybase.Connection(settings.hbase.host, settings.hbase.port, timeout=120_000)
        try:
            with conn.table(TABLE).batch(batch_size=1000) as b:
                for row, cells, _ in chunk:
                    b.put(row, cells)
        finally:
            conn.close()

    t0 = time.perf_counter()
    ts = [threading.Thread(target=run, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(rows) / (time.perf_counter() - t0)


async def ceiling_kafka(settings: Settings, total: int) -> float:
    """(b) records/s read by one aiokafka consumer, no processing, taking the decoded records as the
    worker's source does (no ``ConsumerRecord`` copy each)."""
    consumer = make_consumer(settings.kafka, group_id=None, auto_offset_reset="earliest",
                             max_poll_records=settings.kafka.max_poll_records, value_deserializer=DECODED_RECORDS)
    await consumer.start()
    try:
        parts = sorted(await end_offsets(settings.kafka, TOPIC))
        tps = [KafkaTP(TOPIC, p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got = 0
        t0 = time.perf_counter()
        while got < total:
            batch = await consumer.getmany(timeout_ms=1000)
            got += sum(len(v) for v in batch.values())
        return got / (time.perf_counter() - t0)
    finally:
        await consumer.stop()


def naive(settings: Settings, n: int) -> float:
    """(c) events/s: decode, build the key, one put per event, one connection."""
    router = Router(settings.routes)
    origin = Origin(TopicPartition(TOPIC, 0), 0)
    values = [orjson.dumps(e) for _, e in generate("logs", n, seed=3)]
    conn = happybase.Connection(settings.hbase.host, settings.hbase.port, timeout=60_000)
    table = conn.table(TABLE)
    t0 = time.perf_counter()
    for v in values:
        (m,) = router.route(TOPIC, v, origin)
        table.put(m.row, m.cells, timestamp=m.timestamp)
    rate = n / (time.perf_counter() - t0)
    conn.close()
    return rate


def worker_child(partitions: int) -> dict[str, Any]:
    """(d) run in a separate process: returns its wall time, throughput and peak RSS."""
    out = subprocess.run([sys.executable, "-m", "bench.bench_worker", "--child", "--partitions", str(partitions)],
                         capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


async def _child(partitions: int) -> dict[str, Any]:
    from pipeline.runtime.ingest.worker import Worker

    settings = bench_settings(partitions)
    tune_process(settings.runtime)  # as `hbase-ingest run` does
    stop_at = {TopicPartition(TOPIC, p): e for p, e in (await end_offsets(settings.kafka, TOPIC)).items()}
    timeline: list[tuple[float, float, int, int]] = []  # (s, RSS MB, in-flight bytes, consumed)

    async def sample(worker: Worker, t0: float) -> None:
        while True:
            rss = status_mb("self", "VmRSS") or 0.0
            timeline.append((round(time.perf_counter() - t0, 1), round(rss), worker.in_flight, worker.stats.consumed))
            await anyio.sleep(1.0)

    async with HBaseClient(settings.hbase) as hb:
        worker = Worker(settings, hb, KafkaBroker(settings.kafka), group_id=f"bench-{time.time_ns()}", stop_at=stop_at)
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample, worker, t0)
            summary = await worker.run()
            tg.cancel_scope.cancel()
        wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    # VmHWM belongs to this process's own address space; ru_maxrss is not used because Linux carries
    # it over fork+exec, so it would report the parent's peak (the parent holds 1M prebuilt rows)
    hwm = status_mb("self", "VmHWM")
    return {"events": summary.consumed, "rows": summary.rows_written, "wall_s": wall,
            "events_per_s": summary.consumed / wall, "batches": summary.batches_written,
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": hwm, "timeline_s_rssmb_inflight_consumed": timeline}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack.recorded(load_stack_settings(None))  # the running shape: one JVM or a cluster
    stack.up()
    cpu: dict[str, dict[str, float]] = {}
    settings = bench_settings(args.partitions)
    await delete_topics(settings.kafka, [TOPIC])
    await create_topics(settings.kafka, {TOPIC: args.partitions, "bench-worker-dlq": 1})
    t0 = time.perf_counter()
    sent = await produce_events(KafkaBroker(settings.kafka), TOPIC, generate("logs", args.events),
                                partitions=args.partitions)
    produce_s = time.perf_counter() - t0
    sizes = [len(orjson.dumps(e)) for _, e in generate("logs", 2000)]
    print(f"produced {sent} events (mean {sum(sizes) / len(sizes):.0f} bytes) in {produce_s:.1f} s", flush=True)

    rows = _prebuilt(settings, args.events)
    await _recreate_table(settings)
    meter = CpuMeter(stack)
    a = ceiling_hbase(settings, rows, args.threads)
    cpu["a"] = meter.stop()
    del rows
    print(f"(a) HBase write ceiling: {a:,.0f} rows/s", flush=True)
    meter = CpuMeter(stack)
    b = await ceiling_kafka(settings, sent)
    cpu["b"] = meter.stop()
    print(f"(b) Kafka read ceiling:  {b:,.0f} records/s", flush=True)
    await _recreate_table(settings)
    c = naive(settings, args.naive_events)
    print(f"(c) naive one put/event: {c:,.0f} events/s (on {args.naive_events} events)", flush=True)
    await _recreate_table(settings)
    meter = CpuMeter(stack)
    d = worker_child(args.partitions)
    cpu["d"] = meter.stop({"worker": d["cpu_s"]})
    print(f"(d) worker:              {d['events_per_s']:,.0f} events/s, peak RSS {d['peak_rss_mb']:.0f} MB", flush=True)
    peak = max(d["timeline_s_rssmb_inflight_consumed"], key=lambda x: x[1], default=None)
    print(f"    RSS peak sample (s, MB, in-flight bytes, consumed): {peak}", flush=True)
    result = {
        "events": sent, "partitions": args.partitions, "mean_event_bytes": sum(sizes) / len(sizes),
        "a_hbase_ceiling_rows_per_s": a, "b_kafka_ceiling_per_s": b, "c_naive_per_s": c, "d_worker": d,
        "ratio_d_over_min_ab": d["events_per_s"] / min(a, b), "ratio_d_over_c": d["events_per_s"] / c,
        "targets": {"d_over_min_ab": 0.8, "d_over_c": 10, "peak_rss_mb": 300},
        "cpu_seconds_by_phase": cpu, "cores": os.cpu_count(),
    }
    print(f"CPU seconds (2 cores = 2 CPU-s per wall second): (a) {cpu['a']}  (d) {cpu['d']}")
    print(f"ratios: d/min(a,b) = {result['ratio_d_over_min_ab']:.2f} (target >= 0.8), "
          f"d/c = {result['ratio_d_over_c']:.1f} (target >= 10), peak RSS {d['peak_rss_mb']:.0f} MB (<= 300)")
    return result


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--naive-events", type=int, default=20_000)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--child", action="store_true")
    ns = p.parse_args()
    if ns.child:
        print(json.dumps(asyncio.run(_child(ns.partitions))))
    else:
        res = asyncio.run(main(ns))
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "worker.json").write_text(json.dumps(res, indent=2) + "\n")
