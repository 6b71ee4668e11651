from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.skew import SkewWindow


def test_counts_within_window_and_expiry() -> None:
    w = SkewWindow(window_s=10, buckets=10)
    w.record("r1", 5, now_s=0.5)
    w.record("r2", 3, now_s=4.2)
    w.record("r1", 1, now_s=9.9)
    assert w.counts(9.9) == {"r1": 6, "r2": 3}
    assert w.total(9.9) == 9
    # slot [0, 1) leaves the window once the query reaches slot 10.
    assert w.counts(10.0) == {"r1": 1, "r2": 3}
    assert w.counts(13.9) == {"r1": 1, "r2": 3}
    assert w.counts(14.0) == {"r1": 1}
    assert w.counts(100.0) == {}


def test_skew_and_hottest() -> None:
    w = SkewWindow(window_s=60, buckets=6)
    assert w.skew(0) == 0.0
    assert w.hottest(0) is None
    w.record("a", 30, 1)
    w.record("b", 10, 2)
    assert w.skew(3) == pytest.approx(30 / 20)
    # With a population, idle regions count in the mean.
    assert w.skew(3, population=["a", "b", "c", "d"]) == pytest.approx(30 / 10)
    assert w.skew(3, population=["a"]) == pytest.approx(30 / 20)  # written keys always count
    assert w.hottest(3) == ("a", 0.75)
    w.record("b", 20, 4)
    assert w.skew(5) == pytest.approx(1.0)
    assert w.hottest(5) == ("a", 0.5)  # ties go to the smallest key


def test_zero_rows_and_backwards_clock() -> None:
    w = SkewWindow(window_s=10, buckets=2)
    w.record("a", 0, 1)
    assert w.counts(1) == {}
    w.record("a", 2, 8)
    w.record("b", 1, 3)  # treated as the latest time seen
    assert w.counts(8) == {"a": 2, "b": 1}
    assert w.counts(14.9) == {"a": 2, "b": 1}
    assert w.counts(15) == {}
    with pytest.raises(ValueError, match="rows must be >= 0"):
        w.record("a", -1, 10)
    with pytest.raises(ValueError, match="window_s must be > 0"):
        SkewWindow(0, 1)
    with pytest.raises(ValueError, match="buckets must be >= 1"):
        SkewWindow(1, 0)
    assert "keys=0" in repr(w)


events = st.lists(
    st.tuples(
        st.sampled_from(["r0", "r1", "r2", "r3"]),
        st.integers(min_value=0, max_value=50),
        st.floats(min_value=0, max_value=7, allow_nan=False),
    ),
    max_size=60,
)


@given(events=events, window=st.sampled_from([1.0, 5.0, 30.0]), buckets=st.integers(1, 12))
def test_property_matches_brute_force(
    events: list[tuple[str, int, float]], window: float, buckets: int
) -> None:
    w = SkewWindow(window, buckets)
    width = window / buckets
    now = 0.0
    log: list[tuple[str, int, int]] = []
    for key, rows, step in events:
        now += step
        w.record(key, rows, now)
        log.append((key, rows, math.floor(now / width)))
        current = math.floor(now / width)
        expected: dict[str, int] = {}
        for k, n, slot in log:
            if slot > current - buckets and n:
                expected[k] = expected.get(k, 0) + n
        assert w.counts(now) == expected
        total = sum(expected.values())
        skew = w.skew(now, population=["r0", "r1", "r2", "r3"])
        if total == 0:
            assert skew == 0.0
            assert w.hottest(now) is None
        else:
            assert skew == pytest.approx(max(expected.values()) * 4 / total)
            assert 1.0 - 1e-9 <= skew <= 4.0 + 1e-9
            hot = w.hottest(now)
            assert hot is not None
            assert expected[hot[0]] == max(expected.values())
            assert hot[1] == pytest.approx(expected[hot[0]] / total)


@given(st.lists(st.tuples(st.dictionaries(st.sampled_from("abcde"), st.integers(0, 9), max_size=5),
                          st.floats(0, 5)), max_size=30))
def test_record_many_matches_brute_force(batches: list[tuple[dict[str, int], float]]) -> None:
    w = SkewWindow(window_s=3, buckets=3)  # 1 s slots: a count stays while its slot is one of the last 3
    now = 0.0
    log: list[tuple[str, int, int]] = []
    for rows, step in batches:
        now += step
        w.record_many(rows, now)
        log += [(key, n, math.floor(now)) for key, n in rows.items()]
        expected: dict[str, int] = {}
        for key, n, slot in log:
            if slot > math.floor(now) - 3 and n:
                expected[key] = expected.get(key, 0) + n
        assert w.counts(now) == expected
    assert w.counts(now + 3) == {}


def test_record_many_refuses_negative_rows() -> None:
    w = SkewWindow(window_s=3, buckets=3)
    with pytest.raises(ValueError, match="-1"):
        w.record_many({"a": 2, "b": -1}, 0)
    assert w.counts(0) == {}
