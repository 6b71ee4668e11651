"""What security costs: the worker writing through the Kerberized HBase's plain gateways against its SASL
gateways with QOP auth-conf (every message sealed by GSSAPI) and its HTTPS + SPNEGO gateways (one POST and
one fresh SPNEGO token per call), alternating on one stack (``stack up --kerberos``): the same HBase, the
same topic, the same rows, only the transport differs.

One topic of ``bench_worker``'s log events (JSON, the generated put builders); ``bench_cdc``'s design
(a 16-region table recreated before each run, three cells per row). Each run is a worker child process
(:mod:`bench.worker_child`) in the order plain, sasl, https, https, sasl, plain, ...; figures per run: the
child's CPU per event, the Kerberized HBase JVM's CPU per event (master, region server and the six
gateways share it), events/s. Results: ``bench/results/security.json``.

    python -m bench.bench_security [--events 200000] [--runs 2] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from typing import Any, cast

import orjson

from bench.bench_cdc import COLUMNS, DESIGN, _produce
from bench.cpu import cpu_seconds
from bench.profile_worker import RESULTS, _us
from bench.worker_child import alternate, measure_worker, run_child
from connectors.hbase import HBaseClient
from connectors.kafka import delete_topics
from devstack import LocalStack
from devstack.kerberos import KerberosPart
from devstack.krb_client import GatewayKind, hbase_keys
from devstack.settings import StackSettings
from pipeline.core.examples import generate
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import Settings, load_settings

KINDS = ("plain", "sasl", "https")


def settings_for(part: KerberosPart, kind: str, topic: str, table: str) -> Settings:
    route = {"name": kind, "topic": topic, "table": table, "rowkey": DESIGN, "columns": COLUMNS,
             "timestamp_field": "timestamp"}
    return load_settings(
        None, tables=[{"name": table, "families": {"l": {}}, "regions": 16}], routes=[route],
        writer={"max_batch_rows": 2000, "max_batch_bytes": 4 * 1024 * 1024, "max_batch_age_ms": 200,
                "concurrency": 8, "commit_interval_ms": 1000},
        kafka={"max_poll_records": 5000, "dead_letter_topic": f"{topic}-dlq"},
        hbase={**hbase_keys(part, cast(GatewayKind, kind)), "pool_size": 8})


async def _recreate(settings: Settings) -> None:
    async with HBaseClient(settings.hbase) as hb:
        await create_tables(hb, settings, recreate=True)


async def _drop(settings: Settings, topic: str, table: str) -> None:
    async with HBaseClient(settings.hbase) as hb:
        if table in await hb.tables():
            await hb.delete_table(table)
    await delete_topics(settings.kafka, [topic])


def _run(stack: LocalStack, part: KerberosPart, kind: str, topic: str, table: str) -> dict[str, Any]:
    settings = settings_for(part, kind, topic, table)
    asyncio.run(_recreate(settings))
    pid = stack.procs["hbase-krb"].pid()
    before = cpu_seconds(pid)
    child = run_child("bench.bench_security", kind, "--topic", topic, "--table", table,
                      env={**os.environ, **part.env()})
    hbase_cpu = cpu_seconds(pid) - before
    events = int(child["events"])
    return {"kind": kind, "events": events, "rows": child["rows"], "dead_lettered": child["dead_lettered"],
            "worker_us_per_event": _us(child["run_cpu_s"], events),
            "hbase_jvm_us_per_event": _us(hbase_cpu, events), "events_per_s": round(child["events_per_s"])}


def _kerberos_stack() -> tuple[LocalStack, KerberosPart]:
    stack = LocalStack(StackSettings(kerberos=True))
    stack.up()
    assert stack.kerberos is not None
    return stack, stack.kerberos


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack, part = _kerberos_stack()
    os.environ.update(part.env())
    run_id = uuid.uuid4().hex[:8]
    topic = f"bench-security-{run_id}"
    tables = {kind: f"bench_{kind}_{run_id}" for kind in KINDS}
    events = [(str(i).encode(), orjson.dumps(e)) for i, (_, e) in enumerate(generate("logs", args.events, seed=3))]
    asyncio.run(_produce(settings_for(part, "plain", topic, tables["plain"]), topic, events, args.partitions))

    def cleanup() -> None:
        for kind in KINDS:
            asyncio.run(_drop(settings_for(part, kind, topic, tables[kind]), topic, tables[kind]))

    ab = alternate(KINDS, args.runs, lambda kind: _run(stack, part, kind, topic, tables[kind]), "plain", cleanup)
    result = {"events": args.events, "partitions": args.partitions, "runs": ab["runs"], "medians": ab["medians"],
              "over_plain": ab["over_baseline"], "cpus": 2}
    (RESULTS / "security.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--child", choices=KINDS)
    parser.add_argument("--topic")
    parser.add_argument("--table")
    a = parser.parse_args()
    if a.child:
        krb = LocalStack.recorded().kerberos
        assert krb is not None, "the stack has no Kerberos part: stack up --kerberos"
        print(json.dumps(asyncio.run(measure_worker(settings_for(krb, a.child, a.topic, a.table), a.topic))))
    else:
        print(json.dumps(main(a)["over_plain"]))
