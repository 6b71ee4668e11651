"""hbase-ingest's side of the peer benchmark: ``bench_worker``'s settings and design under the run's
own topic, table and group, and a child process that runs one worker to the topic's end.

    python -m bench.peer_ingest --topic T --table X --group G --dlq D [--batch-by server|region]

The child prints a JSON line ``{"written": N}`` each time the rows HBase has acknowledged change
(checked every 20 ms), then ``{"summary": {...}}`` once every row is written and committed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import anyio

from bench.bench_worker import bench_settings
from pipeline.core.ingest.batcher import BatchBy
from pipeline.settings import Settings, load_settings

__all__ = ["child_command", "ingest_settings", "parse_progress"]


def ingest_settings(topic: str, table: str, dead_letters: str, partitions: int = 8,
                    batch_by: BatchBy = "server") -> Settings:
    """``bench_worker.bench_settings`` (writer, Kafka, HBase settings; the route's design, columns
    and 16-region table) with the route reading ``topic`` into ``table``, dead letters to
    ``dead_letters``, batches grouped ``batch_by``."""
    data = bench_settings(partitions).model_dump(mode="python", exclude_unset=True)
    data["writer"]["batch_by"] = batch_by
    if len(data["routes"]) != 1 or len(data["tables"]) != 1:
        raise ValueError("bench_worker's settings changed shape: expected one route and one table")
    data["kafka"]["dead_letter_topic"] = dead_letters
    data["tables"][0]["name"] = table
    data["routes"][0].update(topic=topic, table=table)
    return load_settings(None, **data)


def child_command(python: str, topic: str, table: str, group: str, dead_letters: str,
                  batch_by: BatchBy = "server") -> list[str]:
    return [python, "-m", "bench.peer_ingest", "--topic", topic, "--table", table, "--group", group,
            "--dlq", dead_letters, "--batch-by", batch_by]


def parse_progress(line: str) -> tuple[int | None, dict[str, Any] | None]:
    """One line of the child's output -> (rows written, summary); (None, None) for other lines."""
    if not line.startswith("{"):
        return None, None
    doc = json.loads(line)
    if "written" in doc:
        return int(doc["written"]), None
    if "summary" in doc:
        return None, dict(doc["summary"])
    return None, None


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from connectors.hbase import HBaseClient
    from connectors.kafka import KafkaBroker, end_offsets
    from pipeline.core.model import TopicPartition
    from pipeline.runtime.ingest.worker import Worker
    from pipeline.runtime.process.proctune import tune_process

    settings = ingest_settings(args.topic, args.table, args.dlq, batch_by=args.batch_by)
    tune_process(settings.runtime)  # as `hbase-ingest run` does
    stop_at = {TopicPartition(args.topic, p): e for p, e in (await end_offsets(settings.kafka, args.topic)).items()}

    async def report(worker: Worker) -> None:
        last = -1
        while True:
            if worker.stats.rows_written != last:
                last = worker.stats.rows_written
                sys.stdout.write(f'{{"written": {last}}}\n')
                sys.stdout.flush()
            await anyio.sleep(0.02)

    async with HBaseClient(settings.hbase) as hb:
        worker = Worker(settings, hb, KafkaBroker(settings.kafka), group_id=args.group, stop_at=stop_at)
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(report, worker)
            summary = await worker.run()
            tg.cancel_scope.cancel()
    print(f'{{"written": {worker.stats.rows_written}}}')
    return {"events": summary.consumed, "rows": summary.rows_written, "batches": summary.batches_written,
            "dead_lettered": worker.stats.dead_lettered, "run_s": round(time.perf_counter() - t0, 3)}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--topic", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--dlq", required=True)
    p.add_argument("--batch-by", choices=("server", "region"), default="server")
    ns = p.parse_args()
    print(json.dumps({"summary": asyncio.run(_run(ns))}), flush=True)
