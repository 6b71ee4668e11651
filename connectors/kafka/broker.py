"""The Kafka cluster behind :class:`pipeline.ports.Broker`: consumers and producers on demand, topic
admin, and offset look-ups made with short-lived group-less consumers (start, look up, stop: written
once, here).

:meth:`KafkaBroker.commit_group` commits for a group without joining it (a manually assigned
consumer of that group id), which Kafka accepts while the group has no active members: the backfill
uses it to seed its group's start offsets before its worker joins.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Literal, TypeVar

from connectors.kafka import admin
from connectors.kafka.sink import KafkaSink
from connectors.kafka.source import KafkaSource
from pipeline.core.model import TopicPartition
from pipeline.settings import KafkaSettings

__all__ = ["KafkaBroker"]

T = TypeVar("T")


class _Reader:
    """Look-ups through one open group-less consumer."""

    def __init__(self, source: KafkaSource) -> None:
        self.source = source

    async def log_offsets(self, tps: Collection[TopicPartition], which: Literal["start", "end"]
                          ) -> dict[TopicPartition, int]:
        return await self.source.log_offsets(list(tps), which == "end") if tps else {}

    async def offsets_for_time(self, tps: Collection[TopicPartition], ms: int) -> dict[TopicPartition, int | None]:
        return await self.source.offsets_for_time(list(tps), ms) if tps else {}


class KafkaBroker:
    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings

    def __repr__(self) -> str:
        return f"KafkaBroker({self.settings.bootstrap_servers!r})"

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap_servers

    # -- clients ------------------------------------------------------------------------------------

    def source(self, group_id: str | None) -> KafkaSource:
        return KafkaSource(self.settings, group_id)

    def sink(self, *, max_request_size: int | None = None, linger_ms: int | None = None,
             max_batch_size: int | None = None) -> KafkaSink:
        given = {"max_request_size": max_request_size, "linger_ms": linger_ms, "max_batch_size": max_batch_size}
        return KafkaSink(self.settings, **{k: v for k, v in given.items() if v is not None})

    # -- topics -------------------------------------------------------------------------------------

    async def create_topics(self, topics: Mapping[str, int], replication: int | None = 1) -> list[str]:
        return await admin.create_topics(self.settings, topics, replication)

    async def ensure_topic(self, topic: str, partitions: int = 1) -> bool:
        return await admin.ensure_topic(self.settings, topic, partitions)

    async def delete_topics(self, topics: Collection[str]) -> None:
        await admin.delete_topics(self.settings, topics)

    async def partitions(self, topic: str) -> list[int]:
        return await admin.partitions(self.settings, topic)

    async def missing_topics(self, topics: Collection[str]) -> list[str]:
        return await admin.missing_topics(self.settings, topics)

    # -- offsets ------------------------------------------------------------------------------------

    async def _with(self, group: str | None, fn: Callable[[KafkaSource], Awaitable[T]]) -> T:
        source = KafkaSource(self.settings, group)
        try:
            await source.start()
            return await fn(source)
        finally:
            await source.stop()

    @asynccontextmanager
    async def offset_reader(self) -> AsyncIterator[_Reader]:
        source = KafkaSource(self.settings, None)
        try:
            await source.start()
            yield _Reader(source)
        finally:
            await source.stop()

    async def log_offsets(self, tps: Collection[TopicPartition], which: Literal["start", "end"]
                          ) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        return await self._with(None, lambda s: s.log_offsets(list(tps), which == "end"))

    async def offsets_for_time(self, tps: Collection[TopicPartition], ms: int) -> dict[TopicPartition, int | None]:
        if not tps:
            return {}
        return await self._with(None, lambda s: s.offsets_for_time(list(tps), ms))

    async def group_offsets(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int | None]:
        async def look(s: KafkaSource) -> dict[TopicPartition, int | None]:
            s.assign(list(tps))
            return {tp: await s.committed(tp) for tp in tps}
        return await self._with(group, look)

    async def commit_group(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        async def commit(s: KafkaSource) -> None:
            s.assign(list(offsets))
            await s.commit(offsets)
        if offsets:
            await self._with(group, commit)
