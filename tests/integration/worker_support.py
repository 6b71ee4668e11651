"""Helpers for the worker tests: per-test topics/tables/groups and a config written to disk."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import struct
import subprocess
from pathlib import Path
from typing import Any

import orjson

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets, make_producer
from pipeline.core.model import TopicPartition
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import Settings, WriterSettings, load_settings

#: fetches answered within 50 ms: the tests wait for their few records, where the default (250 ms) trades
#: latency for CPU below saturation; sealing when caught up stays on (50 >= the tests' batch age, 50 ms)
TEST_FETCH = {"fetch_max_wait_ms": 50}


def order_settings(unique: str, base: Settings | None = None, **writer: Any) -> Settings:
    """The guides' transaction design (seller, buyer, index tables) on per-test names. Families keep 5
    versions so that a replay which added versions instead of rewriting cells would be visible."""
    topic = f"orders-{unique}"
    fam = {"o": {"versions": 5}}
    routes = [
        {"name": "seller", "topic": topic, "table": f"seller_{unique}", "timestamp_field": "timestamp",
         "rowkey": "[seller_id][long(timestamp)][order_number]",
         "columns": {"o:b": "buyer_id", "o:a": {"field": "amount_cents", "encoding": "long"}}},
        {"name": "buyer", "topic": topic, "table": f"buyer_{unique}", "timestamp_field": "timestamp",
         "rowkey": "[buyer_id][long(timestamp)][order_number]",
         "columns": {"o:s": "seller_id", "o:i": {"field": "items", "encoding": "json"}}},
        {"name": "index", "topic": topic, "table": f"index_{unique}", "timestamp_field": "timestamp",
         "rowkey": "[order_number]", "columns": {"o:s": "seller_id", "o:b": "buyer_id"}},
    ]
    tables = [{"name": r["table"], "families": fam} for r in routes]
    w = {"max_batch_rows": 200, "max_batch_age_ms": 50, "commit_interval_ms": 200, "concurrency": 4}
    w.update(writer)
    return load_settings(None, routes=routes, tables=tables, writer=w,
                         kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}",
                                "max_poll_records": 500, **TEST_FETCH})


def order_event(i: int) -> dict[str, Any]:
    return {"order_number": f"ORD{i:08d}", "seller_id": f"s{i % 7:03d}", "buyer_id": f"b{i % 13:04d}",
            "timestamp": 1_700_000_000_000 + i * 1000, "amount_cents": 100 + i,
            "items": [{"sku": f"K{i % 5}", "qty": 1 + i % 3}]}


def expected_cells(settings: Settings, event: dict[str, Any]) -> dict[str, tuple[bytes, dict[bytes, bytes]]]:
    """table -> (row, cells): computed by hand from the guide's layouts, not by the router."""
    ts = struct.pack(">q", event["timestamp"])
    o = event["order_number"].encode()
    tables = {r.name: r.table for r in settings.routes}
    return {
        tables["seller"]: (event["seller_id"].encode() + ts + o,
                           {b"o:b": event["buyer_id"].encode(), b"o:a": struct.pack(">q", event["amount_cents"])}),
        tables["buyer"]: (event["buyer_id"].encode() + ts + o,
                          {b"o:s": event["seller_id"].encode(), b"o:i": orjson.dumps(event["items"])}),
        tables["index"]: (o, {b"o:s": event["seller_id"].encode(), b"o:b": event["buyer_id"].encode()}),
    }


async def setup(settings: Settings, hbase: HBaseClient, partitions: int = 4) -> str:
    topic = settings.routes[0].topic
    await create_topics(settings.kafka, {topic: partitions, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    return topic


async def produce(settings: Settings, topic: str, values: list[bytes], keys: list[bytes] | None = None,
                  headers: list[tuple[str, bytes | None]] | None = None) -> None:
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        futs = [await producer.send(topic, v, key=(keys[i] if keys else str(i).encode()), headers=headers)
                for i, v in enumerate(values)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


async def stop_offsets(settings: Settings, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): e for p, e in (await end_offsets(settings.kafka, topic)).items()}


async def drop_tables(hbase: HBaseClient, settings: Settings) -> None:
    for t in {r.table for r in settings.routes}:
        with contextlib.suppress(Exception):  # a test may fail before creating every table
            await hbase.delete_table(t)


def _toml(value: object) -> str:
    """A setting's value as a TOML value: booleans and numbers as they are, anything else a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


def writer_toml(writer: WriterSettings) -> str:
    """The ``[writer]`` section of a TOML profile equivalent to ``writer`` (unset values left out)."""
    return "[writer]\n" + "".join(f"{key} = {_toml(value)}\n" for key, value in writer.model_dump().items()
                                  if value is not None)


def write_config(path: Path, settings: Settings) -> Path:
    """A TOML file equivalent to ``settings`` (for worker subprocesses; of ``[hbase]`` only ``client`` and
    ``masters``, when native)."""
    lines = []
    k, w = settings.kafka, settings.writer
    lines.append(f'[kafka]\ngroup_id = "{k.group_id}"\ndead_letter_topic = "{k.dead_letter_topic}"\n'
                 f"max_poll_records = {k.max_poll_records}\nfetch_max_wait_ms = {k.fetch_max_wait_ms}\n")
    lines.append(writer_toml(w))
    if settings.hbase.client == "native":  # the gateway's address comes from the worker's environment
        masters = ", ".join(f'"{m}"' for m in settings.hbase.masters)
        lines.append(f'[hbase]\nclient = "native"\nmasters = [{masters}]\n')
    for t in settings.tables:
        lines.append(f'[[tables]]\nname = "{t.name}"\nfamilies = {{ o = {{ versions = 5 }} }}\n')
    for r in settings.routes:
        cols = ", ".join(f'"{c}" = {{ field = "{s.field}", encoding = "{s.encoding}" }}' for c, s in r.columns.items())
        lines.append(f'[[routes]]\nname = "{r.name}"\ntopic = "{r.topic}"\ntable = "{r.table}"\n'
                     f'rowkey = "{r.rowkey}"\ntimestamp_field = "{r.timestamp_field}"\ncolumns = {{ {cols} }}\n')
    path.write_text("\n".join(lines))
    return path


async def signal_and_wait(proc: subprocess.Popen[bytes], *signals: signal.Signals) -> tuple[int, str]:
    """Send ``signals`` to ``proc`` one after another, wait (at most 60 s) for it to exit, kill it
    if it did not; returns the exit status and the output."""
    try:
        for sig in signals:
            proc.send_signal(sig)
        out, _ = await asyncio.to_thread(proc.communicate, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out.decode()

