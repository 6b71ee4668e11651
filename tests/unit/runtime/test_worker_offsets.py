"""The worker's offset bookkeeping without Kafka: gaps Kafka never delivers are counted as skipped,
and a stop offset is taken as reached only when no fetched record of the partition is unregistered.

The consumer is a stand-in with ``position``/``pause``; records are plain objects. The real
behaviour against a broker (records deleted before a backfill read them) is in
tests/integration/test_backfill.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson

from connectors.kafka import TopicPartition as KafkaTP
from pipeline.core.batcher import Batch
from pipeline.core.model import Origin, TopicPartition
from pipeline.core.regions import Region, RegionMap
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import Settings, load_settings

TOPIC = "events"
TP = TopicPartition(TOPIC, 0)
KTP = KafkaTP(TOPIC, 0)


@dataclass
class _Record:
    offset: int
    value: bytes
    topic: str = TOPIC
    key: bytes | None = None
    headers: tuple[Any, ...] = ()


@dataclass
class _Consumer:
    position_: int = 0
    paused: list[Any] = field(default_factory=list)
    on_position: Any = None  # called inside position(), as a fetch landing during the await would

    async def position(self, ktp: Any) -> int:
        await anyio.sleep(0)
        if self.on_position is not None:
            self.on_position()
        return self.position_

    def pause(self, *ktps: Any) -> None:
        self.paused.extend(ktps)


def _settings() -> Settings:
    routes = [{"name": "r", "topic": TOPIC, "table": "t", "rowkey": "[id]", "columns": {"f:v": "v"}}]
    return load_settings(None, routes=routes, tables=[{"name": "t", "families": {"f": {}}}])


def _worker(stop_at: int | None = None) -> tuple[Worker, _Consumer, Any]:
    worker = Worker(_settings(), hbase=None, stop_at={TP: stop_at} if stop_at is not None else None)  # type: ignore[arg-type]
    consumer = _Consumer()
    worker._consumer = consumer
    worker._assigned = {TP}
    worker.maps["t"] = RegionMap([Region("t", b"", b"", "rs:1", "t,,1")])
    send, receive = anyio.create_memory_object_stream[Batch](math.inf)
    worker._send = send
    return worker, consumer, receive


def _records(*offsets: int) -> list[_Record]:
    return [_Record(o, orjson.dumps({"id": f"e{o}", "v": o})) for o in offsets]


async def test_gaps_between_delivered_records_are_counted_as_skipped() -> None:
    worker, _, _ = _worker()
    worker._next[TP] = 10  # the committed offset at assignment
    assert await worker._handle({KTP: _records(10, 11, 12)})
    assert worker.stats.skipped == {} and worker._next[TP] == 13
    assert await worker._handle({KTP: _records(20, 21)})  # 13..19 never came: retention, compaction
    assert worker.stats.skipped == {TP: 7} and worker._next[TP] == 22
    assert worker.stats.consumed == 5


async def test_without_a_known_start_the_first_record_sets_it() -> None:
    worker, _, _ = _worker()  # no commit and no start offset: Kafka's reset policy decides
    assert await worker._handle({KTP: _records(500, 501)})
    assert worker.stats.skipped == {} and worker._next[TP] == 502


async def test_a_gap_is_counted_only_up_to_the_stop_offset() -> None:
    worker, consumer, _ = _worker(stop_at=100)
    worker._next[TP] = 90
    assert await worker._handle({KTP: _records(120, 121)})  # all past the stop offset
    assert worker.stats.skipped == {TP: 10} and worker.stats.consumed == 0
    assert consumer.paused == [KTP]


async def test_stop_offset_is_reached_by_position_only_when_nothing_is_in_hand() -> None:
    worker, consumer, _ = _worker(stop_at=100)
    worker._next[TP] = 95
    consumer.position_ = 100
    # fetched records not yet routed (the consume loop awaits its rate limit mid-fetch): not reached
    worker._in_hand = {TP}
    assert await worker._reached_stop() == {}
    worker._in_hand = set()
    # registered, not yet written: not reached
    worker.tracker.register(Origin(TP, 95), 1)
    assert await worker._reached_stop() == {}
    worker.tracker.ack(Origin(TP, 95))
    worker._next[TP] = 96
    # a fetch lands while the position is being asked: not reached this time
    consumer.on_position = lambda: setattr(worker, "_in_hand", {TP})
    assert await worker._reached_stop() == {}
    consumer.on_position = None
    worker._in_hand = set()
    # everything before the stop offset that Kafka delivered is written: reached, 96..99 skipped
    assert await worker._reached_stop() == {TP: 100}
    assert worker.stats.skipped == {TP: 4}


async def test_stop_offset_is_not_reached_before_the_position() -> None:
    worker, consumer, _ = _worker(stop_at=100)
    consumer.position_ = 99
    assert await worker._reached_stop() == {}
    assert worker.stats.skipped == {}
