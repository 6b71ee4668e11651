from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.ratelimit import RateLimiter


def test_burst_then_wait_for_refill() -> None:
    rl = RateLimiter(rate_per_s=10, burst=5)
    assert rl.acquire(5, now_s=0.0) == 0.0
    assert rl.acquire(1, now_s=0.0) == pytest.approx(0.1)
    # The reservation queues the next caller behind the first.
    assert rl.acquire(1, now_s=0.0) == pytest.approx(0.2)
    assert rl.available(0.3) == pytest.approx(1.0)


def test_refill_is_capped_at_burst() -> None:
    rl = RateLimiter(rate_per_s=100, burst=10)
    rl.acquire(10, now_s=0.0)
    assert rl.available(1000.0) == 10
    assert rl.acquire(10, now_s=1000.0) == 0.0


def test_request_larger_than_burst_waits_for_its_debt() -> None:
    rl = RateLimiter(rate_per_s=10, burst=5)
    assert rl.acquire(25, now_s=0.0) == pytest.approx(2.0)
    assert rl.available(2.0) == pytest.approx(0.0)


def test_try_acquire_and_statistics() -> None:
    rl = RateLimiter(rate_per_s=1, burst=2)
    assert rl.try_acquire(2, now_s=0.0)
    assert not rl.try_acquire(1, now_s=0.5)
    assert rl.try_acquire(1, now_s=1.0)
    rl.acquire(1, now_s=1.0)
    stats = rl.statistics()
    assert stats.acquired == 4
    assert stats.waited_s == pytest.approx(1.0)
    assert stats.tokens == pytest.approx(-1.0)
    assert "burst=2" in repr(rl)


def test_clock_going_backwards_does_not_refill_or_drain() -> None:
    rl = RateLimiter(rate_per_s=10, burst=10)
    rl.acquire(10, now_s=5.0)
    assert rl.available(4.0) == 0
    assert rl.available(5.5) == pytest.approx(5.0)


def test_validation() -> None:
    with pytest.raises(ValueError, match="rate_per_s must be > 0"):
        RateLimiter(0, 1)
    with pytest.raises(ValueError, match="burst must be >= 1"):
        RateLimiter(1, 0)
    rl = RateLimiter(1, 1)
    with pytest.raises(ValueError, match="n must be >= 0"):
        rl.acquire(-1, 0)
    with pytest.raises(ValueError, match="n must be >= 0"):
        rl.try_acquire(-1, 0)


@given(
    rate=st.floats(min_value=0.5, max_value=1000),
    burst=st.integers(min_value=1, max_value=100),
    requests=st.lists(
        st.tuples(st.floats(min_value=0, max_value=2), st.integers(min_value=0, max_value=50)),
        min_size=1,
        max_size=50,
    ),
)
def test_property_long_run_rate_is_bounded(
    rate: float, burst: int, requests: list[tuple[float, int]]
) -> None:
    """Callers that each proceed at now + wait never use more than burst + rate * elapsed tokens."""
    rl = RateLimiter(rate, burst)
    now = 0.0
    used = 0
    for step, n in requests:
        now += step
        start = now + rl.acquire(n, now)
        used += n
        assert used <= burst + rate * start + 1e-6 * max(1.0, used)
