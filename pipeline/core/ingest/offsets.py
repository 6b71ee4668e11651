"""At-least-once commit bookkeeping: which Kafka offset may be committed, per partition.

A record may feed several mutations (main table plus index tables), and those mutations travel in
different per-region batches that HBase acknowledges in any order. A record is *done* when every
acknowledgement it was registered with has arrived. The offset to commit for a partition is::

    next = (highest registered N such that N and every registered offset before N are done) + 1

Offsets that were never registered (gaps from compaction, transaction markers, filtered records) do
not block: when every registered record is done, ``next`` is the last registered offset + 1.

The worker's loop, "decide, then do I/O"::

    tracker.register(origin, pending=len(mutations))   # on consume, in offset order
    tracker.ack_many(m.origin for m in batch.mutations) # after HBase acknowledged the batch
    for tp, offset in tracker.committable().items():    # on the commit timer / revoke / shutdown
        await consumer.commit({tp: offset})
        tracker.mark_committed(tp, offset)

Every call is O(1) amortized per record: each partition keeps a deque of registered offsets that are
not yet behind the watermark, plus a dict of the records still waiting for acknowledgements; the
deque's head is compacted as records complete.

Revocation: :meth:`OffsetTracker.forget` drops a partition's state. Acknowledgements that arrive for
it afterwards are ignored (and counted in :attr:`TrackerStatistics.stray_acks`). They cannot be told
apart from acknowledgements for the same offsets once the partition is assigned again and the
records are registered anew, so the caller must settle (await or discard) the in-flight writes of a
revoked partition before it registers records of that partition again.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby, repeat

from pipeline.core.model import Origin, TopicPartition

_TP = operator.attrgetter("tp")
_OFFSET = operator.attrgetter("offset")

__all__ = ["OffsetTracker", "PartitionOffsets", "TrackerStatistics"]


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """A snapshot of one partition's bookkeeping.

    - ``registered`` / ``done``: records registered / completed since the partition state was
      created.
    - ``pending_records``: registered records not yet done; ``pending_acks``: acknowledgements they
      still wait for.
    - ``oldest_pending``: the lowest offset that is not done (it holds back the commit), or None.
    - ``last_registered``: the highest offset registered, or None.
    - ``committable``: the next offset that could be committed now (watermark + 1), or None when no
      record is done yet.
    - ``committed``: the last mark given to :meth:`OffsetTracker.mark_committed`, or None.
    """

    tp: TopicPartition
    registered: int
    done: int
    pending_records: int
    pending_acks: int
    oldest_pending: int | None
    last_registered: int | None
    committable: int | None
    committed: int | None

    @property
    def commit_lag(self) -> int | None:
        """How many offsets the committed mark trails the committable one (None while either is
        unknown). A lag that stays above zero means commits are failing or not being attempted."""
        if self.committable is None or self.committed is None:
            return None
        return max(0, self.committable - self.committed)


@dataclass(frozen=True, slots=True)
class TrackerStatistics:
    """A snapshot of the whole tracker; ``stray_acks`` counts acknowledgements that matched no
    pending record (forgotten partition, unknown or already completed offset)."""

    partitions: dict[TopicPartition, PartitionOffsets]
    pending_records: int
    pending_acks: int
    stray_acks: int


class _Partition:
    """Mutable state of one partition. ``queue`` holds registered offsets, increasing, from the
    first one that is not done onwards (done ones behind it are kept until the head reaches them);
    ``waiting`` maps every offset that is not done to its remaining acknowledgements (> 0)."""

    __slots__ = (
        "committed",
        "done",
        "last_registered",
        "next_offset",
        "pending_acks",
        "queue",
        "registered",
        "waiting",
    )

    def __init__(self) -> None:
        self.queue: deque[int] = deque()
        self.waiting: dict[int, int] = {}
        self.last_registered: int | None = None
        self.next_offset: int | None = None
        self.committed: int | None = None
        self.registered = 0
        self.done = 0
        self.pending_acks = 0

    def compact(self) -> None:
        # Each offset is appended once and popped once: amortized O(1) per record.
        queue = self.queue
        waiting = self.waiting
        last = None
        while queue and queue[0] not in waiting:
            last = queue.popleft()
        if last is not None:
            self.next_offset = last + 1

    def snapshot(self, tp: TopicPartition) -> PartitionOffsets:
        oldest = self.queue[0] if self.queue else None
        return PartitionOffsets(
            tp=tp,
            registered=self.registered,
            done=self.done,
            pending_records=len(self.waiting),
            pending_acks=self.pending_acks,
            oldest_pending=oldest,
            last_registered=self.last_registered,
            committable=self.next_offset,
            committed=self.committed,
        )


class OffsetTracker:
    """Per-partition watermark of records whose every derived write has been acknowledged.

    Not thread-safe; meant to be driven from one event loop.
    """

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._stray_acks = 0

    def __repr__(self) -> str:
        pending = sum(len(p.waiting) for p in self._partitions.values())
        return f"OffsetTracker(partitions={len(self._partitions)}, pending_records={pending})"

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """The partitions the tracker currently holds state for."""
        return frozenset(self._partitions)

    def register(self, origin: Origin, pending: int) -> None:
        """Register the record at ``origin`` expecting ``pending`` acknowledgements.

        Offsets of one partition must be registered in strictly increasing order (gaps are fine).
        ``pending == 0`` marks the record done at once (it fed nothing, or was filtered out).

        Raises ``ValueError`` when ``pending`` is negative or the offset is not above the last one
        registered for that partition.
        """
        if pending < 0:
            raise ValueError(f"pending must be >= 0, got {pending} for {origin.tp}@{origin.offset}")
        part = self._partitions.get(origin.tp)
        if part is None:
            part = self._partitions[origin.tp] = _Partition()
        offset = origin.offset
        if part.last_registered is not None and offset <= part.last_registered:
            raise ValueError(
                f"offsets must be registered in increasing order: {origin.tp}@{offset} "
                f"after {part.last_registered}"
            )
        part.last_registered = offset
        part.registered += 1
        if pending == 0:
            part.done += 1
            if part.queue:
                part.queue.append(offset)
            else:
                part.next_offset = offset + 1
            return
        part.queue.append(offset)
        part.waiting[offset] = pending
        part.pending_acks += pending

    def register_run(self, tp: TopicPartition, offsets: Sequence[int], pending: int) -> None:
        """Register every offset of ``offsets`` of ``tp``, each expecting ``pending``
        acknowledgements: the same state as :meth:`register` called for each in turn, in one step.

        ``offsets`` must increase strictly and start above the last offset registered for ``tp``
        (empty: nothing happens). Raises ``ValueError`` otherwise, or when ``pending`` is negative,
        and then registers nothing.
        """
        if not offsets:
            return
        if pending < 0:
            raise ValueError(f"pending must be >= 0, got {pending} for {tp}@{offsets[0]}")
        part = self._partitions.get(tp)
        if part is None:
            part = self._partitions[tp] = _Partition()
        last = part.last_registered
        if (last is not None and offsets[0] <= last) or any(map(operator.ge, offsets, offsets[1:])):
            raise ValueError(f"offsets must be registered in increasing order: {tp}@{list(offsets)[:20]} "
                             f"after {last}")
        part.last_registered = offsets[-1]
        count = len(offsets)
        part.registered += count
        if pending == 0:
            part.done += count
            if part.queue:
                part.queue.extend(offsets)
            else:
                part.next_offset = offsets[-1] + 1
            return
        part.queue.extend(offsets)
        part.waiting.update(dict.fromkeys(offsets, pending))
        part.pending_acks += pending * count

    def ack(self, origin: Origin) -> bool:
        """Record one acknowledgement for the record at ``origin``.

        Returns True when the acknowledgement applied to a pending record. An acknowledgement for a
        forgotten partition, an unregistered offset or a record already done is ignored, counted in
        ``statistics().stray_acks``, and returns False.
        """
        part = self._partitions.get(origin.tp)
        if part is None:
            self._stray_acks += 1
            return False
        offset = origin.offset
        remaining = part.waiting.get(offset)
        if remaining is None:
            self._stray_acks += 1
            return False
        part.pending_acks -= 1
        if remaining > 1:
            part.waiting[offset] = remaining - 1
            return True
        del part.waiting[offset]
        part.done += 1
        if part.queue[0] == offset:
            part.compact()
        return True

    def ack_many(self, origins: Iterable[Origin]) -> int:
        """Acknowledge each origin once (an origin may repeat); returns how many applied: the same
        state as :meth:`ack` called for each in turn."""
        # a batch's origins come in runs of one partition: per run, C-level steps (map, pop, count)
        # take the common case, where each offset is acknowledged once and that is its last
        # acknowledgement; any other run (a repeat, a stray, an offset awaiting more) is put back and
        # acknowledged one by one. Either way the head is compacted as :meth:`ack` leaves it.
        applied = stray = 0
        partitions = self._partitions
        for tp, run in groupby(origins, _TP):
            offsets = list(map(_OFFSET, run))
            n = len(offsets)
            part = partitions.get(tp)
            if part is None:
                stray += n
                continue
            waiting = part.waiting
            popped = list(map(waiting.pop, offsets, repeat(None)))
            if popped.count(1) == n:
                applied += n
                part.pending_acks -= n
                part.done += n
                queue = part.queue
                if queue and queue[0] not in waiting:
                    part.compact()
                continue
            waiting.update({offset: left for offset, left in zip(offsets, popped, strict=True) if left is not None})
            for offset in offsets:
                remaining = waiting.get(offset)
                if remaining is None:
                    stray += 1
                    continue
                applied += 1
                part.pending_acks -= 1
                if remaining > 1:
                    waiting[offset] = remaining - 1
                    continue
                del waiting[offset]
                part.done += 1
                if part.queue[0] == offset:
                    part.compact()
        self._stray_acks += stray
        return applied

    def committable(self) -> dict[TopicPartition, int]:
        """The next offset to commit, for each partition whose watermark moved past its last
        committed mark (or that has a watermark and no mark yet). Changes no state: call
        :meth:`mark_committed` once the commit succeeded."""
        out: dict[TopicPartition, int] = {}
        for tp, part in self._partitions.items():
            nxt = part.next_offset
            if nxt is not None and (part.committed is None or nxt > part.committed):
                out[tp] = nxt
        return out

    def watermark(self, tp: TopicPartition) -> int | None:
        """The next offset to commit for ``tp`` (every record before it is done), committed or not;
        None when nothing of ``tp`` is done or the tracker holds no state for it."""
        part = self._partitions.get(tp)
        return None if part is None else part.next_offset

    def mark_committed(self, tp: TopicPartition, next_offset: int) -> None:
        """Remember that ``next_offset`` was committed for ``tp`` (Kafka's "next offset to read").

        The mark only moves forward: a lower mark than the current one is ignored, so late commit
        callbacks cannot move it back. May be called for a partition with no registered records
        (for example with the committed position fetched at assignment).
        """
        part = self._partitions.get(tp)
        if part is None:
            part = self._partitions[tp] = _Partition()
        if part.committed is None or next_offset > part.committed:
            part.committed = next_offset

    def forget(self, tp: TopicPartition) -> PartitionOffsets | None:
        """Drop every piece of state for ``tp`` (partition revoked); returns its last snapshot.

        Later acknowledgements for ``tp`` are ignored until records of ``tp`` are registered again.
        """
        part = self._partitions.pop(tp, None)
        return None if part is None else part.snapshot(tp)

    def pending(self, tp: TopicPartition) -> PartitionOffsets | None:
        """A snapshot of ``tp``, or None when the tracker holds no state for it."""
        part = self._partitions.get(tp)
        return None if part is None else part.snapshot(tp)

    def statistics(self) -> TrackerStatistics:
        """A snapshot of every partition plus totals."""
        snaps = {tp: part.snapshot(tp) for tp, part in sorted(self._partitions.items())}
        return TrackerStatistics(
            partitions=snaps,
            pending_records=sum(s.pending_records for s in snaps.values()),
            pending_acks=sum(s.pending_acks for s in snaps.values()),
            stray_acks=self._stray_acks,
        )
