"""The worker with a registry format on the in-memory twins and a scripted registry: schemas fetched
once per id, evolution mid-stream, dead letters for an unknown id, a wrong magic byte and a body that
does not match, and a registry that does not answer for a while (the worker waits; nothing is lost or
committed past). Against the real registry: tests/integration/test_registry_ingest.py."""

from __future__ import annotations

import io
from typing import Any

import anyio
import fastavro
import orjson
import pytest
from structlog.testing import capture_logs

from connectors.memory import MemoryBroker, MemoryHBase
from pipeline.core.model import TopicPartition
from pipeline.core.records.schemas import RegisteredSchema
from pipeline.core.records.wire import frame
from pipeline.errors import ConfigError, RegistryError, RegistryUnavailable, SchemaNotFound
from pipeline.runtime.ingest.deadletter import HEADER_PREFIX
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import Settings, load_settings

TOPIC, TABLE, DLQ = "orders", "t", "orders.dead"
V1 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "tenant", "type": "string", "default": "none"}]}


class ScriptedRegistry:
    """Schemas by id; does not answer for the first ``down`` calls."""

    url = "http://registry.test/apis/ccompat/v7"

    def __init__(self, schemas: dict[int, Any], down: int = 0, refuse: bool = False) -> None:
        self.schemas, self.down, self.refuse = schemas, down, refuse
        self.calls: list[int] = []

    async def check(self) -> None:
        return None

    async def schema(self, schema_id: int) -> RegisteredSchema:
        self.calls.append(schema_id)
        if self.down > 0:
            self.down -= 1
            raise RegistryUnavailable(f"registry {self.url}: fetching schema id {schema_id} failed: ConnectError")
        if self.refuse:
            raise RegistryError(f"registry {self.url}: HTTP 401, the credentials were refused")
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"registry {self.url}: fetching schema id {schema_id}: not found (Schema "
                                 f"{schema_id} not found, error 40403)", schema_id=schema_id)
        return RegisteredSchema(schema_id, "AVRO", orjson.dumps(self.schemas[schema_id]).decode())

    async def aclose(self) -> None:
        return None


def _settings() -> Settings:
    routes = [{"name": "r", "topic": TOPIC, "table": TABLE, "rowkey": "[id]", "timestamp_field": "ts",
               "columns": {"f:amount": {"field": "amount", "encoding": "decimal"},
                           "f:text": "amount", "f:tenant": {"field": "tenant", "required": False}}}]
    return load_settings(None, routes=routes, tables=[{"name": TABLE, "families": {"f": {}}}],
                         topics=[{"name": TOPIC, "value_format": "avro"}],
                         registry={"url": ScriptedRegistry.url},
                         writer={"max_batch_rows": 50, "max_batch_age_ms": 5, "commit_interval_ms": 10,
                                 "retry_initial_ms": 1, "retry_max_ms": 5},
                         kafka={"dead_letter_topic": DLQ, "group_id": "g"})


def _avro(schema_id: int, schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return frame(schema_id, out.getvalue())


def _stack(n: int) -> tuple[MemoryBroker, MemoryHBase, dict[int, str]]:
    """``n`` good records (the second half under the evolved schema) and four bad ones: offset -> reason."""
    from decimal import Decimal
    broker, hbase = MemoryBroker(), MemoryHBase()
    broker.create_topic(TOPIC, 2)
    hbase.add_table(TABLE, families=["f"])
    bad: dict[int, str] = {}
    for i in range(n):
        record = {"id": f"o{i}", "amount": Decimal(i) / 4, "ts": 1_000 + i}
        value = _avro(1, V1, record) if i < n // 2 else _avro(2, V2, {**record, "tenant": f"t{i % 3}"})
        broker.produce(TOPIC, value, partition=i % 2)
        if i == n // 3:
            for raw, reason in ((_avro(99, V1, record), "unknown_schema"), (b'{"id": "x"}', "undecodable"),
                                (_avro(1, V1, record)[:-3], "schema_mismatch")):
                broker.produce(TOPIC, raw, partition=0)
                bad[broker.topics[TOPIC][0].log_end - 1] = reason
    return broker, hbase, bad


def _ends(broker: MemoryBroker) -> dict[TopicPartition, int]:
    return {TopicPartition(TOPIC, p): part.log_end for p, part in enumerate(broker.topics[TOPIC])}


async def test_avro_records_are_written_and_bad_ones_dead_lettered_with_reasons() -> None:
    broker, hbase, bad = _stack(200)
    registry = ScriptedRegistry({1: V1, 2: V2})
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker), registry=registry)
    with anyio.fail_after(10):
        summary = await worker.run()
    for i in range(200):
        cells = hbase.row(TABLE, f"o{i}".encode())
        assert cells[b"f:text"] == {1_000 + i: f"{i / 4:.2f}".encode()}  # the writer schema's scale, 2
        unscaled = (25 * i).to_bytes(2, "big", signed=True).lstrip(b"\x00") or b"\x00"
        if unscaled[0] & 0x80:
            unscaled = b"\x00" + unscaled
        assert cells[b"f:amount"] == {1_000 + i: b"\x00\x00\x00\x02" + unscaled}  # Java's BigDecimal layout
        assert (b"f:tenant" in cells) == (i >= 100)
    assert hbase.row_count(TABLE) == 200
    dead = {r.offset: {k: v for k, v in r.headers if v is not None} for r in broker.records(DLQ)}
    assert {int(h[HEADER_PREFIX + "source.offset"]): h[HEADER_PREFIX + "reason"].decode() for h in dead.values()} == bad
    assert sorted(set(registry.calls)) == [1, 2, 99] and len(registry.calls) == 3  # each id fetched once
    assert summary.dead_lettered == 3 and broker.groups["g"].committed == _ends(broker)


async def test_registry_that_does_not_answer_is_waited_for_and_nothing_is_lost() -> None:
    broker, hbase, bad = _stack(60)
    registry = ScriptedRegistry({1: V1, 2: V2}, down=4)
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker), registry=registry)
    with capture_logs() as logs, anyio.fail_after(20):
        await worker.run()
    assert hbase.row_count(TABLE) == 60 and len(broker.records(DLQ)) == len(bad)
    events = [e["event"] for e in logs]
    assert "registry_unavailable" in events and "registry_reachable" in events
    assert broker.groups["g"].committed == _ends(broker)


async def test_refused_credentials_stop_the_worker_without_committing() -> None:
    broker, hbase, _ = _stack(20)
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker), registry=ScriptedRegistry({}, refuse=True))
    with pytest.raises(ExceptionGroup) as info, anyio.fail_after(10):
        await worker.run()
    assert info.group_contains(RegistryError, match="credentials were refused")
    assert hbase.row_count(TABLE) == 0 and broker.groups["g"].committed == {}


def test_a_registry_format_without_a_registry_client_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"topic\(s\) orders are in a schema-registry format"):
        Worker(_settings(), MemoryHBase(), MemoryBroker())


async def test_a_stop_while_the_registry_is_down_commits_nothing_past_the_unrouted_records() -> None:
    broker, hbase, _ = _stack(20)
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker), registry=ScriptedRegistry({}, down=10**9))
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            while len(worker.registry.calls) < 3:  # type: ignore[union-attr]
                await anyio.sleep(0.05)
            assert worker.waiting is not None and "waiting for the schema registry" in worker.waiting
            worker.request_stop()
    # the fetch position is at the end of both partitions, but nothing was routed: nothing is committed
    assert hbase.row_count(TABLE) == 0 and broker.groups["g"].committed == {}


async def test_avro_keys_feed_rowkeys_and_are_fetched_only_when_a_route_reads_the_key() -> None:
    key_schema = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
    broker, hbase = MemoryBroker(), MemoryHBase()
    broker.create_topic(TOPIC, 1)
    hbase.add_table(TABLE, families=["f"])
    for i in range(30):
        broker.produce(TOPIC, orjson.dumps({"v": i}), key=_avro(7, key_schema, {"id": 1000 + i}))
    registry = ScriptedRegistry({7: key_schema})
    settings = load_settings(None, topics=[{"name": TOPIC, "key_format": "avro"}], registry={"url": registry.url},
                             routes=[{"name": "r", "topic": TOPIC, "table": TABLE, "rowkey": "[long($key.id)]",
                                      "columns": {"f:v": "v"}}],
                             tables=[{"name": TABLE, "families": {"f": {}}}],
                             writer={"max_batch_age_ms": 5, "commit_interval_ms": 10},
                             kafka={"dead_letter_topic": DLQ, "group_id": "g"})
    with anyio.fail_after(10):
        await Worker(settings, hbase, broker, stop_at=_ends(broker), registry=registry).run()
    assert list(hbase.row(TABLE, (1007).to_bytes(8, "big"))[b"f:v"].values()) == [b"7"]
    assert hbase.row_count(TABLE) == 30 and registry.calls == [7]
    # a route that does not read the key: the keys' schemas are never fetched
    plain = settings.model_copy(update={"routes": [settings.routes[0].model_copy(update={"rowkey": "[v]"})]})
    other = ScriptedRegistry({})
    worker = Worker(plain, MemoryHBase(), broker, registry=other)
    assert worker.router.framed(TOPIC) == (False, False) and worker.schemas is None
