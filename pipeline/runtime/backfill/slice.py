"""The backfill's arguments and their resolution into a slice of Kafka offsets.

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

How a resolved slice is stored and resumed: :mod:`pipeline.runtime.backfill.state`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pipeline.core.model import TopicPartition
from pipeline.errors import ConfigError
from pipeline.ports import Broker
from pipeline.settings import Settings

__all__ = [
    "ResolvedSlice",
    "SliceArgs",
    "default_group",
    "parse_offsets",
    "parse_time",
    "resolve_slice",
]


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
        if self.from_offsets is not None and self.to_offsets is not None:
            reversed_ = {p: (o, self.to_offsets[p]) for p, o in sorted(self.from_offsets.items())
                         if p in self.to_offsets and self.to_offsets[p] < o}
            if reversed_:
                shown = ", ".join(f"partition {p}: {a} > {b}" for p, (a, b) in reversed_.items())
                raise ConfigError(f"the end offsets must not be before the start offsets ({shown})")

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
    """``<group_id>.backfill.<topic>.<digest>``: the same arguments always name the same group."""
    return f"{settings.kafka.group_id}.backfill.{args.topic}.{args.digest()}"


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


async def resolve_slice(kafka: Broker, args: SliceArgs) -> ResolvedSlice:
    """Resolve ``args`` into offsets (see the module docstring). Raises :class:`~pipeline.errors.KafkaError`."""
    parts = await kafka.partitions(args.topic)
    selected = _select(args, parts)
    tps = [TopicPartition(args.topic, p) for p in parts]
    async with kafka.offset_reader() as reader:
        first = {tp.partition: off for tp, off in (await reader.log_offsets(tps, "start")).items()}
        last = {tp.partition: off for tp, off in (await reader.log_offsets(tps, "end")).items()}

        async def by_time(ms: int) -> dict[int, int | None]:
            return {tp.partition: off for tp, off in (await reader.offsets_for_time(tps, ms)).items()}

        from_t = await by_time(args.from_time_ms) if args.from_time_ms is not None else None
        to_t = await by_time(args.to_time_ms) if args.to_time_ms is not None else None

    def bound(p: int, offsets: Mapping[int, int] | None, by_time: dict[int, int | None] | None,
              default: int) -> int:
        """One end of partition ``p``'s slice: a given offset or the first at a time (no record at
        or after the time: the log end), clamped into the log; ``default`` when neither is given."""
        if offsets is not None:
            off = offsets.get(p, default)
        elif by_time is not None:
            found = by_time.get(p)
            off = last[p] if found is None else found
        else:
            return default
        return min(max(off, first[p]), last[p])

    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for p in parts:
        if p not in selected:
            start[p] = end[p] = last[p]
            continue
        e = bound(p, args.to_offsets, to_t, last[p])
        s = bound(p, args.from_offsets, from_t, first[p])
        start[p], end[p] = min(s, e), e
    return ResolvedSlice(args.topic, start, end)
