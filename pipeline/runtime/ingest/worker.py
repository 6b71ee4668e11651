"""The ingest worker: Kafka -> routes -> rowkeys -> per-region batches -> HBase, at-least-once.

Tasks (all owned by one task group):

- **consume**: ``getmany`` -> route each record -> register it with the offset tracker (one pending
  ack per mutation) -> add mutations to the per-region batcher -> hand sealed batches to the writers.
  Undecodable/invalid records go to the dead-letter topic and count as done once Kafka has them.
  When in-flight bytes reach ``max_in_flight_bytes`` every assigned partition is paused; fetching
  resumes when they drain below half of it.
- **flush timer**: seals batches that reached ``max_batch_age_ms`` (sleeps exactly until the next
  deadline) and refreshes region maps periodically.
- **writers** (``concurrency`` of them): write batches with retries (:mod:`pipeline.runtime.ingest.writer`),
  then acknowledge every mutation.
- **committer**: every ``commit_interval_ms`` commits, per partition, the highest contiguous offset
  whose mutations were all acknowledged, + 1. Never past unwritten data.

Offsets that Kafka never delivers (deleted by retention before they were read, compacted away,
transaction markers, aborted transactions) are counted per partition as *skipped*: a gap between
where a partition's reading stood and the next record delivered, or, at a stop offset, the rest of
the range up to it. A large count usually means retention deleted data before it was ingested.

Partition revocation and shutdown take the same path: stop fetching, seal and write every open batch,
wait (bounded by ``shutdown_timeout_s``) for the writes, commit, then forget the partitions / leave
the group. Cancelling :meth:`Worker.run` (a second signal) skips the wait: it commits what HBase has
acknowledged so far and returns at once; the rest is read again by the next run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from connectors.hbase import HBaseClient
from connectors.kafka import ConsumerRebalanceListener, ensure_topic, make_consumer, make_producer
from connectors.kafka import TopicPartition as KafkaTP
from pipeline.core.batcher import Batch, RegionBatcher
from pipeline.core.model import Mutation, Origin, TopicPartition
from pipeline.core.offsets import OffsetTracker
from pipeline.core.regions import RegionMap
from pipeline.core.routing import Router
from pipeline.errors import ConfigError, EventError, TableNotFound, TopicNotCreated
from pipeline.runtime.ingest.deadletter import DeadLetters
from pipeline.runtime.ingest.observer import Observer, WorkerStats
from pipeline.runtime.ingest.writer import BatchWriter, load_region_map
from pipeline.settings import Settings

__all__ = ["Worker", "WorkerSummary"]

log = structlog.get_logger("hbase_ingest.worker")
_REGION_REFRESH_S = 30.0
_FINAL_COMMIT_TIMEOUT_S = 10.0  # the last commit when stopping; Kafka unreachable must not hang the exit
# Python's own cost of holding one mutation (object, dict, bytes headers, origin), measured with
# tracemalloc: about 250 bytes per mutation plus 90 per cell on CPython 3.11. The in-flight bound
# counts these, so ``max_in_flight_bytes`` bounds real memory, not just the bytes on the wire.
_MUTATION_OVERHEAD = 250
_CELL_OVERHEAD = 90


def _memory(m: Mutation) -> int:
    return m.size + _MUTATION_OVERHEAD + _CELL_OVERHEAD * len(m.cells)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class WorkerSummary:
    consumed: int
    rows_written: int
    batches_written: int
    dead_lettered: int
    retries: int
    elapsed_s: float
    committed: dict[TopicPartition, int]
    streaming_s: float = 0.0  # from the first record to the end (excludes start-up and group join)
    skipped: dict[TopicPartition, int] = field(default_factory=dict)  # offsets Kafka never delivered

    @property
    def events_per_s(self) -> float:
        return self.consumed / self.elapsed_s if self.elapsed_s > 0 else 0.0


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.worker._on_revoked([TopicPartition(tp.topic, tp.partition) for tp in revoked])

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.worker._on_assigned([TopicPartition(tp.topic, tp.partition) for tp in assigned])


class Worker:
    """One member of a consumer group. ``stop_at`` (partition -> end offset, exclusive) makes it finish
    once everything before those offsets is written and committed (demo, tests, backfill);
    ``start_offsets`` seeks partitions that have no committed offset yet (backfill)."""

    def __init__(self, settings: Settings, hbase: HBaseClient, *, group_id: str | None = None,
                 topics: list[str] | None = None, stop_at: Mapping[TopicPartition, int] | None = None,
                 start_offsets: Mapping[TopicPartition, int] | None = None, observer: Observer | None = None,
                 rate_limit: Any = None) -> None:
        self.settings = settings
        self.hbase = hbase
        self.router = Router(settings.routes, settings.writer.max_key_bytes, settings.writer.max_cell_bytes)
        self.topics = topics or self.router.topics
        unknown = set(self.topics) - set(self.router.topics)
        if unknown:
            raise ConfigError(f"no route reads topic(s) {sorted(unknown)}")
        self.group_id = group_id or settings.kafka.group_id
        self.stop_at = dict(stop_at) if stop_at else None
        self.start_offsets = dict(start_offsets) if start_offsets else {}
        self.observer = observer or Observer()
        self.rate_limit = rate_limit
        self.stats = WorkerStats()
        w = settings.writer
        self.tracker = OffsetTracker()
        self.batcher = RegionBatcher(w.max_batch_rows, w.max_batch_bytes, w.max_batch_age_ms)
        self.maps: dict[str, RegionMap] = {}
        self.in_flight = 0
        self._stop = anyio.Event()
        self._progress = anyio.Event()
        self._paused = False
        self._assigned: set[TopicPartition] = set()
        self._next: dict[TopicPartition, int] = {}  # per partition, the offset reading should deliver next
        self._in_hand: set[TopicPartition] = set()  # partitions of the fetch being routed right now
        self._consumer: Any = None
        self._send: Any = None
        self._writer: BatchWriter | None = None
        self._dead: DeadLetters | None = None
        self._dead_scope: anyio.CancelScope | None = None  # a dead-letter send in progress
        self.ready = False

    def __repr__(self) -> str:
        return (f"Worker(group={self.group_id!r}, topics={self.topics}, in_flight={self.in_flight}, "
                f"consumed={self.stats.consumed}, written={self.stats.rows_written})")

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Graceful stop: stop fetching, flush, commit, leave the group. A dead-letter send that is
        still retrying (Kafka refuses it) is abandoned: its record stays unacknowledged, so no
        commit passes it and the next run reads it again."""
        self._stop.set()
        if self._dead_scope is not None:
            self._dead_scope.cancel()

    def statistics(self) -> dict[str, Any]:
        return {"worker": self.stats, "tracker": self.tracker.statistics(), "batcher": self.batcher.statistics(),
                "in_flight_bytes": self.in_flight, "paused": self._paused, "hbase": self.hbase.statistics()}

    # -- start-up checks ------------------------------------------------------------------------

    async def check_tables(self) -> None:
        """Fail at start-up, naming the route, when a table or family does not exist."""
        for route in self.router.routes:
            try:
                families = await self.hbase.families(route.table)
            except TableNotFound as exc:
                raise ConfigError(f"route {route.name!r}: table {route.table!r} does not exist in HBase "
                                  f"(create it with `hbase-ingest tables create --config ...`)") from exc
            missing = [f for f in route.families if f not in families]
            if missing:
                raise ConfigError(f"route {route.name!r}: table {route.table!r} has no column family "
                                  f"{', '.join(missing)} (it has: {', '.join(sorted(families))})")
            if route.table not in self.maps:
                self.maps[route.table] = await load_region_map(self.hbase, route.table)

    async def check_dead_letter_topic(self) -> None:
        """Make sure the dead-letter topic exists before any record is read: create it when missing
        (one partition, as Kafka Connect does for its dead-letter queues), or fail at start-up
        naming it when the cluster refuses (the first bad record would otherwise wait on it)."""
        topic = self.settings.kafka.dead_letter_topic
        try:
            if await ensure_topic(self.settings.kafka, topic):
                log.info("dead_letter_topic_created", topic=topic)
        except TopicNotCreated as exc:
            raise ConfigError(f"the dead-letter topic: {exc}; create it, or name an existing one in "
                              "[kafka].dead_letter_topic") from exc

    # -- main ------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> WorkerSummary:
        await self.check_tables()
        await self.check_dead_letter_topic()
        k = self.settings.kafka
        producer = make_producer(k, max_request_size=16 * 1024 * 1024)  # dead letters carry originals
        consumer = make_consumer(k, group_id=self.group_id)
        self._consumer = consumer
        self._dead = DeadLetters(producer, k.dead_letter_topic)
        self._writer = BatchWriter(self.hbase, self.settings.writer, self.maps, self.observer, self._reject)
        await producer.start()
        try:
            consumer.subscribe(self.topics, listener=_Rebalance(self))
            await consumer.start()
            try:
                send, receive = anyio.create_memory_object_stream[Batch](math.inf)
                self._send = send
                async with anyio.create_task_group() as tg:
                    for i in range(self.settings.writer.concurrency):
                        tg.start_soon(self._write_loop, receive.clone(), name=f"writer-{i}")
                    receive.close()
                    tg.start_soon(self._flush_loop, name="flush-timer")
                    tg.start_soon(self._commit_loop, name="committer")
                    self.ready = True
                    task_status.started()
                    try:
                        await self._consume_loop()
                    except anyio.get_cancelled_exc_class():
                        raise  # a second signal: no drain, the writers are being cancelled too
                    except BaseException:
                        await self._flush_and_wait(None)  # keep what the writers can still finish
                        raise
                    else:
                        await self._flush_and_wait(None)  # a cancellation (a second signal) cuts this short
                    finally:
                        with anyio.CancelScope(shield=True):
                            await self._shutdown()
                        tg.cancel_scope.cancel()
            finally:
                self.ready = False
                with anyio.CancelScope(shield=True):
                    await consumer.stop()  # leaves the group
        finally:
            with anyio.CancelScope(shield=True):
                await producer.stop()
        s = self.stats
        streaming = time.monotonic() - s.first_record_s if s.first_record_s is not None else 0.0
        return WorkerSummary(s.consumed, s.rows_written, s.batches_written, s.dead_lettered,
                             self._writer.retries if self._writer else 0, s.elapsed_s(), dict(s.committed),
                             streaming, dict(s.skipped))

    # -- consume -----------------------------------------------------------------------------------

    def _done(self) -> bool:
        if self.stop_at is None:
            return False
        return all(self.stats.committed.get(tp, -1) >= end for tp, end in self.stop_at.items() if end > 0)

    async def _consume_loop(self) -> None:
        consumer = self._consumer
        w = self.settings.writer
        while not self._stop.is_set():
            if self._done():
                log.info("stop_offsets_reached", committed={str(k): v for k, v in self.stats.committed.items()})
                return
            if self.in_flight >= w.max_in_flight_bytes:
                self._pause()
                with anyio.move_on_after(0.5):
                    await self._wait_progress()
                continue
            if self._paused and self.in_flight < w.max_in_flight_bytes // 2:
                self._resume()
            batch = await consumer.getmany(timeout_ms=200, max_records=self.settings.kafka.max_poll_records)
            if not batch:
                continue
            # the fetch position of these partitions has moved past records not yet registered
            self._in_hand = {TopicPartition(ktp.topic, ktp.partition) for ktp in batch}
            try:
                if not await self._handle(batch):
                    return
            finally:
                self._in_hand = set()
            self.observer.in_flight(self.in_flight)

    async def _handle(self, batch: dict[Any, list[Any]]) -> bool:
        """Route one ``getmany`` result. False when a stop request abandoned a dead-letter send."""
        consumer = self._consumer
        now = _now_ms()
        for ktp, records in batch.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            if tp not in self._assigned:
                continue  # revoked while this fetch was in flight
            end = self.stop_at.get(tp) if self.stop_at else None
            expected = self._next.get(tp)
            if expected is not None and records[0].offset > expected:
                self._skipped(tp, expected, records[0].offset if end is None else min(records[0].offset, end))
            processed = 0
            for rec in records:
                if end is not None and rec.offset >= end:
                    consumer.pause(ktp)
                    break
                processed += 1
                error = self._process(tp, rec, now)
                if error is not None:
                    origin = Origin(tp, rec.offset)
                    if not await self._dead_letter(origin, rec.key, rec.value, error.reason, str(error),
                                                   rec.headers):
                        return False  # stopping: the record stays unacknowledged (read again next run)
                    self.tracker.ack(origin)
            if processed:
                self._next[tp] = records[processed - 1].offset + 1
            self.observer.consumed(tp, processed)
            if self.rate_limit is not None and processed:
                await self.rate_limit(processed)
        return True

    def _skipped(self, tp: TopicPartition, start: int, end: int) -> None:
        """Offsets ``[start, end)`` of ``tp`` will never be delivered; count them."""
        n = end - start
        if n <= 0:
            return
        self.stats.skipped[tp] = self.stats.skipped.get(tp, 0) + n
        self._next[tp] = end
        self.observer.skipped(tp, n)
        # one offset is usually a transaction marker (one per transaction: not worth a log line at
        # INFO); more is worth a look (retention, compaction, an aborted transaction)
        emit = log.warning if n > 1 else log.debug
        emit("offsets_skipped", tp=str(tp), start=start, end=end, count=n,
             why="never delivered by Kafka: deleted by retention, compacted away, or transaction markers")

    def _process(self, tp: TopicPartition, rec: Any, now: int) -> EventError | None:
        """Route one record and queue its mutations (synchronous: the hot path creates no coroutine).
        Returns the error when the record must go to the dead-letter topic (registered, not yet acked)."""
        origin = Origin(tp, rec.offset)
        if not self.stats.consumed:
            self.stats.first_record_s = time.monotonic()
        self.stats.consumed += 1
        try:
            mutations = self.router.route(rec.topic, rec.value, origin)
        except EventError as exc:
            self.tracker.register(origin, 1)
            return exc
        self.tracker.register(origin, len(mutations))
        self.stats.mutations += len(mutations)
        maps, batcher = self.maps, self.batcher
        for m in mutations:
            self.in_flight += _memory(m)
            for ready in batcher.add(m, maps[m.table].locate(m.row), now):
                self._send.send_nowait(ready)
        return None

    def _submit(self, batch: Batch) -> None:
        self._send.send_nowait(batch)

    def _pause(self) -> None:
        if not self._paused:
            parts = list(self._consumer.assignment())
            if parts:
                self._consumer.pause(*parts)
            self._paused = True
            self.stats.pauses += 1
            log.info("fetch_paused", in_flight_bytes=self.in_flight)

    def _resume(self) -> None:
        parts = [p for p in self._consumer.assignment()
                 if not (self.stop_at and self.stats.committed.get(TopicPartition(p.topic, p.partition), -1)
                         >= self.stop_at.get(TopicPartition(p.topic, p.partition), math.inf))]
        if parts:
            self._consumer.resume(*parts)
        self._paused = False
        log.info("fetch_resumed", in_flight_bytes=self.in_flight)

    async def _wait_progress(self) -> None:
        await self._progress.wait()
        self._progress = anyio.Event()

    # -- dead letters --------------------------------------------------------------------------

    async def _dead_letter(self, origin: Origin, key: bytes | None, value: bytes | None, reason: str,
                           error: str, headers: Any = ()) -> bool:
        """Send to the dead-letter topic (retrying until Kafka has it); False when a stop request
        abandoned the send."""
        assert self._dead is not None
        if self._stop.is_set():
            return False
        with anyio.CancelScope() as scope:
            self._dead_scope = scope
            try:
                await self._dead.send(origin, key, value, reason, error, headers)
            finally:
                self._dead_scope = None
        if scope.cancelled_caught:
            log.warning("dead_letter_abandoned", tp=str(origin.tp), offset=origin.offset, reason=reason)
            return False
        self.stats.dead_lettered += 1
        self.stats.dead_by_reason[reason] += 1
        self.observer.dead_lettered(reason)
        log.warning("dead_lettered", tp=str(origin.tp), offset=origin.offset, reason=reason, error=error)
        return True

    async def _reject(self, m: Mutation, error: str) -> None:
        assert self._dead is not None
        await self._dead.send_mutation(m, error)
        self.stats.dead_lettered += 1
        self.stats.dead_by_reason["hbase_rejected"] += 1
        self.observer.dead_lettered("hbase_rejected")

    # -- write ---------------------------------------------------------------------------------

    async def _write_loop(self, receive: Any) -> None:
        assert self._writer is not None
        async with receive:
            async for batch in receive:
                await self._writer.write(batch)
                self.tracker.ack_many(batch.origins())
                self.in_flight -= sum(_memory(m) for m in batch.mutations)
                s = self.stats
                s.rows_written += batch.rows
                s.batches_written += 1
                s.bytes_written += batch.size
                s.rows_by_table[batch.table] += batch.rows
                self.observer.in_flight(self.in_flight)
                self._progress.set()

    async def _flush_loop(self) -> None:
        last_refresh = time.monotonic()
        while True:
            deadline = self.batcher.next_deadline()
            now = _now_ms()
            if deadline is not None and deadline <= now:
                for batch in self.batcher.due(now):
                    self._submit(batch)
                continue
            wait = 0.05 if deadline is None else min(0.05, (deadline - now) / 1000)
            await anyio.sleep(max(wait, 0.001))
            if time.monotonic() - last_refresh > _REGION_REFRESH_S and self._writer is not None:
                last_refresh = time.monotonic()
                for table in list(self.maps):
                    try:
                        await self._writer.refresh(table)
                    except Exception as exc:
                        log.warning("region_refresh_failed", table=table, error=str(exc))

    # -- commit ----------------------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.writer.commit_interval_ms / 1000)
            await self._commit()

    async def _reached_stop(self) -> dict[TopicPartition, int]:
        """Partitions whose fetch position reached their stop offset with nothing pending: complete up
        to the stop offset even when the last offsets before it were never delivered (an empty slice,
        compaction, transaction markers)."""
        out: dict[TopicPartition, int] = {}
        if not self.stop_at:
            return out
        for tp, end in self.stop_at.items():
            if tp not in self._assigned or self.stats.committed.get(tp, -1) >= end or self._busy(tp):
                continue
            position = -1
            with anyio.move_on_after(0.2):
                try:
                    position = await self._consumer.position(KafkaTP(tp.topic, tp.partition))
                except Exception:  # not assigned any more, or no position yet: not complete
                    position = -1
            if position >= end and not self._busy(tp):  # checked again: a fetch may have landed meanwhile
                log.debug("stop_offset_reached_by_position", tp=str(tp), position=position, end=end)
                self._skipped(tp, self._next.get(tp, end), end)
                out[tp] = end
        return out

    def _busy(self, tp: TopicPartition) -> bool:
        """Records of ``tp`` are pending, or fetched and not yet registered (the fetch position is
        past them, so it says nothing about what was written)."""
        if tp in self._in_hand:
            return True
        pending = self.tracker.pending(tp)
        return pending is not None and pending.pending_records > 0

    async def _commit(self) -> None:
        offsets = {tp: off for tp, off in self.tracker.committable().items() if tp in self._assigned}
        for tp, end in (await self._reached_stop()).items():
            offsets[tp] = max(offsets.get(tp, end), end)
        if not offsets:
            return
        try:
            await self._consumer.commit({KafkaTP(tp.topic, tp.partition): off for tp, off in offsets.items()})
        except Exception as exc:  # e.g. a rebalance in progress: the next tick retries
            log.warning("commit_failed", error=repr(exc))
            return
        for tp, off in offsets.items():
            self.tracker.mark_committed(tp, off)
            self.stats.committed[tp] = off
            self.observer.committed(tp, off)
        self.stats.commits += 1
        if self._done():
            self._progress.set()

    # -- rebalance and shutdown ----------------------------------------------------------------------

    async def _flush_and_wait(self, tps: set[TopicPartition] | None) -> None:
        """Seal every open batch, then wait until nothing of ``tps`` (None: all) is pending."""
        for batch in self.batcher.drain():
            self._submit(batch)
        with anyio.move_on_after(self.settings.writer.shutdown_timeout_s) as scope:
            while True:
                st = self.tracker.statistics()
                pending = [tp for tp, p in st.partitions.items()
                           if p.pending_records and (tps is None or tp in tps)]
                if not pending:
                    break
                with anyio.move_on_after(0.05):
                    await self._wait_progress()
        if scope.cancelled_caught:
            log.warning("drain_timeout", timeout_s=self.settings.writer.shutdown_timeout_s,
                        pending=self.tracker.statistics().pending_records)

    async def _on_revoked(self, revoked: list[TopicPartition]) -> None:
        if not revoked:
            return
        log.info("partitions_revoked", partitions=[str(tp) for tp in revoked])
        await self._flush_and_wait(set(revoked))
        await self._commit()
        for tp in revoked:
            self.tracker.forget(tp)
            self._next.pop(tp, None)
            self._assigned.discard(tp)
        self.observer.revoked(revoked)

    async def _on_assigned(self, assigned: list[TopicPartition]) -> None:
        log.info("partitions_assigned", partitions=[str(tp) for tp in assigned])
        self._assigned.update(assigned)
        for tp in assigned:
            ktp = KafkaTP(tp.topic, tp.partition)
            committed = await self._consumer.committed(ktp)
            self._next.pop(tp, None)  # unknown until the first record when Kafka's reset policy decides
            if committed is not None:
                self.stats.committed[tp] = committed
                self.tracker.mark_committed(tp, committed)
                self._next[tp] = committed
            elif tp in self.start_offsets:
                self._consumer.seek(ktp, self.start_offsets[tp])
                self._next[tp] = self.start_offsets[tp]
        self.observer.assigned(assigned)

    async def _shutdown(self) -> None:
        """Commit what HBase acknowledged (after the drain, or instead of it when cancelled: the
        writers are gone then, and what they had not acknowledged is read again next run)."""
        with anyio.move_on_after(_FINAL_COMMIT_TIMEOUT_S) as scope:
            await self._commit()
        if scope.cancelled_caught:
            log.warning("final_commit_timeout", timeout_s=_FINAL_COMMIT_TIMEOUT_S)
        log.info("worker_stopped", consumed=self.stats.consumed, rows=self.stats.rows_written,
                 dead_lettered=self.stats.dead_lettered,
                 unacknowledged=self.tracker.statistics().pending_records)
