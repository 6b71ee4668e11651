"""The ingest worker: Kafka -> routes -> rowkeys -> per-server batches -> HBase, at-least-once.

Tasks (all owned by one task group):

- **consume**: ``fetch`` -> route each record -> register it with the offset tracker (one pending
  ack per mutation) -> add mutations to the batcher (per region server, or per region) -> hand sealed
  batches, in sealing order, to the writers through a bounded stream (a full stream makes the consume
  task wait: backpressure). Undecodable or invalid records go to the dead-letter topic and count as
  done once Kafka has them. When in-flight bytes reach ``max_in_flight_bytes`` every assigned
  partition is paused and the consume task waits for the writers; fetching resumes below half of it.
- **flush timer** (:mod:`pipeline.runtime.ingest.timer`): seals batches that reached their age (queued
  behind those the consume task sealed before them), logs the bounded warnings' digests, refreshes
  region maps every 30 s.
- **writers** (``concurrency`` of them): write batches with retries (:mod:`pipeline.runtime.ingest.writer`),
  then acknowledge every mutation.
- **committer**: every ``commit_interval_ms`` commits, per partition, the highest contiguous offset
  whose mutations were all acknowledged, + 1. Never past unwritten data.

The per-partition bookkeeping (next offset, in hand, skipped, stop offsets, the in-flight budget) is
the pure :class:`~pipeline.core.ingest.progress.Progress`; acknowledgements are the pure
:class:`~pipeline.core.ingest.offsets.OffsetTracker`. Kafka and HBase are reached only through the ports of
:mod:`pipeline.ports`.

Offsets that Kafka never delivers (retention, compaction, transaction markers) are counted per
partition as *skipped* (:mod:`pipeline.core.ingest.progress`).

Partition revocation and shutdown take the same path: stop fetching, seal and write every open batch,
wait (bounded by ``shutdown_timeout_s``) for the writes, commit, then forget the partitions / leave
the group. Cancelling :meth:`Worker.run` (a second signal) skips the wait: it commits what HBase has
acknowledged so far and returns at once; the rest is read again by the next run.

Start-up (the checks and waits of :mod:`pipeline.runtime.ingest.startup`, connecting the producer,
joining the group) runs in a cancel scope of its own: a stop request cancels it, and :meth:`Worker.run`
returns at once with nothing consumed (nothing to drain or commit).
"""

from __future__ import annotations

import operator
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pipeline.core.ingest.batcher import Batch, RegionBatcher, SealReason
from pipeline.core.ingest.latency import DoneLatency
from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.progress import Progress
from pipeline.core.ingest.regions import RegionMaps
from pipeline.core.model import Mutation, Origin, TopicPartition
from pipeline.core.routes.router import Record, Router
from pipeline.errors import ConfigError
from pipeline.ports import Broker, HBase, KafkaRecord, RecordSink, RecordSource, SchemaRegistry
from pipeline.runtime.ingest.accounting import footprint_of, settle_written
from pipeline.runtime.ingest.commits import Committer
from pipeline.runtime.ingest.deadletter import DeadLetters
from pipeline.runtime.ingest.ledger import AckLedger
from pipeline.runtime.ingest.observer import Observer, Observers, WorkerStats
from pipeline.runtime.ingest.report import EventWarnings, WorkerSummary
from pipeline.runtime.ingest.schemas import SchemaFetcher
from pipeline.runtime.ingest.startup import check_tables, ensure_dead_letter_topic, until_reachable, wait_for_topics
from pipeline.runtime.ingest.timer import TimerWake, flush_timer
from pipeline.runtime.ingest.writer import BatchWriter
from pipeline.settings import KafkaSettings, Settings, WriterSettings

__all__ = ["Worker", "WorkerSummary"]  # WorkerSummary: re-exported from pipeline.runtime.ingest.report

log = structlog.get_logger("hbase_ingest.worker")
_FINAL_COMMIT_TIMEOUT_S = 10.0  # the last commit when stopping; Kafka unreachable must not hang the exit


def _offset(record: KafkaRecord) -> int:
    return record.offset


def _offsets(records: Sequence[Record], start: int, stop: int) -> Sequence[int]:
    """The offsets of ``records[start:stop]`` (increasing): a range when they have no gap, as they
    do but for compacted topics and transaction markers."""
    if start >= stop:
        return ()
    first, last = records[start].offset, records[stop - 1].offset
    if last - first == stop - 1 - start:
        return range(first, last + 1)
    return [records[k].offset for k in range(start, stop)]


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def seals_when_caught_up(writer: WriterSettings, kafka: KafkaSettings) -> bool:
    """``[writer] seal_when_caught_up`` resolved: ``auto`` seals when the broker batches fetches
    (``fetch_min_bytes > 1``) for at least ``max_batch_age_ms``."""
    if writer.seal_when_caught_up != "auto":
        return writer.seal_when_caught_up == "always"
    return kafka.fetch_min_bytes > 1 and kafka.fetch_max_wait_ms >= writer.max_batch_age_ms


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


_TIMESTAMP = operator.attrgetter("timestamp")


class Worker:
    """One member of a consumer group. ``stop_at`` (partition -> end offset, exclusive) makes it finish
    once everything before those offsets is written and committed (demo, tests, backfill);
    ``start_offsets`` seeks partitions that have no committed offset yet (backfill). ``rate_limit``
    is awaited with the number of records routed from each partition's fetch (a throttle)."""

    def __init__(self, settings: Settings, hbase: HBase, kafka: Broker, *, group_id: str | None = None,
                 topics: list[str] | None = None, stop_at: Mapping[TopicPartition, int] | None = None,
                 start_offsets: Mapping[TopicPartition, int] | None = None, observer: Observer | None = None,
                 rate_limit: Callable[[int], Awaitable[Any]] | None = None,
                 registry: SchemaRegistry | None = None) -> None:
        self.settings = settings
        self.hbase = hbase
        self.kafka = kafka
        self._stop = anyio.Event()
        self.router = Router(settings.routes, settings.writer.max_key_bytes, settings.writer.max_cell_bytes,
                             settings.topics, settings.registry.cache_size)
        self.topics = topics or self.router.topics
        unknown = set(self.topics) - set(self.router.topics)
        if unknown:
            raise ConfigError(f"no route reads topic(s) {sorted(unknown)}")
        dead = settings.kafka.dead_letter_topic
        if stop_at is None and dead in self.topics and settings.topic(dead).redrive_of is not None:
            raise ConfigError(f"re-driving the dead-letter topic {dead!r} into itself must be bounded (a record "
                              "refused again would come back for ever): hbase-ingest backfill --route")
        framed = [t for t in self.topics if any(self.router.framed(t))]
        if framed and registry is None:
            raise ConfigError(f"topic(s) {', '.join(framed)} are in a schema-registry format: the worker needs a "
                              "registry client ([registry] url)")
        self.registry = registry
        #: fetches the writer schemas a fetch names before it is routed (None: no topic needs one)
        self.schemas = (SchemaFetcher(self.router, registry, self._stop, self._waiting)
                        if framed and registry is not None else None)
        self.group_id = group_id or settings.kafka.group_id
        self.stop_at = dict(stop_at) if stop_at else None
        self.start_offsets = dict(start_offsets) if start_offsets else {}
        #: every observer of the worker (``observer``, then those :meth:`Observers.add` adds, e.g. metrics)
        self.observer = Observers(*([observer] if observer is not None else []))
        self.rate_limit = rate_limit
        w = settings.writer
        self.progress = Progress(w.max_in_flight_bytes, self.stop_at, self.start_offsets)
        self.stats = WorkerStats(committed=self.progress.committed, skipped=self.progress.skipped)
        self.tracker = OffsetTracker()
        #: each record's latency from its Kafka timestamp to done (written, and every record before it)
        self.latency = DoneLatency()
        self.batcher = RegionBatcher(w.max_batch_rows, w.max_batch_bytes, w.max_batch_age_ms, w.batch_by)
        self._wake = TimerWake()  # the flush timer sleeps while no batch is open
        self._seal_when_caught_up = seals_when_caught_up(w, settings.kafka)
        #: the region maps of the tables written (the writer replaces one after a split or a move)
        self.maps = RegionMaps()
        #: set when the in-flight bytes or the pending records may have gone down (a written batch), when
        #: the stop offsets are committed and on a stop request; replaced by whoever waited on it
        self._drained = anyio.Event()
        #: partition -> the offset it was fetched again from after a fetch started past it
        self._refetched: dict[TopicPartition, int] = {}
        self._source: RecordSource | None = None
        self._committer: Committer | None = None
        self._warnings = EventWarnings(self.observer, settings.kafka.dead_letter_topic)
        self._send: MemoryObjectSendStream[Batch] | None = None
        #: sealed batches not yet handed to a writer, in the order they were sealed (by the hot path, the
        #: flush timer or a drain): :meth:`_submit_ready` sends them in that order
        self._ready: deque[Batch] = deque()
        self._submitting = anyio.Lock()
        self._writer: BatchWriter | None = None
        self._dead: DeadLetters | None = None
        self._dead_scope: anyio.CancelScope | None = None  # a dead-letter send in progress
        self.ready = False
        self.waiting: str | None = None  # what start-up waits for (Kafka or HBase unreachable), for /readyz
        self._startup: anyio.CancelScope | None = None  # open while starting: a stop request cancels it

    def __repr__(self) -> str:
        return (f"Worker(group={self.group_id!r}, topics={self.topics}, in_flight={self.in_flight}, "
                f"consumed={self.stats.consumed}, written={self.stats.rows_written})")

    @property
    def in_flight(self) -> int:
        """Bytes consumed and not yet acknowledged by HBase (with Python's own overhead)."""
        return self.progress.in_flight

    @property
    def retries(self) -> int:
        return self._writer.retries if self._writer is not None else 0

    @property
    def done(self) -> bool:
        """A bounded run (``stop_at``) has committed everything up to its stop offsets."""
        return self.progress.done()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    @property
    def starting(self) -> bool:
        """:meth:`run` is starting up (checking, waiting for a dependency, joining the group):
        a stop request now ends it at once."""
        return self._startup is not None

    def request_stop(self) -> None:
        """Graceful stop: stop fetching, flush, commit, leave the group. During start-up: cancel it
        (nothing was consumed). A dead-letter send that is still retrying (Kafka refuses it) is
        abandoned: its record stays unacknowledged, so no commit passes it and the next run reads it
        again."""
        self._stop.set()
        if self._startup is not None:
            self._startup.cancel()
        self._drained.set()  # a consume loop waiting for the in-flight bytes to drain sees the stop
        if self._dead_scope is not None:
            self._dead_scope.cancel()

    def statistics(self) -> dict[str, Any]:
        return {"worker": self.stats, "progress": repr(self.progress), "tracker": self.tracker.statistics(),
                "batcher": self.batcher.statistics(), "in_flight_bytes": self.in_flight,
                "paused": self.progress.paused, "hbase": self.hbase.statistics()}

    # -- start-up checks ------------------------------------------------------------------------

    async def check_tables(self) -> None:
        """Fail at start-up, naming the route, when a table or family does not exist; load region maps."""
        await check_tables(self.hbase, self.router.routes, self.maps)

    async def check_dead_letter_topic(self) -> None:
        """Create the dead-letter topic when missing, or fail at start-up naming it."""
        await ensure_dead_letter_topic(self.kafka, self.settings.kafka.dead_letter_topic)

    async def _check_dependencies(self) -> None:
        """HBase's tables, the dead-letter topic, the topics read and the registry, each waited for
        (or, with ``fail_fast``, failed on) as :mod:`pipeline.runtime.ingest.startup` says."""
        fail_fast, where = self.settings.runtime.fail_fast, self.kafka.bootstrap
        await until_reachable(self.check_tables, "HBase", fail_fast=fail_fast, on_wait=self._waiting)
        await until_reachable(self.check_dead_letter_topic, f"Kafka at {where}", fail_fast=fail_fast,
                              on_wait=self._waiting)
        readers = {t: [r.name for r in self.router.by_topic.get(t, ())] for t in self.topics}
        await wait_for_topics(self.kafka, readers, where, fail_fast=fail_fast, on_wait=self._waiting)
        if self.schemas is not None:
            await until_reachable(self.schemas.registry.check, f"the schema registry at {self.schemas.registry.url}",
                                  fail_fast=fail_fast, on_wait=self._waiting)

    def _waiting(self, why: str | None) -> None:
        self.waiting = why

    # -- main ------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> WorkerSummary:
        """Start up, then consume until a stop request (or ``stop_at``); returns the summary.
        ``task_status.started()`` is called once consuming, or when a stop request ended the
        start-up (run then returns at once, nothing consumed)."""
        producer: RecordSink | None = None
        source: RecordSource | None = None
        startup = anyio.CancelScope()
        self._startup = startup
        if self._stop.is_set():
            startup.cancel()
        try:
            try:
                with startup:
                    await self._check_dependencies()
                    producer, source = self._prepare()
                    await producer.start()
                    source.subscribe(self.topics, self)
                    await source.start()
            finally:
                self._startup = None
            if source is None or startup.cancel_called:
                log.info("stopped_while_starting", waiting=self.waiting)
                self.waiting = None
                task_status.started()
            else:
                await self._serve(source, task_status)
        except BaseException:
            await _close(source, producer, failed=True)
            raise
        await _close(source, producer, failed=False)
        s = self.stats
        streaming = time.monotonic() - s.first_record_s if s.first_record_s is not None else 0.0
        return WorkerSummary(s.consumed, s.rows_written, s.batches_written, s.dead_lettered, self.retries,
                             s.elapsed_s(), dict(s.committed), streaming, dict(s.skipped),
                             self.latency.histogram.quantile(0.5), self.latency.histogram.quantile(0.99))

    def _prepare(self) -> tuple[RecordSink, RecordSource]:
        """The producer and the consumer (not started), and the committer, dead letters and batch
        writer over them."""
        producer = self.kafka.sink(max_request_size=16 * 1024 * 1024)  # dead letters carry originals
        source = self.kafka.source(self.group_id)
        self._source = source
        self._committer = Committer(source, self.tracker, self.progress, self.observer, self.stats,
                                    self._warnings.skipped)
        self._dead = DeadLetters(producer, self.settings.kafka.dead_letter_topic, self.stats, self._warnings)
        ledger_dir = self.settings.writer.ack_ledger_dir
        self._writer = BatchWriter(self.hbase, self.settings.writer, self.maps, self.observer,
                                   self._dead.send_mutation, AckLedger(ledger_dir) if ledger_dir else None)
        return producer, source

    async def _serve(self, source: RecordSource, task_status: TaskStatus[None]) -> None:
        """The writers, the flush timer and the committer around the consume loop, then the drain."""
        assert self._writer is not None
        # bounded: a writer per slot; the consume task waits when every writer is busy
        concurrency = self.settings.writer.concurrency
        send, receive = anyio.create_memory_object_stream[Batch](concurrency)
        self._send = send
        try:
            async with anyio.create_task_group() as tg:
                for i in range(concurrency):
                    tg.start_soon(self._write_loop, receive.clone(), name=f"writer-{i}")
                receive.close()
                tg.start_soon(flush_timer, self.batcher, self._submit_sealed, self._writer, self._warnings,
                              self._wake, name="flush-timer")
                tg.start_soon(self._commit_loop, name="committer")
                self.ready = True
                task_status.started()
                try:
                    await self._consume_loop(source)
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

    # -- consume -----------------------------------------------------------------------------------

    async def _consume_loop(self, source: RecordSource) -> None:
        progress = self.progress
        while not self._stop.is_set():
            if progress.done():
                log.info("stop_offsets_reached", committed={str(k): v for k, v in progress.committed.items()})
                return
            if progress.over_budget():
                if progress.should_pause():
                    self._pause(source)
                # woken by a written batch, the commit that reaches the stop offsets, or a stop request
                await self._drained.wait()
                self._drained = anyio.Event()
                continue
            if progress.may_resume():
                self._resume(source)
            fetched = await source.fetch(0, self.settings.kafka.max_poll_records)  # what is in hand
            if not fetched:
                if self._seal_when_caught_up and self.batcher.next_deadline() is not None:
                    # caught up: more records come only with the next fetch, so the open batches go now
                    self._ready.extend(self.batcher.drain(SealReason.CAUGHT_UP))
                    await self._submit_ready()
                fetched = await source.fetch(200, self.settings.kafka.max_poll_records)
                if not fetched:
                    continue
            # until the whole fetch is registered, its partitions' fetch position is not progress (a bounded
            # run's final commit goes by position): a stop or an error part way leaves them in hand
            progress.take_in_hand(fetched)
            if not await self._handle(source, fetched):
                return
            progress.release_hand()
            self.observer.in_flight(self.in_flight)

    async def _handle(self, source: RecordSource, fetched: Mapping[TopicPartition, Sequence[KafkaRecord]]) -> bool:
        """Route one fetch. False when a stop request abandoned a dead-letter send.

        Each partition's records are routed in runs (:meth:`Router.route_run`: up to the next record
        the fast forms do not take, whose outcome :meth:`Router.route_record` gives: its mutations,
        and a dead letter per refusing route). A run is registered with the tracker (one ack per
        mutation, and per dead letter, of each record) before the next await, before any batch can
        reach a writer; its mutations then go to the batcher (sealed batches wait in ``_ready`` for
        :meth:`_submit_ready`)."""
        progress, tracker, router, stats = self.progress, self.tracker, self.router, self.stats
        now = _now_ms()
        for tp, records in fetched.items():
            if tp not in progress.assigned:
                continue  # revoked while this fetch was in flight
            end = progress.stop_of(tp)
            expected = progress.next.get(tp)
            if expected is not None and records[0].offset > expected and self._refetched.get(tp) != expected:
                # the fetch starts past the next offset due: Kafka may not have those offsets (retention,
                # compaction, transaction markers), or the records were fetched before a rebalance moved
                # the position back to the committed offset. Fetch again from that offset once; a gap
                # seen twice is real and skipped, a stale fetch is never taken for one
                self._refetched[tp] = expected
                source.seek(tp, expected)
                log.info("fetch_gap_refetched", tp=str(tp), expected=expected, first=records[0].offset)
                continue
            self._refetched.pop(tp, None)
            skip = progress.delivered(tp, records[0].offset)
            if skip is not None:
                self._warnings.skipped(skip)
            if not stats.consumed:
                stats.first_record_s = time.monotonic()
            count = len(records)
            if end is not None and records[-1].offset >= end:
                count = bisect_left(records, end, key=_offset)
                source.pause(tp)
            if self.schemas is not None and count:
                if not await self.schemas.prepare(tp, records[:count]):
                    return False  # stopping while the registry does not answer: nothing of these was taken
                if tp not in progress.assigned:
                    continue  # revoked while the schemas were fetched
            fanout = len(router.by_topic.get(tp.topic, ()))
            i = 0
            while i < count:
                run = router.route_run(tp, records, i, count)
                if run.counts is None:  # one mutation per route and record
                    tracker.register_run(tp, _offsets(records, i, run.stop), fanout)
                else:
                    for rec, n in zip(records[i:run.stop], run.counts, strict=True):
                        tracker.register(Origin(tp, rec.offset), n)
                self._queue(run.mutations, now)
                stats.consumed += run.stop - i
                i = run.stop
                if i == count:
                    break
                # a record the fast forms do not take: its outcome by the reference, route by route
                rec = records[i]
                origin = Origin(tp, rec.offset)
                outcome = router.route_record(tp, rec)
                tracker.register(origin, len(outcome.mutations) + len(outcome.refusals))
                self._queue(outcome.mutations, now)
                stats.consumed += 1
                i += 1
                for refusal in outcome.refusals:
                    if not await self._dead_letter(origin, rec, refusal.error.reason, str(refusal.error),
                                                   refusal.route):
                        return False  # stopping: the record stays unacknowledged (read again next run)
                    tracker.ack(origin)
            if count:
                progress.read_up_to(tp, records[count - 1].offset)
                self.latency.note_run(tp, records[count - 1].offset, map(_TIMESTAMP, records[:count]))
            await self._submit_ready()
            self.observer.consumed(tp, count)
            if self.rate_limit is not None and count:
                await self.rate_limit(count)
        return True

    def _queue(self, mutations: Sequence[Mutation], now: int) -> None:
        """Count ``mutations`` against the in-flight budget and hand them to the batcher."""
        if not mutations:
            return
        self.stats.mutations += len(mutations)
        self.progress.add_in_flight(footprint_of(mutations))
        sealed = self.batcher.add_many(mutations, self.maps, now)
        self._wake.opened()
        if sealed:
            self._ready.extend(sealed)

    async def _submit_ready(self) -> None:
        """Hand the sealed batches to the writers, in the order they were sealed: whoever sends holds
        ``_submitting`` and also sends what others sealed meanwhile, so a batch sealed later (say by
        the flush timer while the hot path waits for a free writer) never reaches a writer first."""
        if not self._ready:
            return
        assert self._send is not None
        async with self._submitting:
            ready, send = self._ready, self._send.send
            while ready:
                await send(ready.popleft())

    async def _submit_sealed(self, batches: Sequence[Batch]) -> None:
        """Queue ``batches`` behind those sealed before them and send them (the flush timer's path)."""
        self._ready.extend(batches)
        await self._submit_ready()

    def _pause(self, source: RecordSource) -> None:
        parts = source.assignment()
        if parts:
            source.pause(*parts)
        self.progress.set_paused(True)
        self.stats.pauses += 1
        log.info("fetch_paused", in_flight_bytes=self.in_flight)

    def _resume(self, source: RecordSource) -> None:
        parts = self.progress.resumable(source.assignment())
        if parts:
            source.resume(*parts)
        self.progress.set_paused(False)
        log.info("fetch_resumed", in_flight_bytes=self.in_flight)

    # -- dead letters --------------------------------------------------------------------------

    async def _dead_letter(self, origin: Origin, rec: KafkaRecord, reason: str, error: str,
                           route: str | None = None) -> bool:
        """Send to the dead-letter topic (retrying until Kafka has it); False when a stop request
        abandoned the send."""
        assert self._dead is not None
        if self._stop.is_set():
            return False
        with anyio.CancelScope() as scope:
            self._dead_scope = scope
            try:
                await self._dead.send(origin, rec.key, rec.value, reason, error, rec.headers, route, rec.timestamp)
            finally:
                self._dead_scope = None
        if scope.cancelled_caught:
            log.warning("dead_letter_abandoned", tp=str(origin.tp), offset=origin.offset, reason=reason)
            return False
        return True

    # -- write ---------------------------------------------------------------------------------

    async def _write_loop(self, receive: MemoryObjectReceiveStream[Batch]) -> None:
        assert self._writer is not None
        async with receive:
            async for batch in receive:
                await self._writer.write(batch)
                settle_written(batch, self.tracker, self.progress, self.stats, self.observer)
                self.latency.settle(self.tracker.watermark, _wall_ms())
                self._drained.set()

    # -- commit ----------------------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await anyio.sleep(self.settings.writer.commit_interval_ms / 1000)
            await self._commit()

    async def _commit(self) -> None:
        if self._committer is not None and await self._committer.commit() and self.progress.done():
            self._drained.set()

    # -- rebalance (the source's AssignmentListener) and shutdown -------------------------------------

    async def _flush_and_wait(self, tps: set[TopicPartition] | None) -> None:
        """Seal every open batch, then wait until nothing of ``tps`` (None: all) is pending."""
        with anyio.move_on_after(self.settings.writer.shutdown_timeout_s) as scope:
            self._ready.extend(self.batcher.drain())
            await self._submit_ready()
            while True:
                st = self.tracker.statistics()
                pending = [tp for tp, p in st.partitions.items()
                           if p.pending_records and (tps is None or tp in tps)]
                if not pending:
                    break
                await self._drained.wait()  # a written batch settles its records
                self._drained = anyio.Event()
        if scope.cancelled_caught:
            log.warning("drain_timeout", timeout_s=self.settings.writer.shutdown_timeout_s,
                        pending=self.tracker.statistics().pending_records)

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        if not revoked:
            return
        log.info("partitions_revoked", partitions=[str(tp) for tp in revoked])
        await self._flush_and_wait(set(revoked))
        await self._commit()
        for tp in revoked:
            self.tracker.forget(tp)
            self.latency.forget(tp)
        self.progress.revoke(revoked)
        self.observer.revoked(revoked)

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        log.info("partitions_assigned", partitions=[str(tp) for tp in assigned])
        assert self._source is not None
        for tp in assigned:
            committed = await self._source.committed(tp)
            if committed is not None:
                self.tracker.mark_committed(tp, committed)
            seek = self.progress.assign(tp, committed)
            if seek is not None:
                self._source.seek(tp, seek)
        self.observer.assigned(assigned)

    async def _shutdown(self) -> None:
        """Commit what HBase acknowledged (after the drain, or instead of it when cancelled: the
        writers are gone then, and what they had not acknowledged is read again next run)."""
        with anyio.move_on_after(_FINAL_COMMIT_TIMEOUT_S) as scope:
            await self._commit()
        if scope.cancelled_caught:
            log.warning("final_commit_timeout", timeout_s=_FINAL_COMMIT_TIMEOUT_S)
        self._warnings.flush(final=True)
        log.info("worker_stopped", consumed=self.stats.consumed, rows=self.stats.rows_written,
                 dead_lettered=self.stats.dead_lettered,
                 unacknowledged=self.tracker.statistics().pending_records)


async def _close(source: RecordSource | None, producer: RecordSink | None, *, failed: bool) -> None:
    """Leave the group, then stop the producer, both shielded from cancellation. After a failure their own
    errors are logged and dropped (the failure that stopped the worker is the one to report: a broken login
    fails both again); otherwise the first is raised once both were tried."""
    first: Exception | None = None
    for what, part in (("consumer", source), ("producer", producer)):
        if part is None:
            continue
        try:
            with anyio.CancelScope(shield=True):
                await part.stop()
        except Exception as exc:
            if failed:
                log.warning("stop_failed", part=what, error=str(exc))
            elif first is None:
                first = exc
    if first is not None:
        raise first
