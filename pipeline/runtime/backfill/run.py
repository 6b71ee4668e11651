"""Backfill: replay a bounded slice of one topic through the normal worker, in a consumer group of
its own, resumably and at a capped rate.

- The slice (its ``[start, end)`` rules and the arguments that name it):
  :mod:`pipeline.runtime.backfill.slice`.
- Resuming (the state file, the group's start offsets, ``restart``):
  :mod:`pipeline.runtime.backfill.state`.

This module runs the backfill (:class:`Backfill`), caps its rate (:class:`Throttle`) and reports its
progress; it re-exports the names of the other two that callers use.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import structlog
from anyio.abc import TaskStatus

from pipeline.core.model import TopicPartition
from pipeline.core.ratelimit import RateLimiter
from pipeline.errors import ConfigError
from pipeline.ports import Broker, HBase, SchemaRegistry
from pipeline.runtime.backfill.slice import (
    ResolvedSlice,
    SliceArgs,
    default_group,
    parse_offsets,
    parse_time,
    resolve_slice,
)
from pipeline.runtime.backfill.state import (
    STATE_VERSION,
    commit_start_offsets,
    default_state_dir,
    load_state,
    save_state,
    slice_from_state,
    state_path,
)
from pipeline.runtime.ingest.startup import until_reachable
from pipeline.runtime.ingest.worker import Worker
from pipeline.settings import Settings

__all__ = [
    "Backfill",
    "BackfillProgress",
    "BackfillSummary",
    "PartitionProgress",
    "ResolvedSlice",
    "SliceArgs",
    "Throttle",
    "commit_start_offsets",
    "default_group",
    "default_state_dir",
    "parse_offsets",
    "parse_time",
    "resolve_slice",
    "throttled_settings",
]

log = structlog.get_logger("hbase_ingest.backfill")
T = TypeVar("T")


# -- rate limit ----------------------------------------------------------------------------------


class Throttle:
    """The worker's ``rate_limit`` hook: a token bucket of ``rate`` events/s, ``burst`` deep."""

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.limiter = RateLimiter(rate, burst or max(1, int(rate / 10)))
        self.waited_s = 0.0

    def __repr__(self) -> str:
        return f"Throttle({self.limiter!r}, waited_s={self.waited_s:.1f})"

    async def __call__(self, n: int) -> None:
        wait = self.limiter.acquire(n, time.monotonic())
        if wait > 0:
            self.waited_s += wait
            await anyio.sleep(wait)


def throttled_settings(settings: Settings, rate: float | None) -> Settings:
    """With a rate, fetch about a tenth of a second's worth per poll so chunks stay small."""
    if rate is None:
        return settings
    n = max(1, min(settings.kafka.max_poll_records, int(rate / 10)))
    return settings.model_copy(update={"kafka": settings.kafka.model_copy(update={"max_poll_records": n})})


# -- progress and summary ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionProgress:
    partition: int
    start: int
    end: int
    committed: int

    @property
    def total(self) -> int:
        return max(0, self.end - self.start)

    @property
    def done(self) -> int:
        return min(self.total, max(0, self.committed - self.start))


@dataclass(frozen=True)
class BackfillProgress:
    """Completion by committed offsets (what survives a restart) and this run's throughput."""

    partitions: list[PartitionProgress]
    consumed: int
    rows_written: int
    dead_lettered: int
    elapsed_s: float

    @property
    def total(self) -> int:
        return sum(p.total for p in self.partitions)

    @property
    def done(self) -> int:
        return sum(p.done for p in self.partitions)

    @property
    def events_per_s(self) -> float:
        return self.consumed / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        rate = self.events_per_s
        return (self.total - self.done) / rate if rate > 0 else None


@dataclass(frozen=True)
class BackfillSummary:
    group: str
    slice: ResolvedSlice
    events: int
    rows_written: int
    dead_lettered: int
    retries: int
    duration_s: float
    complete: bool
    resumed: bool
    already_complete: bool = False
    committed: dict[int, int] = field(default_factory=dict)
    #: offsets of the slice Kafka never delivered (deleted by retention before they were read,
    #: compacted away, transaction markers); counted as done, since nothing can read them any more
    skipped: int = 0
    #: partition -> (first, end) of the offsets retention had deleted before this run began
    deleted: dict[int, tuple[int, int]] = field(default_factory=dict)


# -- the backfill --------------------------------------------------------------------------------


class Backfill:
    """One backfill of ``args.topic``. Use :meth:`prepare` (optional; :meth:`run` calls it), then
    :meth:`run`; :meth:`request_stop` drains, commits and returns (resume later with the same args).
    ``worker`` exists once :meth:`prepare` returned (install metrics on it before :meth:`run`)."""

    def __init__(
        self,
        settings: Settings,
        hbase: HBase,
        kafka: Broker,
        args: SliceArgs,
        *,
        group: str | None = None,
        rate: float | None = None,
        state_dir: Path | None = None,
        restart: bool = False,
        registry: SchemaRegistry | None = None,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ConfigError(f"rate must be > 0 events/s, got {rate}")
        self.settings = throttled_settings(settings, rate)
        self.hbase = hbase
        self.kafka = kafka
        self.args = args
        self.group = group or default_group(settings, args)
        self.rate = rate
        self.state_path = state_path(state_dir or default_state_dir(), self.group)
        self.restart = restart
        self.registry = registry
        self.throttle = Throttle(rate) if rate is not None else None
        self.slice: ResolvedSlice | None = None
        self.worker: Worker | None = None
        self.resumed = False
        self.already_complete = False
        self._state: dict[str, Any] = {}
        self._stop_requested = False
        #: partition -> (first, end): offsets still to replay that Kafka no longer stores
        self.deleted: dict[int, tuple[int, int]] = {}

    def __repr__(self) -> str:
        return f"Backfill(group={self.group!r}, topic={self.args.topic!r}, rate={self.rate}, slice={self.slice})"

    async def prepare(self) -> ResolvedSlice:
        """Load or resolve the slice, commit start offsets where the group has none, build the
        worker."""
        if self.slice is not None:
            return self.slice
        stored = None if self.restart else load_state(self.state_path)
        if stored is not None and stored.get("args") != self.args.canonical():
            raise ConfigError(
                f"consumer group {self.group!r} already holds a backfill of other arguments "
                f"({self.state_path.name}); use another --group, or --restart to replace it"
            )
        if stored is None:
            resolved = await self._reachable(lambda: resolve_slice(self.kafka, self.args))
            stored = {
                "version": STATE_VERSION,
                "group": self.group,
                "topic": resolved.topic,
                "args": self.args.canonical(),
                "start": {str(p): o for p, o in resolved.start.items()},
                "end": {str(p): o for p, o in resolved.end.items()},
                "resolved_at": datetime.now(UTC).isoformat(),
                "completed": False,
            }
            save_state(self.state_path, stored)
            log.info(
                "backfill_slice_resolved",
                group=self.group,
                total=resolved.total,
                start=resolved.start,
                end=resolved.end,
            )
        else:
            self.resumed = True
        self._state = stored
        self.slice = slice_from_state(stored)
        self.already_complete = bool(stored.get("completed"))
        if not self.already_complete:
            slice_ = self.slice
            committed = await self._reachable(
                lambda: commit_start_offsets(self.kafka, self.group, slice_, overwrite=self.restart))
            self.resumed = self.resumed and any(committed[p] > self.slice.start[p] for p in committed)
            self.deleted = await self._reachable(lambda: self._deleted_before_read(committed))
        self.worker = Worker(
            self.settings,
            self.hbase,
            self.kafka,
            group_id=self.group,
            topics=[self.args.topic],
            stop_at=self.slice.stop_at(),
            start_offsets=self.slice.start_offsets(),
            rate_limit=self.throttle,
            registry=self.registry,
        )
        if self._stop_requested:
            self.worker.request_stop()
        return self.slice

    async def _reachable(self, step: Callable[[], Awaitable[T]]) -> T:
        """``step`` retried while Kafka is unreachable, as the worker's start-up does (unless fail_fast)."""
        return await until_reachable(step, f"Kafka at {self.kafka.bootstrap}",
                                     fail_fast=self.settings.runtime.fail_fast)

    async def _deleted_before_read(self, committed: dict[int, int]) -> dict[int, tuple[int, int]]:
        """Offsets between where each partition resumes and the end of the slice that the log no
        longer holds (retention or DeleteRecords moved its start past them)."""
        assert self.slice is not None
        found = await self.kafka.log_offsets([TopicPartition(self.slice.topic, p) for p in self.slice.end], "start")
        log_start = {tp.partition: off for tp, off in found.items()}
        deleted: dict[int, tuple[int, int]] = {}
        for p, end in self.slice.end.items():
            first = committed.get(p, self.slice.start[p])
            gone = min(log_start.get(p, 0), end)
            if gone > first:
                deleted[p] = (first, gone)
        if deleted:
            log.warning("backfill_records_deleted_before_read", group=self.group, topic=self.slice.topic,
                        partitions={p: f"{a}..{b - 1}" for p, (a, b) in deleted.items()},
                        count=sum(b - a for a, b in deleted.values()))
        return deleted

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True
        if self.worker is not None:
            self.worker.request_stop()

    def progress(self) -> BackfillProgress:
        slice_ = self.slice
        worker = self.worker
        if slice_ is None or worker is None:
            return BackfillProgress([], 0, 0, 0, 0.0)
        committed = worker.stats.committed
        parts = [
            PartitionProgress(
                p,
                slice_.start[p],
                slice_.end[p],
                committed.get(TopicPartition(slice_.topic, p), slice_.start[p]),
            )
            for p in sorted(slice_.start)
        ]
        s = worker.stats
        return BackfillProgress(parts, s.consumed, s.rows_written, s.dead_lettered, s.elapsed_s())

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> BackfillSummary:
        slice_ = await self.prepare()
        worker = self.worker
        assert worker is not None
        t0 = time.monotonic()
        if self.already_complete or slice_.total == 0:
            task_status.started()
            self._mark_completed()
            return BackfillSummary(
                self.group,
                slice_,
                0,
                0,
                0,
                0,
                0.0,
                True,
                self.resumed,
                already_complete=self.already_complete,
                committed=dict(slice_.end),
            )
        log.info(
            "backfill_started",
            group=self.group,
            topic=slice_.topic,
            total=slice_.total,
            rate=self.rate,
            resumed=self.resumed,
        )
        summary = await worker.run(task_status=task_status)
        committed = {tp.partition: off for tp, off in summary.committed.items() if tp.topic == slice_.topic}
        complete = all(committed.get(p, slice_.start[p]) >= e for p, e in slice_.end.items() if e > slice_.start[p])
        if complete:
            self._mark_completed()
        log.info(
            "backfill_stopped",
            group=self.group,
            complete=complete,
            events=summary.consumed,
            rows=summary.rows_written,
            dead_lettered=summary.dead_lettered,
            skipped=sum(summary.skipped.values()),
        )
        return BackfillSummary(
            self.group,
            slice_,
            summary.consumed,
            summary.rows_written,
            summary.dead_lettered,
            summary.retries,
            time.monotonic() - t0,
            complete,
            self.resumed,
            committed=committed,
            skipped=sum(n for tp, n in summary.skipped.items() if tp.topic == slice_.topic),
            deleted=dict(self.deleted),
        )

    def _mark_completed(self) -> None:
        if self._state and not self._state.get("completed"):
            self._state["completed"] = True
            self._state["completed_at"] = datetime.now(UTC).isoformat()
            save_state(self.state_path, self._state)
