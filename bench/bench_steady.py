"""The worker below saturation: a topic produced at a fixed rate while the worker keeps up with it.

Each run: a fresh topic of ``--partitions`` partitions and a recreated 16-region table with the
settings of the Flink comparison (:func:`bench.peer_ingest.ingest_settings`); a worker child process
starts in a fresh group and, once it consumes (at the topic's end), this process produces ``rate`` ``logs``
events a second for ``--seconds`` (librdkafka's producer, paced every 10 ms, partition ``i %
partitions``, each event's ``timestamp`` the time it is sent), and the child runs until every event
is written and committed. Runs alternate between the kinds, fetch settings of the consumer:

- ``fetch_default``: ``fetch_min_bytes = 1``, ``fetch_max_wait_ms = 500`` (aiokafka's defaults: a
  fetch returns the moment a byte is there);
- ``fetch_batched``: ``fetch_min_bytes = 262144``, ``fetch_max_wait_ms = 100`` (the broker holds a
  fetch up to 100 ms for 256 KiB).

Figures per run: the child's CPU-us per event (user + system from after its imports to its end,
start-up and waiting included), the HBase JVM's CPU-us per row over the run, the child's peak RSS,
the rows per write call, and the end-to-end latency of each event, from its ``timestamp`` (when it was
sent) to HBase's acknowledgement of the write that carried it, as p50 / p99 / max in milliseconds (a
histogram of 1 ms buckets in the child). Results: ``bench/results/steady.json``.

    python -m bench.bench_steady [--rates 5000,15000,30000] [--seconds 60] [--runs 1] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import anyio.abc
import orjson

from bench.bench_cdc import _drop, _recreate
from bench.cpu import CpuMeter
from bench.peer_ingest import ingest_settings
from bench.profile_worker import RESULTS, _us
from bench.worker_child import _summary
from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, end_offsets
from connectors.stack import LocalStack
from pipeline.core.examples import generate
from pipeline.core.model import TopicPartition
from pipeline.runtime.process.proctune import tune_process
from pipeline.settings import Settings, StackSettings

KINDS = {"fetch_default": {"fetch_min_bytes": 1, "fetch_max_wait_ms": 500},
         "fetch_batched": {"fetch_min_bytes": 262_144, "fetch_max_wait_ms": 100}}
_CAP_MS = 60_000  # latencies at or above go in the last bucket


def settings_for(kind: str, topic: str, table: str, partitions: int) -> Settings:
    base = ingest_settings(topic, table, f"{topic}-dlq", partitions)
    return base.model_copy(update={"kafka": base.kafka.model_copy(update=KINDS[kind])})


def _percentile(hist: list[int], q: float) -> int:
    total, seen = sum(hist), 0
    for ms, n in enumerate(hist):
        seen += n
        if seen >= q * total:
            return ms
    return len(hist) - 1


async def _child(kind: str, topic: str, table: str, partitions: int, stop: dict[str, int]) -> dict[str, Any]:
    from pipeline.runtime.ingest.report import WorkerSummary
    from pipeline.runtime.ingest.worker import Worker

    settings = settings_for(kind, topic, table, partitions)
    tune_process(settings.runtime)
    hist = [0] * (_CAP_MS + 1)
    calls = [0, 0]  # write calls, rows
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    async with HBaseClient(settings.hbase) as hb:
        write = hb.write

        async def timed(table: str, mutations: Any, server: str | None = None) -> str | None:
            got = await write(table, mutations, server)
            now = time.time() * 1000
            for m in mutations:
                hist[min(max(int(now - m.timestamp), 0), _CAP_MS)] += 1
            calls[0] += 1
            calls[1] += len(mutations)
            return got
        hb.write = timed  # type: ignore[method-assign]
        worker = Worker(settings, hb, KafkaBroker(settings.kafka), group_id=f"steady-{time.time_ns()}",
                        stop_at={TopicPartition(topic, int(p)): o for p, o in stop.items()})
        done: list[WorkerSummary] = []

        async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            done.append(await worker.run(task_status=task_status))
        async with anyio.create_task_group() as tg:
            await tg.start(run)  # consuming: the group joined, positions at the end of the topic
            print(json.dumps({"started": True}), flush=True)
        summary = done[0]
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"events": summary.consumed, "rows": summary.rows_written, "dead_lettered": summary.dead_lettered,
            "run_cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3),
            "peak_rss_mb": round(r1.ru_maxrss / 1024, 1), "write_calls": calls[0],
            "rows_per_call": round(calls[1] / max(calls[0], 1), 1),
            "latency_ms": {"p50": _percentile(hist, 0.5), "p99": _percentile(hist, 0.99),
                           "max": max(i for i, n in enumerate(hist) if n) if any(hist) else None}}


def _produce(bootstrap: str, topic: str, rate: int, seconds: float, partitions: int) -> int:
    """``rate`` events a second for ``seconds``, paced every 10 ms; the count sent."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    events = [e for _, e in generate("logs", 10_000, seed=5)]
    failed: list[str] = []
    total = int(rate * seconds)
    sent, t0 = 0, time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        now = int(time.time() * 1000)
        for i in range(sent, due):
            event = events[i % len(events)]
            event["timestamp"] = now
            producer.produce(topic, orjson.dumps(event), partition=i % partitions,
                             on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
        sent = due
        producer.poll(0)
        time.sleep(0.01)
    if producer.flush(60) != 0 or failed:
        raise RuntimeError(f"producing failed: {failed[:3]}")
    return sent


def _run(stack: LocalStack, kind: str, rate: int, seconds: float, partitions: int) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    topic, table = f"steady-{run_id}", f"steady_{run_id}"
    settings = settings_for(kind, topic, table, partitions)
    asyncio.run(create_topics(settings.kafka, {topic: partitions}))
    asyncio.run(_recreate(settings))
    total = int(rate * seconds)
    start = asyncio.run(end_offsets(settings.kafka, topic))
    stop = {str(p): start.get(p, 0) + total // partitions + (1 if p < total % partitions else 0)
            for p in range(partitions)}
    child = subprocess.Popen([sys.executable, "-m", "bench.bench_steady", "--child", kind, "--topic", topic,
                              "--table", table, "--partitions", str(partitions), "--stop", json.dumps(stop)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        while "started" not in child.stdout.readline():
            if child.poll() is not None:
                raise RuntimeError(f"the worker child exited with {child.returncode} before it started")
        meter = CpuMeter(stack)
        sent = _produce(settings.kafka.bootstrap_servers, topic, rate, seconds, partitions)
        out, _ = child.communicate(timeout=600)
        cpu = meter.stop()
    finally:
        if child.poll() is None:
            child.kill()
        asyncio.run(_drop(settings, topic, table))
    if child.returncode:
        raise RuntimeError(f"the worker child failed with exit {child.returncode}")
    got = json.loads(out.strip().splitlines()[-1])
    return {"kind": kind, "rate": rate, "sent": sent, "events": got["events"], "rows": got["rows"],
            "dead_lettered": got["dead_lettered"], "worker_us_per_event": _us(got["run_cpu_s"], got["events"]),
            "hbase_jvm_us_per_row": _us(cpu["hbase_jvm"], got["rows"]), "peak_rss_mb": got["peak_rss_mb"],
            "rows_per_call": got["rows_per_call"], "latency_ms": got["latency_ms"], "wall_s": cpu["wall"]}


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack(StackSettings())
    stack.up()
    rates = [int(r) for r in args.rates.split(",")]
    runs: list[dict[str, Any]] = []
    for rate in rates:
        for i in range(args.runs):
            for kind in (list(KINDS) if i % 2 == 0 else list(KINDS)[::-1]):
                runs.append(_run(stack, kind, rate, args.seconds, args.partitions))
                print(json.dumps(runs[-1]), flush=True)
    table: dict[str, dict[str, Any]] = {}
    for rate in rates:
        for kind in KINDS:
            mine = [r for r in runs if r["rate"] == rate and r["kind"] == kind]
            table[f"{kind}@{rate}"] = {
                f: _summary([r[f] for r in mine]) for f in ("worker_us_per_event", "hbase_jvm_us_per_row",
                                                            "peak_rss_mb", "rows_per_call")} | {
                "latency_ms": {q: _summary([r["latency_ms"][q] for r in mine]) for q in ("p50", "p99", "max")}}
    result = {"seconds": args.seconds, "partitions": args.partitions, "rates": rates, "runs": runs,
              "medians": table, "kinds": KINDS, "cpus": 2}
    (RESULTS / "steady.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="5000,15000,30000")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--child", choices=list(KINDS))
    parser.add_argument("--topic")
    parser.add_argument("--table")
    parser.add_argument("--stop")
    a = parser.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(_child(a.child, a.topic, a.table, a.partitions, json.loads(a.stop)))))
    else:
        print(json.dumps(main(a)["medians"]))
