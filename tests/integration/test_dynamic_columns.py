"""Dynamic columns against the real servers: an Avro topic whose schema gains a field, then loses one,
mid-topic (records written by Confluent's own serializer, schemas in the real registry), routed with
``"d:*" = "$value"`` (nested records flattened, one field excluded). HBase's table must equal, cell
for cell, a model built here from the events and the encoding rules of ``docs/columns.md``: a new
field's column appears from the record that first carries it, and a field the schema lost leaves the
cells older records wrote."""

from __future__ import annotations

import struct
import sys
import time
from decimal import Decimal
from typing import Any

import anyio
import numpy as np
import orjson
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics
from connectors.registry import RegistryClient
from devstack import LocalStack
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import load_settings

from .test_registry_ingest import _ingest, _produce, _table
from .worker_support import drop_tables, stop_offsets

V1: dict[str, Any] = {"type": "record", "name": "Reading", "namespace": "plant", "fields": [
    {"name": "id", "type": "string"},
    {"name": "n", "type": "long"},
    {"name": "ratio", "type": "float"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "probe", "type": {"type": "record", "name": "Probe", "fields": [
        {"name": "slot", "type": "int"}, {"name": "model", "type": "string"}]}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "secret", "type": "string", "default": ""},
]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "region", "type": "string", "default": "none"}]}  # gains a field
V3 = {**V2, "fields": [f for f in V2["fields"] if f["name"] != "note"]}  # loses one
N, ROWS = 300, 250  # records 250..299 rewrite rows 0..49 (written by the first schema) with the third


def _event(i: int) -> dict[str, Any]:
    e: dict[str, Any] = {"id": f"r{i % ROWS:04d}", "n": i * 7 - 900, "ratio": (i + 1) / 7,
                         "amount": Decimal(i * 13 - 1000).scaleb(-2), "probe": {"slot": i % 5, "model": f"m{i % 3}"},
                         "note": None if i % 4 == 0 else f"note {i}", "secret": "s3cr3t"}
    if i >= N // 3:
        e["region"] = ("eu", "us", "ap")[i % 3]
    if i >= 2 * N // 3:
        del e["note"]
    return e


def _model(events: list[dict[str, Any]]) -> dict[bytes, dict[bytes, bytes]]:
    """The table the rules give: each record's fields as cells, later records over earlier ones."""
    rows: dict[bytes, dict[bytes, bytes]] = {}
    for e in events:
        unscaled = int(e["amount"].scaleb(2))
        width = (unscaled + (unscaled < 0)).bit_length() // 8 + 1  # Java's BigInteger.toByteArray
        cells = {b"d:id": e["id"].encode(), b"d:n": struct.pack(">q", e["n"]),
                 b"d:ratio": repr(float(np.format_float_scientific(np.float32(e["ratio"]), unique=True))).encode(),
                 b"d:amount": struct.pack(">i", 2) + unscaled.to_bytes(width, "big", signed=True),
                 b"d:probe.slot": struct.pack(">q", e["probe"]["slot"]), b"d:probe.model": e["probe"]["model"].encode()}
        if e.get("note") is not None:
            cells[b"d:note"] = e["note"].encode()
        if "region" in e:
            cells[b"d:region"] = e["region"].encode()
        rows.setdefault(e["id"].encode(), {}).update(cells)
    return rows


async def test_a_schema_that_gains_and_loses_fields_lands_every_field_as_a_column(
        registry_stack: LocalStack, hbase: HBaseClient, unique: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = registry_stack.registry_url
    assert url is not None
    topic, table = f"dyn-{unique}", f"dyn_{unique}"
    settings = load_settings(
        None, topics=[{"name": topic, "value_format": "avro"}], tables=[{"name": table}],
        routes=[{"name": "all", "topic": topic, "table": table, "rowkey": "[id]",
                 "columns": {"d:*": {"field": "$value", "nested": "flatten", "exclude": ["secret"]}}}],
        registry={"url": url}, kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})
    await create_topics(settings.kafka, {topic: 1, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    try:
        client = SchemaRegistryClient({"url": url})
        ctx = SerializationContext(topic, MessageField.VALUE)
        serializers = [AvroSerializer(client, orjson.dumps(v).decode()) for v in (V1, V2, V3)]
        events = [_event(i) for i in range(N)]
        values = [serializers[i * 3 // N](e, ctx) for i, e in enumerate(events)]
        assert len({v[1:5] for v in values}) == 3  # three schema ids
        # one partition: a row's later record (the third schema's) is written after its earlier one
        _produce(settings.kafka.bootstrap_servers, topic, values)
        async with RegistryClient(settings.registry) as registry:
            summary = await _ingest(settings, hbase, [topic], registry)
        assert summary.dead_lettered == 0 and summary.consumed == N
        got, want = await _table(hbase, table), _model(events)
        columns = {c for cells in got.values() for c in cells}
        regions = sum(b"d:region" in c for c in got.values())
        kept = sum(b"d:note" in got[f"r{i:04d}".encode()] for i in range(N - ROWS))
        with capsys.disabled():  # the figures, on the terminal of every run
            sys.stdout.write(f"\n[dynamic columns] {N} records of 7, 8 and 7 fields (3 schemas), {len(got)} rows "
                             f"compared, {len(columns)} columns: {sorted(c.decode() for c in columns)}; rows with "
                             f"d:region {regions}, rows rewritten by the third schema keeping d:note {kept}\n")
        assert got == want
        assert b"d:secret" not in columns and b"d:region" in columns
    finally:
        await drop_tables(hbase, settings)


async def test_a_ttl_field_ages_cells_out_on_their_own_time(hbase: HBaseClient, unique: str) -> None:
    """Cells stamped an hour ago: a TTL of ten minutes has expired them, one of two hours has not, and
    no TTL (absent or null) keeps them; a TTL that is no positive integer is a dead letter."""
    topic, table = f"ttl-{unique}", f"ttl_{unique}"
    settings = load_settings(
        None, tables=[{"name": table}],
        routes=[{"name": "aging", "topic": topic, "table": table, "rowkey": "[id]", "timestamp_field": "ts",
                 "ttl_field": "ttl_ms", "columns": {"d:*": {"exclude": ["ttl_ms", "ts"]}}}],
        kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})
    await create_topics(settings.kafka, {topic: 1, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    hour_ago = int(time.time() * 1000) - 3_600_000
    events = {"expired": 600_000, "kept": 7_200_000, "forever": None, "bad": "soon", "zero": 0}
    values = [orjson.dumps({"id": name, "ts": hour_ago, "v": name, **({"ttl_ms": ttl} if name != "forever" else {})})
              for name, ttl in events.items()] + [orjson.dumps({"id": "null", "ts": hour_ago, "ttl_ms": None, "v": 1})]
    try:
        _produce(settings.kafka.bootstrap_servers, topic, values)
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), topics=[topic],
                        stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(120):
            summary = await worker.run()
        assert summary.consumed == len(values) and summary.dead_lettered == 2  # "soon" and 0
        got = await _table(hbase, table)
        assert sorted(got) == [b"forever", b"kept", b"null"]
        assert got[b"kept"] == {b"d:id": b"kept", b"d:v": b"kept"}
    finally:
        await drop_tables(hbase, settings)
