"""Worker behaviour under pressure and failure: counters on replay, the in-flight memory bound, and
HBase refusing writes for a while (a disabled table)."""

from __future__ import annotations

import anyio
import orjson

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, delete_topics, make_consumer, partitions
from connectors.kafka import TopicPartition as KafkaTP
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import load_settings

from .worker_support import drop_tables, order_event, order_settings, produce, setup, stop_offsets


async def test_tally_counters_are_replay_safe_and_increments_are_not(hbase: HBaseClient, unique: str) -> None:
    topic = f"logins-{unique}"
    routes = [
        {"name": "tally", "topic": topic, "table": f"tally_{unique}", "rowkey": "[user_id][_][day]",
         "timestamp_field": "timestamp", "counter": {"column": "c:n", "mode": "tally", "id_field": "login_id"}},
        {"name": "atomic", "topic": topic, "table": f"atomic_{unique}", "rowkey": "[user_id][_][day]",
         "counter": {"column": "c:n", "mode": "increment"}},
    ]
    settings = load_settings(None, routes=routes, writer={"max_batch_age_ms": 50, "commit_interval_ms": 200},
                             kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}"})
    await create_topics(settings.kafka, {topic: 2})
    await create_tables(hbase, settings, recreate=True)
    try:
        logins = [{"login_id": f"L{i}", "user_id": f"u{i % 3}", "day": "20240315", "timestamp": 1_700_000_000_000 + i}
                  for i in range(30)]
        await produce(settings, topic, [orjson.dumps(e) for e in logins])
        stop = await stop_offsets(settings, topic)
        for group in (f"first-{unique}", f"replay-{unique}"):  # the second run replays the whole topic
            with anyio.fail_after(60):
                await Worker(settings, hbase, KafkaBroker(settings.kafka), group_id=group, stop_at=stop).run()
        for user in ("u0", "u1", "u2"):
            tally = await hbase.get(f"tally_{unique}", f"{user}_20240315".encode())
            assert len(tally) == 10  # one cell per login id: the replay rewrote the same cells
            assert all(v == (1).to_bytes(8, "big") for v in tally.values())
            assert await hbase.counter(f"atomic_{unique}", f"{user}_20240315".encode(), b"c:n") == 20  # counted twice
    finally:
        await drop_tables(hbase, settings)


async def test_in_flight_bound_pauses_fetching_and_nothing_is_lost(hbase: HBaseClient, unique: str) -> None:
    # a bound below one open batch: every fetch leaves more than it in flight (the open batches count
    # until written), so the worker pauses whatever the timing of the fetches and writes
    settings = order_settings(unique, max_in_flight_bytes=1024, concurrency=1)
    topic = await setup(settings, hbase)
    try:
        events = [order_event(i) for i in range(800)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        with anyio.fail_after(120):
            summary = await worker.run()
        assert worker.stats.pauses > 0
        assert summary.rows_written == 3 * len(events)
        for r in settings.routes:
            assert await hbase.count(r.table) == len(events)
    finally:
        await drop_tables(hbase, settings)


async def test_writes_retry_while_a_table_is_disabled(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique, retry_initial_ms=50, retry_max_ms=500)
    topic = await setup(settings, hbase)
    index = settings.routes[2].table
    try:
        await hbase.disable_table(index)
        events = [order_event(i) for i in range(300)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=await stop_offsets(settings, topic))
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(60):
                while worker.retries < 3:
                    await anyio.sleep(0.1)
            assert not worker.done
            assert sum(worker.stats.committed.values()) == 0
            await hbase.enable_table(index)
            with anyio.fail_after(120):
                while not worker.done:
                    await anyio.sleep(0.2)
        for r in settings.routes:
            assert await hbase.count(r.table) == len(events)
    finally:
        await drop_tables(hbase, settings)


async def test_partition_with_an_empty_slice_does_not_block_completion(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=2)
    try:
        from pipeline.core.model import TopicPartition

        events = [order_event(i) for i in range(40)]
        await produce(settings, topic, [orjson.dumps(e) for e in events])
        stop = await stop_offsets(settings, topic)
        # partition 1 is replayed from its end: an empty slice with no commit in the group
        start = {TopicPartition(topic, 1): stop[TopicPartition(topic, 1)]}
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), stop_at=stop, start_offsets=start)
        with anyio.fail_after(60):
            summary = await worker.run()
        assert summary.consumed == stop[TopicPartition(topic, 0)]
        assert worker.stats.committed[TopicPartition(topic, 1)] == stop[TopicPartition(topic, 1)]
    finally:
        await drop_tables(hbase, settings)


async def test_missing_dead_letter_topic_is_created_at_start(hbase: HBaseClient, unique: str) -> None:
    settings = order_settings(unique)
    dlq = settings.kafka.dead_letter_topic
    await delete_topics(settings.kafka, [dlq])
    worker = Worker(settings, hbase, KafkaBroker(settings.kafka))
    await worker.check_dead_letter_topic()
    assert await partitions(settings.kafka, dlq) == [0]
    await worker.check_dead_letter_topic()  # exists now: nothing to do


async def test_stop_abandons_a_dead_letter_send_kafka_refuses(hbase: HBaseClient, unique: str) -> None:
    # the dead-letter topic disappears while the worker runs: the send retries (nothing may be lost),
    # a stop request still ends the worker promptly, and no commit passes the record it could not send
    settings = order_settings(unique)
    topic = await setup(settings, hbase, partitions=1)
    try:
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka))
        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                await tg.start(worker.run)
                await delete_topics(settings.kafka, [settings.kafka.dead_letter_topic])
                good = [orjson.dumps(order_event(i)) for i in range(10)]
                await produce(settings, topic, [*good[:5], b"{not json", *good[5:]])
                while worker.stats.consumed < 6:
                    await anyio.sleep(0.05)
                await anyio.sleep(1)  # the dead-letter send is retrying now
                assert worker.stats.dead_lettered == 0
                worker.request_stop()
        assert worker.stats.dead_lettered == 0
        consumer = make_consumer(settings.kafka, group_id=settings.kafka.group_id)
        await consumer.start()
        try:
            assert await consumer.committed(KafkaTP(topic, 0)) == 5  # up to the bad record, not past it
        finally:
            await consumer.stop()
    finally:
        await drop_tables(hbase, settings)
