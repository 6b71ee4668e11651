"""The record source: one aiokafka consumer behind :class:`pipeline.ports.RecordSource`.

It speaks the project's :class:`~pipeline.core.model.TopicPartition` (aiokafka's own is converted at
this edge, once per partition of a fetch, never per record) and raises the project's errors
(:mod:`connectors.kafka.errors`). Records are aiokafka's decoded records themselves, which satisfy
:class:`pipeline.ports.KafkaRecord` as they are: no ``ConsumerRecord`` copy per record on the hot path
(:mod:`connectors.kafka.records`).

Auto-commit is off; the isolation level is ``read_committed`` (aborted transactions are never
delivered). Assignment changes reach the :class:`~pipeline.ports.AssignmentListener` inside
:meth:`KafkaSource.fetch`, from aiokafka's rebalance callbacks.

A start that fails or is cancelled closes the consumer before it raises, and :meth:`KafkaSource.stop`
closes one never started, so nothing is left open (a consumer left open complains when it is
collected); a source is not started again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as _KTP

from connectors.kafka.admin import close_shielded, make_consumer, wait_for_coordinator
from connectors.kafka.errors import map_errors
from connectors.kafka.records import DECODED_RECORDS
from connectors.kafka.security import start_client
from pipeline.core.model import TopicPartition
from pipeline.ports import AssignmentListener, KafkaRecord
from pipeline.settings import KafkaSettings

__all__ = ["KafkaSource"]


def _ours(ktp: Any) -> TopicPartition:
    return TopicPartition(ktp.topic, ktp.partition)


def _theirs(tp: TopicPartition) -> _KTP:
    return _KTP(tp.topic, tp.partition)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, listener: AssignmentListener) -> None:
        self.listener = listener

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.listener.on_revoked([_ours(k) for k in revoked])

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.listener.on_assigned([_ours(k) for k in assigned])


class KafkaSource:
    """A consumer of ``group_id`` (None: outside any group, for ``assign``)."""

    def __init__(self, settings: KafkaSettings, group_id: str | None, **overrides: Any) -> None:
        self.settings = settings
        self.group_id = group_id
        self._consumer: AIOKafkaConsumer = make_consumer(settings, group_id=group_id,
                                                         value_deserializer=DECODED_RECORDS, **overrides)
        self._started = False
        self._subscribed = False

    def __repr__(self) -> str:
        return f"KafkaSource(group={self.group_id!r}, bootstrap={self.settings.bootstrap_servers!r})"

    def _what(self, action: str) -> str:
        group = f"group {self.group_id!r}" if self.group_id else "a group-less consumer"
        return f"{action} ({group} at {self.settings.bootstrap_servers})"

    def subscribe(self, topics: Sequence[str], listener: AssignmentListener) -> None:
        self._consumer.subscribe(list(topics), listener=_Listener(listener))
        self._subscribed = bool(topics)

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._consumer.assign([_theirs(tp) for tp in partitions])

    async def start(self) -> None:
        """Connect, and join the group when subscribed (a group member waits first, quietly, for its
        group coordinator: see :func:`~connectors.kafka.admin.wait_for_coordinator`). On failure or
        cancellation the consumer is closed, then the error raised."""
        try:
            if self._subscribed and self.group_id is not None:
                await wait_for_coordinator(self.settings, self.group_id, self.settings.request_timeout_ms / 1000)
            await start_client(self._consumer.start, self.settings, self._what("starting the consumer"))
        except BaseException:
            with contextlib.suppress(Exception):  # the start's own error is the one to report
                await close_shielded(self._consumer.stop)
            raise
        self._started = True

    async def stop(self) -> None:
        """Leave the group and close; idempotent. A source never started is closed too (aiokafka's
        consumer complains when it is collected unclosed, started or not)."""
        if not self._started:
            await close_shielded(self._consumer.stop)  # nothing to leave: no error worth reporting
            return
        self._started = False
        with map_errors(self._what("stopping the consumer")):
            await self._consumer.stop()

    async def fetch(self, timeout_ms: int, max_records: int) -> Mapping[TopicPartition, Sequence[KafkaRecord]]:
        with map_errors(self._what("fetching records")):
            got = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        return {_ours(ktp): records for ktp, records in got.items()}

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        with map_errors(self._what("committing offsets")):
            await self._consumer.commit({_theirs(tp): off for tp, off in offsets.items()})

    async def committed(self, tp: TopicPartition) -> int | None:
        with map_errors(self._what(f"reading the committed offset of {tp}")):
            found = await self._consumer.committed(_theirs(tp))
        return None if found is None else int(found)

    async def position(self, tp: TopicPartition) -> int:
        with map_errors(self._what(f"reading the position of {tp}")):
            return int(await self._consumer.position(_theirs(tp)))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._consumer.seek(_theirs(tp), offset)

    def pause(self, *tps: TopicPartition) -> None:
        self._consumer.pause(*(_theirs(tp) for tp in tps))

    def resume(self, *tps: TopicPartition) -> None:
        self._consumer.resume(*(_theirs(tp) for tp in tps))

    def assignment(self) -> set[TopicPartition]:
        return {_ours(k) for k in self._consumer.assignment()}

    # -- group-less look-ups (used by the broker's offset calls) -------------------------------------

    async def log_offsets(self, tps: Sequence[TopicPartition], end: bool) -> dict[TopicPartition, int]:
        ktps = [_theirs(tp) for tp in tps]
        with map_errors(self._what("reading log " + ("end" if end else "start") + " offsets")):
            found = await (self._consumer.end_offsets(ktps) if end else self._consumer.beginning_offsets(ktps))
        return {_ours(k): int(v) for k, v in found.items()}

    async def offsets_for_time(self, tps: Sequence[TopicPartition], ms: int) -> dict[TopicPartition, int | None]:
        with map_errors(self._what("looking up offsets by time")):
            found = await self._consumer.offsets_for_times({_theirs(tp): ms for tp in tps})
        return {_ours(k): (None if v is None else int(v.offset)) for k, v in found.items()}
