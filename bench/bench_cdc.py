"""The changelog path against the JSON path: the same rows from Debezium change events and from plain
JSON events, alternating on one stack.

Two topics of ``events`` records each: ``bench_worker``'s log events as JSON (the generated put
builders), and the same events as Debezium change events (``envelope = "debezium"``: the general
path of :mod:`pipeline.core.routes.reference`), four in five creates and one in five updates of an earlier
event (``before`` and ``after``), all with a ``source`` block and a JSON key. Both routes write
``bench_worker``'s design (a 16-region table, three cells per row). Each run is a worker child
process from the earliest offset until every record is written and committed, on a table recreated
before the run, in the order json, cdc, cdc, json, ...; figures per run: the child's CPU per record
from after its imports to its end, the HBase side's CPU per record, records/s. Results:
``bench/results/cdc.json``.

    python -m bench.bench_cdc [--events 300000] [--runs 2] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import uuid
from typing import Any

import orjson

from bench.cpu import CpuMeter
from bench.profile_worker import RESULTS, _us
from bench.worker_child import alternate, measure_worker, run_child
from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, delete_topics, make_producer
from devstack import LocalStack
from devstack.settings import load_stack_settings
from pipeline.core.examples import generate
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import Settings, load_settings

DESIGN = "[salt(hostname, log_event, 16)][hostname][_][log_event][reverse_ts(timestamp)]"
COLUMNS = {"l:v": "value", "l:lv": "level", "l:m": "message"}


def settings_for(kind: str, topic: str, table: str, partitions: int) -> Settings:
    """``bench_worker``'s settings for ``kind`` (``json`` or ``cdc``) on ``topic`` and ``table``."""
    route: dict[str, Any] = {"name": kind, "topic": topic, "table": table, "rowkey": DESIGN, "columns": COLUMNS,
                             "timestamp_field": "timestamp"}
    topics: list[dict[str, Any]] = []
    if kind == "cdc":
        route |= {"envelope": "debezium", "timestamp_field": "$source.lsn"}
        topics = [{"name": topic, "key_format": "json"}]
    return load_settings(
        None, topics=topics, tables=[{"name": table, "families": {"l": {}}, "regions": 16}], routes=[route],
        writer={"max_batch_rows": 2000, "max_batch_bytes": 4 * 1024 * 1024, "max_batch_age_ms": 200,
                "concurrency": 8, "commit_interval_ms": 1000},
        kafka={"max_poll_records": 5000, "dead_letter_topic": f"{topic}-dlq"}, hbase={"pool_size": 8})


def records(kind: str, n: int) -> list[tuple[bytes, bytes]]:
    """(key, value) of ``n`` records of ``kind``."""
    events = [e for _, e in generate("logs", n, seed=3)]
    if kind == "json":
        return [(str(i).encode(), orjson.dumps(e)) for i, e in enumerate(events)]
    rng = random.Random(5)
    out = []
    lsn = 30_000_000
    for i, e in enumerate(events):
        lsn += 40
        before = events[rng.randrange(i)] if i and rng.random() < 0.2 else None
        change = {"before": before, "after": e, "op": "u" if before else "c",
                  "source": {"version": "3.6.1.Final", "connector": "postgresql", "name": "bench", "db": "logs",
                             "schema": "public", "table": "logs", "ts_ms": e["timestamp"], "txId": 900 + i,
                             "lsn": lsn},
                  "ts_ms": e["timestamp"] + 5, "transaction": None}
        out.append((orjson.dumps({"id": i}), orjson.dumps(change)))
    return out


async def _produce(settings: Settings, topic: str, rows: list[tuple[bytes, bytes]], partitions: int) -> None:
    await create_topics(settings.kafka, {topic: partitions})
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        for start in range(0, len(rows), 20_000):
            futs = [await producer.send(topic, v, key=k, partition=(start + j) % partitions)
                    for j, (k, v) in enumerate(rows[start:start + 20_000])]
            for f in futs:
                await f
    finally:
        await producer.stop()


async def _recreate(settings: Settings) -> None:
    async with HBaseClient(settings.hbase) as hb:
        await create_tables(hb, settings, recreate=True)


def _run(stack: LocalStack, kind: str, topic: str, table: str, partitions: int) -> dict[str, Any]:
    asyncio.run(_recreate(settings_for(kind, topic, table, partitions)))
    meter = CpuMeter(stack)
    child = run_child("bench.bench_cdc", kind, "--topic", topic, "--table", table, "--partitions", str(partitions))
    cpu = meter.stop()
    events = int(child["events"])
    return {"kind": kind, "events": events, "rows": child["rows"],
            "worker_us_per_event": _us(child["run_cpu_s"], events),
            "hbase_jvm_us_per_event": _us(cpu["hbase_jvm"], events), "events_per_s": round(child["events_per_s"])}


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack(load_stack_settings(None))
    stack.up()
    run_id = uuid.uuid4().hex[:8]
    names = {kind: (f"bench-{kind}-{run_id}", f"bench_{kind}_{run_id}") for kind in ("json", "cdc")}
    for kind, (topic, table) in names.items():
        asyncio.run(_produce(settings_for(kind, topic, table, args.partitions), topic, records(kind, args.events),
                             args.partitions))

    def cleanup() -> None:
        for kind, (topic, table) in names.items():
            asyncio.run(_drop(settings_for(kind, topic, table, args.partitions), topic, table))

    ab = alternate(("json", "cdc"), args.runs, lambda kind: _run(stack, kind, *names[kind], args.partitions), "json",
                   cleanup)
    result = {"events": args.events, "partitions": args.partitions, "runs": ab["runs"], "medians": ab["medians"],
              "cdc_over_json": ab["over_baseline"]["cdc"], "cpus": 2}
    (RESULTS / "cdc.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


async def _drop(settings: Settings, topic: str, table: str) -> None:
    async with HBaseClient(settings.hbase) as hb:
        if table in await hb.tables():
            await hb.delete_table(table)
    await delete_topics(settings.kafka, [topic])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--child", choices=("json", "cdc"))
    parser.add_argument("--topic")
    parser.add_argument("--table")
    a = parser.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(measure_worker(settings_for(a.child, a.topic, a.table, a.partitions), a.topic))))
    else:
        print(json.dumps(main(a)["cdc_over_json"]))
