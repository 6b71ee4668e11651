"""The latency to done: bucket counts by binary search against a per-record count, and the runs
released only when the partition's watermark passes them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.ingest.latency import DEFAULT_BOUNDS_MS, DoneLatency, LatencyHistogram
from pipeline.core.model import TopicPartition

TP = TopicPartition("t", 0)


def _reference(stamps: list[int], now: int, bounds: tuple[int, ...]) -> tuple[list[int], int]:
    latencies = [max(now - t, 0) for t in stamps]
    return [sum(1 for x in latencies if x <= b) for b in bounds], sum(latencies)


@given(st.lists(st.integers(0, 200_000), max_size=300), st.integers(0, 200_000))
def test_buckets_and_sum_match_a_count_per_record(stamps: list[int], now: int) -> None:
    h = LatencyHistogram()
    h.add_sorted(sorted(stamps), now)
    cumulative, total = _reference(stamps, now, DEFAULT_BOUNDS_MS)
    assert h.cumulative == cumulative
    assert h.sum_ms == total
    assert h.count == len(stamps)


def test_quantile_is_the_smallest_bound_holding_the_share() -> None:
    h = LatencyHistogram((10, 100, 1000))
    h.add_sorted(sorted([1000 - 5] * 98 + [1000 - 50, 1000 - 500]), 1000)
    assert h.quantile(0.5) == 10
    assert h.quantile(0.99) == 100
    assert h.quantile(1.0) == 1000
    h.add_sorted([0], 5000)  # 5 s: above the last bound
    assert h.quantile(1.0) is None
    assert LatencyHistogram().quantile(0.5) is None


@pytest.mark.parametrize("bounds", [(), (0, 5), (5, 5), (10, 5)])
def test_bad_bounds_are_refused(bounds: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        LatencyHistogram(bounds)


def test_a_run_counts_once_the_watermark_passes_its_last_offset() -> None:
    d = DoneLatency(LatencyHistogram((10, 100, 1000)))
    d.note_run(TP, 9, [1000 + i for i in range(10)])
    d.note_run(TP, 19, [2000 + i for i in range(10)])
    d.settle(lambda tp: None, 2100)  # nothing done yet
    d.settle(lambda tp: 9, 2100)  # offset 9 is not done: the first run waits
    assert d.histogram.count == 0
    d.settle(lambda tp: 10, 2000)
    assert d.histogram.count == 10
    assert d.histogram.cumulative == [0, 0, 10]  # 991..1000 ms
    d.settle(lambda tp: 20, 2050)
    assert d.histogram.count == 20
    assert d.histogram.cumulative == [0, 10, 20]  # 41..50 ms


def test_missing_timestamps_are_not_counted_and_forget_drops_runs() -> None:
    d = DoneLatency()
    d.note_run(TP, 2, [-1, None, 100])
    d.note_run(TP, 3, [-1])  # nothing to count: no run kept
    d.note_run(TopicPartition("t", 1), 5, [100])
    d.forget(TopicPartition("t", 1))
    d.settle(lambda tp: 100, 150)
    assert d.histogram.count == 1
    assert d.histogram.sum_ms == 50
