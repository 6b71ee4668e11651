"""Backfill: replay a bounded slice of one topic through the normal worker, in a consumer group of
its own, resumably and at a capped rate.

The slice, per partition, is ``[start, end)`` (start inclusive, end exclusive, Kafka offsets):

- ``start``: the given offset (``--from-offset P:O``), else the first offset whose Kafka timestamp
  is ``>= from_time`` (Kafka's offsets-for-times), else the log start. A partition with no record
  at or after ``from_time`` gets ``start = end`` (nothing to replay).
- ``end``: the given offset, else the first offset whose timestamp is ``>= to_time`` (so the time
  window is ``[from_time, to_time)``), else the log end offset *when the slice is first resolved*.
  Producers may keep writing; the backfill still finishes.
- When offsets are given for some partitions only, the other partitions are not replayed, unless the
  other bound is a time (then they use it).
- Offsets are clamped to ``[log start, log end]``.

Kafka timestamps (CreateTime set by producers) need not grow with offsets; the slice is the offset
range between the two resolved bounds, so a record out of time order inside it is replayed too.

Resumability: the resolved slice is stored as JSON in the state directory
(``$XDG_STATE_HOME/hbase-ingest/backfill/<group>.json``, default ``~/.local/state/...``), keyed by
the consumer group, whose default name hashes the slice arguments
(``<group_id>.backfill.<topic>.<digest>``). Before the worker starts, ``start`` is committed for
every partition without a commit in that group; the worker then resumes from the group's commits,
which only ever cover offsets HBase acknowledged. Interrupted and started again with the same
arguments, a backfill continues where it stopped: no gaps; what was written after the last commit is
written again, with the same cell timestamps, i.e. rewritten identically (routes should set
``timestamp_field``; ``increment`` counters are not replay-safe).

A finished slice is marked ``completed`` in its state file; running it again does nothing unless
``restart`` is set, which resolves the slice anew and commits its start offsets again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import TaskStatus

from connectors.hbase import HBaseClient
from connectors.kafka import TopicPartition as KafkaTP
from connectors.kafka import make_consumer, partitions
from pipeline.core.model import TopicPartition
from pipeline.core.ratelimit import RateLimiter
from pipeline.errors import ConfigError, KafkaError
from pipeline.runtime.worker import Worker
from pipeline.settings import KafkaSettings, Settings

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
_STATE_VERSION = 1


# -- arguments -----------------------------------------------------------------------------------


def parse_offsets(text: str) -> dict[int, int]:
    """``"0:100,1:250"`` -> ``{0: 100, 1: 250}``. Raises ``ValueError`` naming the bad item."""
    out: dict[int, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        p, sep, o = item.partition(":")
        if not sep or not p.strip().isdigit() or not o.strip().isdigit():
            raise ValueError(f"{item!r} is not PARTITION:OFFSET (two non-negative integers)")
        if int(p) in out:
            raise ValueError(f"partition {int(p)} is given twice")
        out[int(p)] = int(o)
    if not out:
        raise ValueError("no PARTITION:OFFSET pairs given")
    return out


def parse_time(text: str) -> int:
    """ISO-8601 (``2024-05-01T12:00:00Z``; no zone means UTC) or epoch milliseconds -> epoch ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r} is neither an ISO-8601 time nor epoch milliseconds") from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


@dataclass(frozen=True)
class SliceArgs:
    """What the user asked for; ``digest`` names the default consumer group and state file."""

    topic: str
    from_time_ms: int | None = None
    from_offsets: Mapping[int, int] | None = None
    to_time_ms: int | None = None
    to_offsets: Mapping[int, int] | None = None

    def __post_init__(self) -> None:
        if self.from_time_ms is not None and self.from_offsets is not None:
            raise ConfigError("give a start time or start offsets, not both")
        if self.to_time_ms is not None and self.to_offsets is not None:
            raise ConfigError("give an end time or end offsets, not both")
        if self.from_time_ms is not None and self.to_time_ms is not None and self.to_time_ms <= self.from_time_ms:
            raise ConfigError("the end time must be after the start time")

    def canonical(self) -> dict[str, Any]:
        def offs(m: Mapping[int, int] | None) -> dict[str, int] | None:
            return None if m is None else {str(p): m[p] for p in sorted(m)}

        return {
            "topic": self.topic,
            "from_time_ms": self.from_time_ms,
            "from_offsets": offs(self.from_offsets),
            "to_time_ms": self.to_time_ms,
            "to_offsets": offs(self.to_offsets),
        }

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.canonical(), sort_keys=True).encode()).hexdigest()[:10]


def default_group(settings: Settings, args: SliceArgs) -> str:
    return f"{settings.kafka.group_id}.backfill.{args.topic}.{args.digest()}"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hbase-ingest" / "backfill"


# -- the resolved slice --------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedSlice:
    """Per partition ``[start, end)``; fixed when first resolved, then read from the state file."""

    topic: str
    start: dict[int, int]
    end: dict[int, int]

    @property
    def total(self) -> int:
        return sum(max(0, self.end[p] - self.start[p]) for p in self.start)

    def stop_at(self) -> dict[TopicPartition, int]:
        return {TopicPartition(self.topic, p): e for p, e in self.end.items()}

    def start_offsets(self) -> dict[TopicPartition, int]:
        return {TopicPartition(self.topic, p): s for p, s in self.start.items()}


def _select(args: SliceArgs, parts: list[int]) -> list[int]:
    listed: set[int] = set()
    for given, other_is_time in (
        (args.from_offsets, args.to_time_ms is not None),
        (args.to_offsets, args.from_time_ms is not None),
    ):
        if given is not None:
            unknown = sorted(set(given) - set(parts))
            if unknown:
                raise ConfigError(f"topic {args.topic!r} has no partition(s) {unknown} (it has {parts})")
            if other_is_time:
                return parts
            listed |= set(given)
    return sorted(listed) if listed else parts


async def resolve_slice(kafka: KafkaSettings, args: SliceArgs) -> ResolvedSlice:
    """Resolve ``args`` into offsets (see the module docstring). Raises :class:`KafkaError`."""
    parts = await partitions(kafka, args.topic)
    selected = _select(args, parts)
    consumer = make_consumer(kafka, group_id=None)
    try:
        await consumer.start()
        ktps = {p: KafkaTP(args.topic, p) for p in parts}
        first: dict[int, int] = {
            k.partition: v for k, v in (await consumer.beginning_offsets(list(ktps.values()))).items()
        }
        last: dict[int, int] = {k.partition: v for k, v in (await consumer.end_offsets(list(ktps.values()))).items()}

        async def by_time(ms: int) -> dict[int, int | None]:
            found = await consumer.offsets_for_times({ktps[p]: ms for p in parts})
            return {k.partition: (None if v is None else int(v.offset)) for k, v in found.items()}

        from_t = await by_time(args.from_time_ms) if args.from_time_ms is not None else {}
        to_t = await by_time(args.to_time_ms) if args.to_time_ms is not None else {}
    except KafkaError:
        raise
    except Exception as exc:  # aiokafka's errors, translated at this edge
        raise KafkaError(f"resolving the backfill slice of {args.topic!r} failed: {exc!r}") from exc
    finally:
        await consumer.stop()

    def clamp(p: int, off: int) -> int:
        return min(max(off, first[p]), last[p])

    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for p in parts:
        if p not in selected:
            start[p] = end[p] = last[p]
            continue
        if args.to_offsets is not None:
            e = clamp(p, args.to_offsets.get(p, last[p]))
        elif args.to_time_ms is not None:
            found = to_t.get(p)
            e = last[p] if found is None else clamp(p, found)
        else:
            e = last[p]
        if args.from_offsets is not None:
            s = clamp(p, args.from_offsets.get(p, first[p]))
        elif args.from_time_ms is not None:
            found = from_t.get(p)
            s = last[p] if found is None else clamp(p, found)
        else:
            s = first[p]
        start[p], end[p] = min(s, e), e
    return ResolvedSlice(args.topic, start, end)


# -- state file ----------------------------------------------------------------------------------


def _state_path(state_dir: Path, group: str) -> Path:
    return state_dir / (re.sub(r"[^A-Za-z0-9._-]", "_", group) + ".json")


def _load_state(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"backfill state file {path} is unreadable ({exc}); delete it or pass --restart") from exc
    if data.get("version") != _STATE_VERSION:
        raise ConfigError(f"backfill state file {path} has an unknown version; delete it or pass --restart")
    return data


def _save_state(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _slice_from_state(data: Mapping[str, Any]) -> ResolvedSlice:
    return ResolvedSlice(
        str(data["topic"]),
        {int(p): int(o) for p, o in data["start"].items()},
        {int(p): int(o) for p, o in data["end"].items()},
    )


# -- consumer group ------------------------------------------------------------------------------


async def commit_start_offsets(
    kafka: KafkaSettings, group: str, slice_: ResolvedSlice, *, overwrite: bool = False
) -> dict[int, int]:
    """Commit ``start`` in ``group`` for every partition without a commit (every partition when
    ``overwrite``). Returns the group's committed offsets afterwards. Raises :class:`KafkaError`."""
    consumer = make_consumer(kafka, group_id=group)
    try:
        await consumer.start()
        ktps = {p: KafkaTP(slice_.topic, p) for p in slice_.start}
        consumer.assign(list(ktps.values()))
        committed: dict[int, int] = {}
        to_commit: dict[Any, int] = {}
        for p, ktp in ktps.items():
            current = None if overwrite else await consumer.committed(ktp)
            if current is None:
                to_commit[ktp] = slice_.start[p]
                committed[p] = slice_.start[p]
            else:
                committed[p] = int(current)
        if to_commit:
            await consumer.commit(to_commit)
        return committed
    except Exception as exc:  # aiokafka's errors, translated at this edge
        raise KafkaError(f"preparing backfill group {group!r} failed: {exc!r}") from exc
    finally:
        await consumer.stop()


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


# -- the backfill --------------------------------------------------------------------------------


class Backfill:
    """One backfill of ``args.topic``. Use :meth:`prepare` (optional; :meth:`run` calls it), then
    :meth:`run`; :meth:`request_stop` drains, commits and returns (resume later with the same args).
    ``worker`` exists once :meth:`prepare` returned (install metrics on it before :meth:`run`)."""

    def __init__(
        self,
        settings: Settings,
        hbase: HBaseClient,
        args: SliceArgs,
        *,
        group: str | None = None,
        rate: float | None = None,
        state_dir: Path | None = None,
        restart: bool = False,
    ) -> None:
        if rate is not None and rate <= 0:
            raise ConfigError(f"rate must be > 0 events/s, got {rate}")
        self.settings = throttled_settings(settings, rate)
        self.hbase = hbase
        self.args = args
        self.group = group or default_group(settings, args)
        self.rate = rate
        self.state_path = _state_path(state_dir or default_state_dir(), self.group)
        self.restart = restart
        self.throttle = Throttle(rate) if rate is not None else None
        self.slice: ResolvedSlice | None = None
        self.worker: Worker | None = None
        self.resumed = False
        self.already_complete = False
        self._state: dict[str, Any] = {}
        self._stop_requested = False

    def __repr__(self) -> str:
        return f"Backfill(group={self.group!r}, topic={self.args.topic!r}, rate={self.rate}, slice={self.slice})"

    async def prepare(self) -> ResolvedSlice:
        """Load or resolve the slice, commit start offsets where the group has none, build the
        worker."""
        if self.slice is not None:
            return self.slice
        stored = None if self.restart else _load_state(self.state_path)
        if stored is not None and stored.get("args") != self.args.canonical():
            raise ConfigError(
                f"consumer group {self.group!r} already holds a backfill of other arguments "
                f"({self.state_path.name}); use another --group, or --restart to replace it"
            )
        if stored is None:
            resolved = await resolve_slice(self.settings.kafka, self.args)
            stored = {
                "version": _STATE_VERSION,
                "group": self.group,
                "topic": resolved.topic,
                "args": self.args.canonical(),
                "start": {str(p): o for p, o in resolved.start.items()},
                "end": {str(p): o for p, o in resolved.end.items()},
                "resolved_at": datetime.now(UTC).isoformat(),
                "completed": False,
            }
            _save_state(self.state_path, stored)
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
        self.slice = _slice_from_state(stored)
        self.already_complete = bool(stored.get("completed"))
        if not self.already_complete:
            committed = await commit_start_offsets(self.settings.kafka, self.group, self.slice, overwrite=self.restart)
            self.resumed = self.resumed and any(committed[p] > self.slice.start[p] for p in committed)
        self.worker = Worker(
            self.settings,
            self.hbase,
            group_id=self.group,
            topics=[self.args.topic],
            stop_at=self.slice.stop_at(),
            start_offsets=self.slice.start_offsets(),
            rate_limit=self.throttle,
        )
        if self._stop_requested:
            self.worker.request_stop()
        return self.slice

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
        )

    def _mark_completed(self) -> None:
        if self._state and not self._state.get("completed"):
            self._state["completed"] = True
            self._state["completed_at"] = datetime.now(UTC).isoformat()
            _save_state(self.state_path, self._state)
