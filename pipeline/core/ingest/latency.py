"""End-to-end latency of records: from a record's Kafka timestamp to the moment it is *done*.

A record is done when HBase acknowledged every write derived from it *and* every earlier record of
its partition is done: the moment its offset becomes committable (:class:`~pipeline.core.ingest.
offsets.OffsetTracker`). This is the latency a consumer of the table sees for an event produced at
its Kafka timestamp, plus the wait behind earlier records of the partition; it is never below the
latency to the acknowledgement of the record's own write.

Cost: the worker hands over each fetched run of a partition once (its last offset and its records'
timestamps); :meth:`DoneLatency.settle` compares the head run of each partition with the committable
offset after each acknowledged batch. Per record that is one timestamp read and a share of one sort;
per finished run, one binary search per bucket bound. No per-record Python loop.

Timestamps are milliseconds since the epoch (Kafka's ``CreateTime`` or ``LogAppendTime``); the
clock is the worker's wall clock, so a producer clock ahead of it gives latencies clamped at 0.
Records with no timestamp (``-1`` or ``None``, from very old message formats) are not counted.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise

from pipeline.core.model import TopicPartition

__all__ = ["DEFAULT_BOUNDS_MS", "DoneLatency", "LatencyHistogram"]

#: upper bounds (ms, inclusive) of the exported buckets; a last ``+Inf`` bucket is implied
DEFAULT_BOUNDS_MS: tuple[int, ...] = (5, 10, 25, 50, 100, 150, 200, 250, 300, 400, 500, 750, 1000, 1500,
                                      2000, 3000, 5000, 10_000, 30_000, 60_000)


class LatencyHistogram:
    """Cumulative counts of latencies (ms) at or below each bound, their count and sum.

    ``cumulative[i]`` counts latencies ``<= bounds[i]``; ``count`` counts all (the ``+Inf`` bucket).
    Bounds are strictly increasing positive integers.
    """

    __slots__ = ("bounds", "count", "cumulative", "sum_ms")

    def __init__(self, bounds: Sequence[int] = DEFAULT_BOUNDS_MS) -> None:
        if not bounds or any(b <= a for a, b in pairwise(bounds)) or bounds[0] <= 0:
            raise ValueError(f"latency bounds must be positive and strictly increasing, got {list(bounds)[:20]}")
        self.bounds = tuple(bounds)
        self.cumulative = [0] * len(self.bounds)
        self.count = 0
        self.sum_ms = 0

    def __repr__(self) -> str:
        return f"LatencyHistogram(count={self.count}, p50={self.quantile(0.5)}, p99={self.quantile(0.99)})"

    def add_sorted(self, stamps: Sequence[int], now_ms: int) -> None:
        """Count ``now_ms - t`` for each ``t`` of ``stamps`` (ascending), clamped at 0."""
        n = len(stamps)
        if not n:
            return
        cumulative = self.cumulative
        for i, bound in enumerate(self.bounds):
            # latency <= bound  <=>  t >= now - bound
            cumulative[i] += n - bisect_left(stamps, now_ms - bound)
        self.count += n
        if stamps[-1] <= now_ms:
            self.sum_ms += n * now_ms - sum(stamps)
        else:  # a producer clock ahead of ours: those count as 0
            self.sum_ms += sum(now_ms - t for t in stamps if t < now_ms)

    def quantile(self, q: float) -> int | None:
        """The smallest bound with at least ``q`` of the latencies at or below it (an upper estimate);
        None when empty or when the quantile lies above the last bound."""
        if not self.count:
            return None
        need = q * self.count
        for bound, seen in zip(self.bounds, self.cumulative, strict=True):
            if seen >= need:
                return bound
        return None


class DoneLatency:
    """Feeds a :class:`LatencyHistogram` with each record's latency to done, run by run.

    ``note_run(tp, last_offset, stamps)`` once per fetched run of ``tp`` (in offset order, after the
    run's records were registered with the tracker); ``settle(committable, now_ms)`` after each
    acknowledged batch, where ``committable(tp)`` gives the tracker's next committable offset of
    ``tp`` (or None). ``forget(tp)`` on revocation drops the partition's unfinished runs.
    """

    __slots__ = ("_runs", "histogram")

    def __init__(self, histogram: LatencyHistogram | None = None) -> None:
        self.histogram = histogram if histogram is not None else LatencyHistogram()
        self._runs: dict[TopicPartition, deque[tuple[int, list[int]]]] = {}

    def __repr__(self) -> str:
        return f"DoneLatency(partitions={len(self._runs)}, {self.histogram!r})"

    def note_run(self, tp: TopicPartition, last_offset: int, stamps: Iterable[int | None]) -> None:
        kept = sorted(t for t in stamps if t is not None and t >= 0)
        if not kept:
            return
        runs = self._runs.get(tp)
        if runs is None:
            runs = self._runs[tp] = deque()
        runs.append((last_offset, kept))

    def settle(self, committable: Callable[[TopicPartition], int | None], now_ms: int) -> None:
        add = self.histogram.add_sorted
        for tp, runs in self._runs.items():
            if not runs:
                continue
            nxt = committable(tp)
            if nxt is None:
                continue
            while runs and runs[0][0] < nxt:
                add(runs.popleft()[1], now_ms)

    def forget(self, tp: TopicPartition) -> None:
        self._runs.pop(tp, None)
