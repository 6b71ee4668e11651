"""Dynamic columns against named ones: the same rows from the same events, alternating on one stack.

Two topics of the same ``logs`` events as JSON. The ``named`` route lists every field of the event
as a column, each with the encoding dynamic columns would give it (``timestamp`` ``long``, ``tags``
``json``, the rest ``text``); the ``dynamic`` route is ``"l:*" = "$value"``. Both write ``bench_cdc``'s
design (a 16-region table), eight cells per row, and the bench checks that a sample of rows is the
same, cell for cell, in both tables. Each run is a worker child process from the earliest offset until
every record is written and committed, on a table recreated before the run, in the order named,
dynamic, dynamic, named, ...; figures per run: the child's CPU per event from after its imports to
its end, the HBase side's CPU per event, events/s. Beside them, in this process: routing alone,
CPU per event for 100,000 values (``Router.route_run`` from the JSON bytes). Results:
``bench/results/columns.json``.

    python -m bench.bench_columns [--events 300000] [--runs 2] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from typing import Any

import orjson

from bench.bench_cdc import DESIGN, _drop, _produce, _recreate
from bench.cpu import CpuMeter
from bench.profile_worker import RESULTS, _us
from bench.worker_child import alternate, measure_worker, run_child
from connectors.hbase import HBaseClient
from devstack import LocalStack
from devstack.settings import StackSettings
from pipeline.core.examples import generate
from pipeline.core.model import TopicPartition
from pipeline.core.routes.router import Router
from pipeline.settings import Settings, load_settings

KINDS = ("named", "dynamic")
NAMED: dict[str, Any] = {"l:hostname": "hostname", "l:log_event": "log_event",
                         "l:timestamp": {"field": "timestamp", "encoding": "long"}, "l:level": "level",
                         "l:value": "value", "l:dc": "dc", "l:message": "message",
                         "l:tags": {"field": "tags", "encoding": "json"}}
COLUMNS: dict[str, dict[str, Any]] = {"named": NAMED, "dynamic": {"l:*": "$value"}}


def settings_for(kind: str, topic: str, table: str) -> Settings:
    route = {"name": kind, "topic": topic, "table": table, "rowkey": DESIGN, "columns": COLUMNS[kind],
             "timestamp_field": "timestamp"}
    return load_settings(
        None, tables=[{"name": table, "families": {"l": {}}, "regions": 16}], routes=[route],
        writer={"max_batch_rows": 2000, "max_batch_bytes": 4 * 1024 * 1024, "max_batch_age_ms": 200,
                "concurrency": 8, "commit_interval_ms": 1000},
        kafka={"max_poll_records": 5000, "dead_letter_topic": f"{topic}-dlq"}, hbase={"pool_size": 8})


def records(n: int) -> list[tuple[bytes, bytes]]:
    return [(str(i).encode(), orjson.dumps(e)) for i, (_, e) in enumerate(generate("logs", n, seed=3))]


class _Rec:
    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, offset: int, value: bytes) -> None:
        self.offset, self.value, self.key, self.timestamp, self.headers = offset, value, None, 0, ()


def route_only(n: int = 100_000) -> dict[str, float]:
    """CPU-us per event of routing alone, each kind (best of 3 passes); checks both give the same cells."""
    recs = [_Rec(i, v) for i, (_, v) in enumerate(records(n))]
    out, cells = {}, {}
    for kind in KINDS:
        router = Router(settings_for(kind, "t", "tb").routes)
        tp, best = TopicPartition("t", 0), float("inf")
        for _ in range(3):
            t0 = time.process_time()
            run = router.route_run(tp, recs, 0, n)
            best = min(best, time.process_time() - t0)
            assert run.stop == n
        cells[kind] = [(m.row, m.cells) for m in run.mutations[:1000]]
        out[kind] = round(best / n * 1e6, 2)
    assert cells["named"] == cells["dynamic"], "the two routes do not give the same cells"
    return out


def _run(stack: LocalStack, kind: str, topic: str, table: str) -> dict[str, Any]:
    asyncio.run(_recreate(settings_for(kind, topic, table)))
    meter = CpuMeter(stack)
    child = run_child("bench.bench_columns", kind, "--topic", topic, "--table", table)
    cpu = meter.stop()
    events = int(child["events"])
    return {"kind": kind, "events": events, "rows": child["rows"], "dead_lettered": child["dead_lettered"],
            "worker_us_per_event": _us(child["run_cpu_s"], events),
            "hbase_jvm_us_per_event": _us(cpu["hbase_jvm"], events), "events_per_s": round(child["events_per_s"])}


async def _same_rows(names: dict[str, tuple[str, str]]) -> int:
    """The first 2,000 rows of both tables, compared; how many."""
    settings = settings_for("named", *names["named"])
    async with HBaseClient(settings.hbase) as hb:
        named = await hb.scan_page(names["named"][1], limit=2000)
        dynamic = await hb.scan_page(names["dynamic"][1], limit=2000)
    assert named == dynamic and len(named) == 2000, "the two tables differ"
    return len(named)


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack(StackSettings())
    stack.up()
    run_id = uuid.uuid4().hex[:8]
    names = {kind: (f"bench-{kind}-{run_id}", f"bench_{kind}_{run_id}") for kind in KINDS}
    rows = records(args.events)
    for kind, (topic, table) in names.items():
        asyncio.run(_produce(settings_for(kind, topic, table), topic, rows, args.partitions))

    def cleanup() -> None:
        for kind, (topic, table) in names.items():
            asyncio.run(_drop(settings_for(kind, topic, table), topic, table))

    compared = 0

    def run(kind: str) -> dict[str, Any]:
        nonlocal compared
        got = _run(stack, kind, *names[kind])
        if kind == "dynamic" and not compared:  # both tables are full after the first round
            compared = asyncio.run(_same_rows(names))
        return got

    ab = alternate(KINDS, args.runs, run, "named", cleanup)
    result = {"events": args.events, "partitions": args.partitions, "cells_per_row": len(NAMED),
              "rows_compared": compared, "runs": ab["runs"], "medians": ab["medians"],
              "dynamic_over_named": ab["over_baseline"]["dynamic"], "route_only_us_per_event": route_only(),
              "cpus": 2}
    (RESULTS / "columns.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--topic")
    parser.add_argument("--table")
    a = parser.parse_args()
    if a.child:
        print(json.dumps(asyncio.run(measure_worker(settings_for(a.child, a.topic, a.table), a.topic))))
    else:
        print(json.dumps(main(a)["dynamic_over_named"]))
