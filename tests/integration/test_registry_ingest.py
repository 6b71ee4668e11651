"""Schema-registry formats against the real servers: Kafka, HBase and Apicurio Registry (``stack up
--registry``). Records are written by Confluent's own Python serializers (``confluent-kafka``: Avro,
Protobuf, JSON Schema; its librdkafka producer), not by our code. Each format's table must equal, row
for row and byte for byte, the table the same events make when produced as plain JSON (the JSON path
is proven elsewhere); Avro's schema evolves mid-stream. Bad records go to the dead-letter topic with
their reasons, and a registry that stops answering for 30 s mid-stream is waited for: nothing lost."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, make_consumer
from connectors.registry import RegistryClient
from devstack import LocalStack
from pipeline.core.avro_examples import AVRO_EXAMPLES
from pipeline.core.examples import generate
from pipeline.core.records.wire import frame
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker, WorkerSummary
from pipeline.settings import Settings, load_settings

from .worker_support import drop_tables, stop_offsets

PARTITIONS = 3
COLUMNS = {"l:v": "value", "l:lv": "level", "l:m": "message", "l:t": {"field": "tags", "encoding": "json"},
           "l:r": {"field": "region", "required": False}}
ROWKEY = "[rpad(hostname, '_', 8)][rpad(log_event, '_', 12)][reverse_ts(timestamp)]"
FORMATS = ("json", "avro", "protobuf", "json_schema")


def _settings(unique: str, registry_url: str, **registry: Any) -> Settings:
    topics = {fmt: f"reg-{fmt}-{unique}" for fmt in FORMATS}
    return load_settings(
        None,
        topics=[{"name": topics[fmt], "value_format": fmt} for fmt in FORMATS],
        tables=[{"name": f"reg_{fmt}_{unique}", "families": {"l": {"versions": 1}}} for fmt in FORMATS],
        routes=[{"name": fmt, "topic": topics[fmt], "table": f"reg_{fmt}_{unique}", "rowkey": ROWKEY,
                 "timestamp_field": "timestamp", "columns": COLUMNS} for fmt in FORMATS],
        registry={"url": registry_url, **registry},
        kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})


def _log_message_class() -> Any:
    """The Protobuf message of a ``logs`` example event, as a producer's generated code would declare it."""
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="logs.proto", package="examples", syntax="proto3")
    log = fdp.message_type.add(name="Log")
    for number, (name, kind) in enumerate([("hostname", f.TYPE_STRING), ("log_event", f.TYPE_STRING),
                                           ("timestamp", f.TYPE_INT64), ("level", f.TYPE_STRING),
                                           ("value", f.TYPE_DOUBLE), ("dc", f.TYPE_STRING),
                                           ("message", f.TYPE_STRING)], start=1):
        log.field.add(name=name, number=number, type=kind, label=f.LABEL_OPTIONAL)
    log.field.add(name="tags", number=8, type=f.TYPE_MESSAGE, type_name=".examples.Log.Tags", label=f.LABEL_OPTIONAL)
    tags = log.nested_type.add(name="Tags")
    tags.field.add(name="service", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    tags.field.add(name="pid", number=2, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("examples.Log"))


JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Log", "type": "object",
               "properties": {"hostname": {"type": "string"}, "log_event": {"type": "string"},
                              "timestamp": {"type": "integer"}, "value": {"type": "number"},
                              "tags": {"type": "object"}},
               "required": ["hostname", "log_event", "timestamp"]}
EVOLVED = {**AVRO_EXAMPLES["logs"],
           "fields": [*AVRO_EXAMPLES["logs"]["fields"], {"name": "region", "type": "string", "default": "none"}]}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    failed: list[str] = []
    for i, value in enumerate(values):
        producer.produce(topic, value, key=str(i % 7).encode(),
                         on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failed, failed


async def _ingest(settings: Settings, hbase: HBaseClient, topics: list[str], registry: RegistryClient,
                  limit_s: float = 240) -> WorkerSummary:
    stop: dict[Any, int] = {}
    for topic in topics:
        stop.update(await stop_offsets(settings, topic))
    worker = Worker(settings, hbase, KafkaBroker(settings.kafka), topics=topics, stop_at=stop, registry=registry)
    with anyio.fail_after(limit_s):
        return await worker.run()


async def _table(hbase: HBaseClient, table: str) -> dict[bytes, dict[bytes, bytes]]:
    return dict(await hbase.scan_page(table, limit=100_000))


async def _dead_letters(settings: Settings, count: int) -> list[dict[str, bytes]]:
    consumer = make_consumer(settings.kafka, group_id=None, topics=[settings.kafka.dead_letter_topic],
                             auto_offset_reset="earliest")
    await consumer.start()
    seen: list[dict[str, bytes]] = []
    try:
        with anyio.fail_after(30):
            while len(seen) < count:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    seen += [dict(m.headers) for m in msgs]
    finally:
        await consumer.stop()
    return seen


@pytest.fixture
async def formats(registry_stack: LocalStack, hbase: HBaseClient, unique: str) -> Any:
    assert registry_stack.registry_url is not None
    settings = _settings(unique, registry_stack.registry_url)
    await create_topics(settings.kafka, {**{r.topic: PARTITIONS for r in settings.routes},
                                         settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    try:
        yield settings
    finally:
        await drop_tables(hbase, settings)


async def test_confluent_serialized_avro_protobuf_json_schema_equal_the_json_path(
        registry_stack: LocalStack, hbase: HBaseClient, formats: Settings) -> None:
    settings, url = formats, registry_stack.registry_url
    assert url is not None
    topic = {r.name: r.topic for r in settings.routes}
    events = [e for _, e in generate("logs", 3000, seed=29)]
    half = len(events) // 2
    for i, event in enumerate(events[half:], start=half):
        event["region"] = ("eu", "us", "ap")[i % 3]  # the evolved schema's new field
    client = SchemaRegistryClient({"url": url})

    def ctx(fmt: str) -> SerializationContext:
        return SerializationContext(topic[fmt], MessageField.VALUE)
    avro_v1 = AvroSerializer(client, orjson.dumps(AVRO_EXAMPLES["logs"]).decode())
    avro_v2 = AvroSerializer(client, orjson.dumps(EVOLVED).decode())
    log_cls = _log_message_class()
    proto = ProtobufSerializer(log_cls, client, {"use.deprecated.format": False})
    json_schema = JSONSerializer(orjson.dumps(JSON_SCHEMA).decode(), client)

    def as_proto(e: dict[str, Any]) -> Any:
        plain = {k: v for k, v in e.items() if k not in ("tags", "region")}
        return log_cls(**plain, tags=log_cls.Tags(**e["tags"]))
    produced: dict[str, list[bytes]] = {
        "json": [orjson.dumps(e) for e in events],
        "avro": [avro_v1(e, ctx("avro")) for e in events[:half]] + [avro_v2(e, ctx("avro")) for e in events[half:]],
        "json_schema": [json_schema(e, ctx("json_schema")) for e in events],
    }
    # Protobuf carries no "region" (one schema version), so the JSON path's table is compared without it
    produced["protobuf"] = [proto(as_proto(e), ctx("protobuf")) for e in events]
    ids = {fmt: {int.from_bytes(v[1:5], "big") for v in vals} for fmt, vals in produced.items() if fmt != "json"}
    assert len(ids["avro"]) == 2 and len(ids["protobuf"]) == 1 and len(ids["json_schema"]) == 1
    for fmt, values in produced.items():
        _produce(settings.kafka.bootstrap_servers, topic[fmt], values)

    async with RegistryClient(settings.registry) as registry:
        summary = await _ingest(settings, hbase, list(topic.values()), registry)
    assert summary.dead_lettered == 0 and summary.consumed == len(events) * len(FORMATS)

    tables = {r.name: await _table(hbase, r.table) for r in settings.routes}
    want = tables["json"]
    assert len(want) == len(events)
    assert sum(b"l:r" in cells for cells in want.values()) == len(events) - half
    for fmt in ("avro", "json_schema"):
        assert tables[fmt] == want, f"{fmt}: differs from the JSON path's table"
    no_region = {row: {c: v for c, v in cells.items() if c != b"l:r"} for row, cells in want.items()}
    assert tables["protobuf"] == no_region


async def test_bad_framing_unknown_ids_and_mismatched_bodies_are_dead_letters_with_reasons(
        registry_stack: LocalStack, hbase: HBaseClient, formats: Settings, unique: str) -> None:
    settings, url = formats, registry_stack.registry_url
    assert url is not None
    topic = {r.name: r.topic for r in settings.routes}["avro"]
    client = SchemaRegistryClient({"url": url})
    avro = AvroSerializer(client, orjson.dumps(AVRO_EXAMPLES["logs"]).decode())
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = [avro(e, ctx) for _, e in generate("logs", 50, seed=3)]
    body = good[0][5:]
    bad = {"unknown_schema": frame(2_000_000_000, body), "undecodable": b"\x01" + good[1][1:],
           "schema_mismatch": good[2][:-4]}
    _produce(settings.kafka.bootstrap_servers, topic, good[3:20] + list(bad.values()) + good[20:])
    async with RegistryClient(settings.registry) as registry:
        summary = await _ingest(settings, hbase, [topic], registry)
    assert summary.dead_lettered == len(bad) and summary.rows_written == len(good) - 3
    letters = {h["hbase-ingest.reason"].decode(): h["hbase-ingest.error"].decode()
               for h in await _dead_letters(settings, len(bad))}
    assert set(letters) == set(bad)
    assert "value is framed with schema id 2000000000, which the registry does not have" in letters["unknown_schema"]
    assert "does not start with the Confluent wire format's magic byte 0 (found 0x01)" in letters["undecodable"]
    assert "value does not match its Avro schema" in letters["schema_mismatch"]
    assert len(await _table(hbase, f"reg_avro_{unique}")) == len(good) - 3


async def test_a_registry_that_stops_answering_for_30_s_is_waited_for_and_nothing_is_lost(
        registry_stack: LocalStack, hbase: HBaseClient, formats: Settings, unique: str) -> None:
    url = registry_stack.registry_url
    assert url is not None
    settings = _settings(unique, url, timeout_s=2.0)
    topic = {r.name: r.topic for r in settings.routes}["avro"]
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    events = [e for _, e in generate("logs", 400, seed=5)]
    first = AvroSerializer(client, orjson.dumps(AVRO_EXAMPLES["logs"]).decode())
    _produce(settings.kafka.bootstrap_servers, topic, [first(e, ctx) for e in events[:200]])
    later = AvroSerializer(client, orjson.dumps(EVOLVED).decode())  # a new id, registered before the outage
    rest = [later({**e, "region": "eu"}, ctx) for e in events[200:]]
    pid = registry_stack.procs["registry"].pid()
    assert pid is not None

    async with RegistryClient(settings.registry) as registry:
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), topics=[topic], registry=registry)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            table = {r.name: r.table for r in settings.routes}["avro"]
            await _until(lambda: worker.stats.rows_written >= 200, 120)
            os.kill(pid, signal.SIGSTOP)  # the registry stops answering; the new id is not cached yet
            stopped = time.monotonic()
            try:
                _produce(settings.kafka.bootstrap_servers, topic, rest)
                await _until(lambda: worker.waiting is not None and "schema registry" in worker.waiting, 60)
                await anyio.sleep(max(0.0, 30 - (time.monotonic() - stopped)))
                assert worker.stats.rows_written == 200  # waiting: nothing of the new id routed
            finally:
                os.kill(pid, signal.SIGCONT)
            await _until(lambda: worker.stats.rows_written >= 400, 120)
            worker.request_stop()
    rows = await _table(hbase, table)
    assert len(rows) == 400 and sum(b"l:r" in c for c in rows.values()) == 200
    assert worker.stats.dead_lettered == 0


async def _until(check: Callable[[], bool], limit_s: float) -> None:
    with anyio.fail_after(limit_s):
        while not check():
            await anyio.sleep(0.1)


async def test_produce_format_avro_and_the_avro_profile(registry_stack: LocalStack, hbase: HBaseClient,
                                                        unique: str) -> None:
    """`hbase-ingest produce --format avro` registers the example's schema and writes framed Avro that
    config/logs_avro.toml ingests, every event a row."""
    topic = f"logs-avro-{unique}"
    out = await anyio.run_process([sys.executable, "-m", "pipeline", "produce", "-e", "logs", "-n", "500", "--topic",
                                   topic, "--partitions", "2", "--format", "avro"], check=False,
                                  env={**os.environ, "COLUMNS": "250"})  # one line on stderr
    assert out.returncode == 0, out.stderr.decode()
    assert f"produced 500 logs events to {topic!r} as Avro (schema id" in out.stderr.decode()
    base = load_settings(Path(__file__).parents[2] / "config" / "logs_avro.toml")
    route = base.routes[0].model_copy(update={"topic": topic, "table": f"logs_avro_{unique}"})
    settings = base.model_copy(update={
        "topics": [base.topics[0].model_copy(update={"name": topic})], "routes": [route],
        "tables": [base.tables[0].model_copy(update={"name": route.table})],
        "kafka": base.kafka.model_copy(update={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})})
    await create_tables(hbase, settings, recreate=True)
    try:
        async with RegistryClient(settings.registry) as registry:
            summary = await _ingest(settings, hbase, [topic], registry)
        assert summary.rows_written == 500 and summary.dead_lettered == 0
        rows = await _table(hbase, route.table)
        assert len(rows) == 500 and all(cells[b"l:svc"] in (b"api", b"auth", b"search", b"cart")
                                        for cells in rows.values())
    finally:
        await drop_tables(hbase, settings)
