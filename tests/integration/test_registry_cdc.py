"""Debezium with Avro through the schema registry: the stack's Kafka Connect runs a second PostgreSQL
connector whose keys and values Apicurio's Avro converter writes in the Confluent wire format (schemas
registered in the stack's registry), and the worker keeps the main and index tables equal to
PostgreSQL after random DML, and after a replay by another group."""

from __future__ import annotations

import sys
import time

import anyio
from anyio.to_thread import run_sync

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, end_offsets, make_consumer
from connectors.registry import RegistryClient
from devstack import LocalStack
from devstack.connect import connector_properties
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import RegistrySettings, Settings, TopicSpec

from .changelog_support import cdc_settings, expected_tables
from .fault_support import committed_offsets
from .test_cdc_end_to_end import Workload, _diff, _hbase_tables, _pg_rows, _rest, remove_connector
from .worker_support import drop_tables

SENTINEL = 9_100_000_000_000_000_001
PARTITIONS = 4


def _avro_converters(registry_url: str) -> dict[str, str]:
    """Apicurio's AvroConverter for keys and values, writing the Confluent wire format with the ids of the
    registry's Confluent-compatible API (content ids)."""
    api = registry_url.replace("/apis/ccompat/v7", "/apis/registry/v2")
    out: dict[str, str] = {}
    for part in ("key", "value"):
        out |= {f"{part}.converter": "io.apicurio.registry.utils.converter.AvroConverter",
                f"{part}.converter.apicurio.registry.url": api,
                f"{part}.converter.apicurio.registry.auto-register": "true",
                f"{part}.converter.apicurio.registry.find-latest": "true",
                f"{part}.converter.apicurio.registry.as-confluent": "true",
                f"{part}.converter.apicurio.registry.use-id": "contentId",
                f"{part}.converter.apicurio.registry.headers.enabled": "false"}
    return out


async def _ingest_until_caught_up(settings: Settings, hbase: HBaseClient, topic: str, registry: RegistryClient,
                                  limit_s: float = 300) -> Worker:
    worker = Worker(settings, hbase, KafkaBroker(settings.kafka), registry=registry)
    table = {r.name: r.table for r in settings.routes}["orders"]

    async def caught_up() -> bool:
        ends = await end_offsets(settings.kafka, topic)
        committed = await committed_offsets(settings, topic, len(ends))
        return bool(await hbase.get(table, SENTINEL.to_bytes(8, "big"))) and committed == dict(ends)

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        t0 = time.monotonic()
        while not await caught_up():
            assert time.monotonic() - t0 < limit_s, f"the worker did not commit every change within {limit_s} s"
            await anyio.sleep(1)
        worker.request_stop()
    return worker


async def test_debezium_avro_through_the_registry_keeps_tables_equal_to_postgres(
        registry_stack: LocalStack, hbase: HBaseClient, unique: str) -> None:
    stack = registry_stack
    assert stack.cdc is not None and stack.registry_url is not None
    prefix, slot = f"avro{unique}", f"avro_{unique}"
    topic = f"{prefix}.public.orders"
    base = cdc_settings(unique, topic=topic)
    settings = base.model_copy(update={
        "topics": [TopicSpec(name=topic, key_format="avro", value_format="avro")],
        "registry": RegistrySettings(url=stack.registry_url)})
    await create_topics(settings.kafka, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    await run_sync(stack.cdc.pg.sql, "DELETE FROM orders;")  # the workload starts from an empty table
    props = connector_properties(stack.settings, stack.cdc.pg.password_file)
    props |= {"name": prefix, "topic.prefix": prefix, "slot.name": slot, "table.include.list": "public.orders",
              **_avro_converters(stack.registry_url)}
    await run_sync(_rest, stack, "POST", "/connectors", {"name": prefix, "config": props})
    try:
        workload = Workload(seed=35)
        script = workload.script(3000)
        for start in range(0, len(script), 200):
            await run_sync(stack.cdc.pg.sql, "\n".join(script[start:start + 200]), "shop", 120.0)
        await run_sync(stack.cdc.pg.sql, f"DELETE FROM orders WHERE order_id = {SENTINEL};\n"
                                         f"INSERT INTO orders VALUES ({SENTINEL}, 's00', 'b000', 1, 'last', now());")
        async with RegistryClient(settings.registry) as registry:
            worker = await _ingest_until_caught_up(settings, hbase, topic, registry)
            assert worker.stats.dead_lettered == 0
            assert worker.schemas is not None and worker.schemas.fetched >= 2  # a key and a value schema
            # what the converter wrote: the Confluent wire format, keys and values
            consumer = make_consumer(settings.kafka, group_id=None, topics=[topic], auto_offset_reset="earliest")
            await consumer.start()
            try:
                batch = await consumer.getmany(timeout_ms=5000, max_records=50)
            finally:
                await consumer.stop()
            sample = [m for msgs in batch.values() for m in msgs if m.value is not None]
            assert sample and all(m.value[:1] == b"\x00" and m.key[:1] == b"\x00" for m in sample)

            pg = await run_sync(_pg_rows, stack)
            want = expected_tables(settings, pg)
            problems = _diff(want, await _hbase_tables(hbase, settings))
            assert not problems, problems
            # a replay of the whole topic by another group, on top
            replay = settings.model_copy(update={"kafka": settings.kafka.model_copy(
                update={"group_id": f"r-{unique}"})})
            await _ingest_until_caught_up(replay, hbase, topic, registry)
            problems = _diff(want, await _hbase_tables(hbase, settings))
            assert not problems, f"after the replay: {problems}"
            records = sum((await end_offsets(settings.kafka, topic)).values())
            sys.stdout.write(f"\n[cdc figures] Debezium Avro through the registry: operations="
                             f"{sum(workload.counts.values())}, change records={records}, rows compared="
                             f"{sum(len(rows) for rows in want.values())}, schemas fetched={worker.schemas.fetched}\n")
    finally:
        await remove_connector(stack, prefix, slot)
        await drop_tables(hbase, settings)
