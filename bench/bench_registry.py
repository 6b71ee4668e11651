"""Avro through the schema registry against JSON: the same rows from the same events, alternating on
one stack (``stack up --registry``).

Two topics of ``events`` records each: ``bench_worker``'s log events as JSON (the generated put
builders), and the same events as Avro in the Confluent wire format (the example's schema registered in
the stack's registry; the general path: :mod:`pipeline.core.records.schemas`). Both routes write ``bench_cdc``'s
design (a 16-region table, three cells per row). Each run is a worker child process from the earliest
offset until every record is written and committed, on a table recreated before the run, in the order
json, avro, avro, json, ...; figures per run: the child's CPU per event from after its imports to its
end, the HBase side's CPU per event, events/s. Beside them, in this process: the decode alone, CPU per
event for 100,000 values (orjson for JSON, the registry decoder for Avro). Results:
``bench/results/registry.json``.

    python -m bench.bench_registry [--events 300000] [--runs 2] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

import orjson

from bench.bench_cdc import COLUMNS, DESIGN, _drop, _produce, _recreate
from bench.cpu import CpuMeter
from bench.profile_worker import RESULTS, _us
from bench.worker_child import alternate, measure_worker, run_child
from connectors.registry import RegistryClient
from devstack import LocalStack
from devstack.settings import StackSettings
from pipeline.core.avro_examples import AVRO_EXAMPLES, avro_writer
from pipeline.core.examples import generate
from pipeline.core.records.decode import loads
from pipeline.core.records.schemas import RegisteredSchema, SchemaCache, registry_decoder
from pipeline.core.records.wire import frame
from pipeline.settings import Settings, load_settings

KINDS = ("json", "avro")


def settings_for(kind: str, topic: str, table: str, registry_url: str) -> Settings:
    route = {"name": kind, "topic": topic, "table": table, "rowkey": DESIGN, "columns": COLUMNS,
             "timestamp_field": "timestamp"}
    return load_settings(
        None, topics=[{"name": topic, "value_format": kind}], registry={"url": registry_url},
        tables=[{"name": table, "families": {"l": {}}, "regions": 16}], routes=[route],
        writer={"max_batch_rows": 2000, "max_batch_bytes": 4 * 1024 * 1024, "max_batch_age_ms": 200,
                "concurrency": 8, "commit_interval_ms": 1000},
        kafka={"max_poll_records": 5000, "dead_letter_topic": f"{topic}-dlq"}, hbase={"pool_size": 8})


async def _register(url: str, subject: str) -> int:
    async with RegistryClient(load_settings(None, registry={"url": url}).registry) as client:
        return await client.register(subject, orjson.dumps(AVRO_EXAMPLES["logs"]).decode())


def records(kind: str, n: int, schema_id: int) -> list[tuple[bytes, bytes]]:
    events = [e for _, e in generate("logs", n, seed=3)]
    if kind == "json":
        return [(str(i).encode(), orjson.dumps(e)) for i, e in enumerate(events)]
    body = avro_writer(AVRO_EXAMPLES["logs"])
    return [(str(i).encode(), frame(schema_id, body(e))) for i, e in enumerate(events)]


def decode_only(n: int = 100_000) -> dict[str, float]:
    """CPU-us per value of the decode alone, each kind (best of 3 passes)."""
    events = [e for _, e in generate("logs", n, seed=3)]
    cache = SchemaCache()
    cache.add(RegisteredSchema(1, "AVRO", orjson.dumps(AVRO_EXAMPLES["logs"]).decode()))
    body = avro_writer(AVRO_EXAMPLES["logs"])
    values = {"json": [orjson.dumps(e) for e in events], "avro": [frame(1, body(e)) for e in events]}
    decoders = {"json": loads, "avro": registry_decoder("avro", cache, "value")}
    out = {}
    for kind in KINDS:
        decode, vals, best = decoders[kind], values[kind], float("inf")
        for _ in range(3):
            t0 = time.process_time()
            for v in vals:
                decode(v)
            best = min(best, time.process_time() - t0)
        out[kind] = round(best / n * 1e6, 2)
    return out


def _run(stack: LocalStack, kind: str, topic: str, table: str, url: str) -> dict[str, Any]:
    asyncio.run(_recreate(settings_for(kind, topic, table, url)))
    meter = CpuMeter(stack)
    child = run_child("bench.bench_registry", kind, "--topic", topic, "--table", table, "--url", url)
    cpu = meter.stop()
    events = int(child["events"])
    return {"kind": kind, "events": events, "rows": child["rows"], "dead_lettered": child["dead_lettered"],
            "worker_us_per_event": _us(child["run_cpu_s"], events),
            "hbase_jvm_us_per_event": _us(cpu["hbase_jvm"], events), "events_per_s": round(child["events_per_s"])}


async def _child(kind: str, topic: str, table: str, url: str) -> dict[str, Any]:
    settings = settings_for(kind, topic, table, url)
    async with RegistryClient(settings.registry) as registry:
        return await measure_worker(settings, topic, registry if kind == "avro" else None)


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack(StackSettings(registry=True))
    stack.up()
    url = stack.registry_url
    assert url is not None
    run_id = uuid.uuid4().hex[:8]
    names = {kind: (f"bench-{kind}-{run_id}", f"bench_{kind}_{run_id}") for kind in KINDS}
    schema_id = asyncio.run(_register(url, f"{names['avro'][0]}-value"))
    for kind, (topic, table) in names.items():
        asyncio.run(_produce(settings_for(kind, topic, table, url), topic, records(kind, args.events, schema_id),
                             args.partitions))

    def cleanup() -> None:
        for kind, (topic, table) in names.items():
            asyncio.run(_drop(settings_for(kind, topic, table, url), topic, table))

    ab = alternate(KINDS, args.runs, lambda kind: _run(stack, kind, *names[kind], url), "json", cleanup)
    result = {"events": args.events, "partitions": args.partitions, "runs": ab["runs"], "medians": ab["medians"],
              "avro_over_json": ab["over_baseline"]["avro"], "decode_only_us_per_event": decode_only(), "cpus": 2}
    (RESULTS / "registry.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--topic")
    parser.add_argument("--table")
    parser.add_argument("--url")
    a = parser.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(_child(a.child, a.topic, a.table, a.url))))
    else:
        print(json.dumps(main(a)["avro_over_json"]))
