"""A worker's per-partition progress, without Kafka: where reading stands, what is in hand, what is
done and committed, what was skipped, when a bounded run is complete, and when to pause fetching.

Decide, then do I/O: every method is pure bookkeeping; the worker performs what they return (seeks,
commits, pauses). :class:`~pipeline.core.ingest.offsets.OffsetTracker` keeps the acknowledgements; this
object owns the rest.

Per assigned partition it holds:

- ``next``: the offset reading should deliver next (known once a committed offset, a start offset
  or a first record says so). A delivered record beyond it means Kafka never delivered
  ``[next, record)`` (retention, compaction, transaction markers): those offsets are *skipped*.
- *in hand*: a fetch of the partition is being routed: the consumer's position is past records not
  yet registered with the tracker, so the position says nothing about what was written.
- ``committed``: the last offset committed (next offset to read).
- ``stop``: for bounded runs, the end offset (exclusive); the run is *done* when every partition with
  a non-empty range has committed up to its stop.

Flow control is one in-flight byte budget: :meth:`Progress.add_in_flight` /
:meth:`Progress.release_in_flight`; fetching pauses at the budget and resumes below half of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pipeline.core.model import TopicPartition

__all__ = ["Progress", "Skip"]


@dataclass(frozen=True, slots=True)
class Skip:
    """Offsets ``[start, end)`` of ``tp`` that Kafka will never deliver."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass
class Progress:
    """``stop_at``: partition -> end offset (exclusive) for a bounded run, else None.
    ``start_offsets``: where to seek a partition that has no committed offset (a backfill's slice).
    ``budget``: in-flight bytes at which fetching pauses (it resumes below half of it)."""

    budget: int
    stop_at: Mapping[TopicPartition, int] | None = None
    start_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    next: dict[TopicPartition, int] = field(default_factory=dict)
    in_hand: set[TopicPartition] = field(default_factory=set)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    skipped: dict[TopicPartition, int] = field(default_factory=dict)
    in_flight: int = 0
    paused: bool = False

    def __repr__(self) -> str:
        return (f"Progress(assigned={len(self.assigned)}, in_hand={len(self.in_hand)}, in_flight={self.in_flight}, "
                f"paused={self.paused}, done={self.done()})")

    # -- assignment ----------------------------------------------------------------------------------

    def assign(self, tp: TopicPartition, committed: int | None) -> int | None:
        """``tp`` was assigned with the group's ``committed`` offset (None: no commit). Returns the
        offset to seek to (a start offset for a partition without a commit), or None: read from the
        commit, or from where Kafka's reset policy says (``next`` unknown until the first record)."""
        self.assigned.add(tp)
        self.next.pop(tp, None)
        if committed is not None:
            self.committed[tp] = committed
            self.next[tp] = committed
            return None
        start = self.start_offsets.get(tp)
        if start is not None:
            self.next[tp] = start
        return start

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.next.pop(tp, None)
            self.assigned.discard(tp)
            self.in_hand.discard(tp)

    # -- reading -------------------------------------------------------------------------------------

    def stop_of(self, tp: TopicPartition) -> int | None:
        return self.stop_at.get(tp) if self.stop_at else None

    def delivered(self, tp: TopicPartition, first: int) -> Skip | None:
        """A fetch of ``tp`` starts at offset ``first``: the gap before it, if any, is skipped (up to
        the stop offset at most). Call before routing the fetch's records."""
        expected = self.next.get(tp)
        if expected is None or first <= expected:
            return None
        stop = self.stop_of(tp)
        return self.skip(tp, expected, first if stop is None else min(first, stop))

    def read_up_to(self, tp: TopicPartition, last: int) -> None:
        """Records of ``tp`` up to ``last`` (inclusive) were routed."""
        self.next[tp] = last + 1

    def skip(self, tp: TopicPartition, start: int, end: int) -> Skip | None:
        """Count ``[start, end)`` of ``tp`` as never delivered; None when empty."""
        if end <= start:
            return None
        self.skipped[tp] = self.skipped.get(tp, 0) + (end - start)
        self.next[tp] = end
        return Skip(tp, start, end)

    # -- committing ----------------------------------------------------------------------------------

    def committable(self, done: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Of the tracker's committable offsets, those of partitions still assigned."""
        return {tp: off for tp, off in done.items() if tp in self.assigned}

    def stop_candidates(self, busy: Iterable[TopicPartition]) -> list[tuple[TopicPartition, int]]:
        """Partitions of a bounded run that may have reached their stop offset with nothing of them
        pending (``busy``: partitions with registered records not yet done): ask the consumer's
        position of each; :meth:`reached_stop` decides."""
        if not self.stop_at:
            return []
        busy_set = set(busy) | self.in_hand
        return [(tp, end) for tp, end in self.stop_at.items()
                if tp in self.assigned and self.committed.get(tp, -1) < end and tp not in busy_set]

    def reached_stop(self, tp: TopicPartition, end: int, position: int) -> bool | Skip | None:
        """The consumer's ``position`` of ``tp`` reached ``end`` with nothing pending: the partition is
        complete up to ``end`` even if its last offsets were never delivered (they are skipped).
        Returns False when not reached, else the skip (or None when there was no gap)."""
        if position < end or tp in self.in_hand:
            return False
        return self.skip(tp, self.next.get(tp, end), end)

    def mark_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.committed.update(offsets)

    def done(self) -> bool:
        """A bounded run is complete: every partition with a non-empty range committed up to its stop."""
        if self.stop_at is None:
            return False
        return all(self.committed.get(tp, -1) >= end for tp, end in self.stop_at.items() if end > 0)

    def resumable(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Of ``tps``, those that have not committed up to their stop offset (the rest stay paused)."""
        out = []
        for tp in tps:
            stop = self.stop_of(tp)
            if stop is None or self.committed.get(tp, -1) < stop:
                out.append(tp)
        return out

    # -- records in hand --------------------------------------------------------------------------------

    def take_in_hand(self, tps: Iterable[TopicPartition]) -> None:
        """A fetch of ``tps`` is being routed: their fetch position has moved past records not yet
        registered, so it is not progress (:meth:`stop_candidates`, :meth:`reached_stop`) until
        :meth:`release_hand`. A stop or an error part way leaves them in hand."""
        self.in_hand = set(tps)

    def release_hand(self) -> None:
        """The whole fetch is registered (its records are queued or done)."""
        self.in_hand = set()

    # -- flow control --------------------------------------------------------------------------------

    def add_in_flight(self, nbytes: int) -> None:
        self.in_flight += nbytes

    def set_paused(self, paused: bool) -> None:
        """Fetching was paused (True, at the budget) or resumed (False)."""
        self.paused = paused

    def release_in_flight(self, nbytes: int) -> None:
        self.in_flight -= nbytes

    def should_pause(self) -> bool:
        """At or over the budget and not paused yet: pause every assigned partition."""
        return not self.paused and self.in_flight >= self.budget

    def may_resume(self) -> bool:
        """Paused and drained below half the budget: resume (the partitions :meth:`resumable` keeps)."""
        return self.paused and self.in_flight < self.budget // 2

    def over_budget(self) -> bool:
        return self.in_flight >= self.budget
