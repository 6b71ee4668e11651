from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.backoff import Backoff, Jitter


def test_base_grows_then_caps() -> None:
    b = Backoff(initial_ms=100, max_ms=1000)
    assert [b.base_ms(a) for a in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert b.base_ms(100_000) == 1000  # no OverflowError


def test_jitter_modes() -> None:
    full = Backoff(100, 1000, jitter=Jitter.FULL)
    equal = Backoff(100, 1000, jitter=Jitter.EQUAL)
    none = Backoff(100, 1000, jitter=Jitter.NONE)
    assert full.delay_ms(2, 0.0) == 0
    assert full.delay_ms(2, 0.5) == 200
    assert equal.delay_ms(2, 0.0) == 200
    assert equal.delay_ms(2, 0.5) == 300
    assert none.delay_ms(2, 0.7) == 400


def test_multiplier_and_validation() -> None:
    assert Backoff(10, 1000, multiplier=3).base_ms(2) == 90
    assert Backoff(10, 10, multiplier=1).base_ms(50) == 10
    for kwargs in (
        {"initial_ms": 0, "max_ms": 1},
        {"initial_ms": 10, "max_ms": 5},
        {"initial_ms": 1, "max_ms": 5, "multiplier": 0.5},
        {"initial_ms": 1, "max_ms": 5, "max_attempts": -1},
        {"initial_ms": 1, "max_ms": 5, "deadline_ms": -1},
    ):
        with pytest.raises(ValueError, match="must be"):
            Backoff(**kwargs)
    b = Backoff(1, 5)
    with pytest.raises(ValueError, match="rand"):
        b.delay_ms(0, 1.5)
    with pytest.raises(ValueError, match="attempt"):
        b.delay_ms(-1, 0.5)


def test_next_delay_gives_up_on_attempts_and_deadline() -> None:
    b = Backoff(100, 1000, jitter=Jitter.NONE, max_attempts=3, deadline_ms=1000)
    assert b.next_delay_ms(0, 0.5) == 100
    assert b.next_delay_ms(2, 0.5, elapsed_ms=100) == 400
    assert b.next_delay_ms(3, 0.5) is None
    assert b.next_delay_ms(2, 0.5, elapsed_ms=800) == 200  # clipped to the deadline
    assert b.next_delay_ms(1, 0.5, elapsed_ms=1000) is None
    unbounded = Backoff(100, 1000)
    assert unbounded.next_delay_ms(10_000, 0.25, elapsed_ms=1e12) == 250


@given(
    attempt=st.integers(min_value=0, max_value=10_000),
    rand=st.floats(min_value=0, max_value=1, exclude_max=True),
    jitter=st.sampled_from(list(Jitter)),
)
def test_property_delay_within_bounds(attempt: int, rand: float, jitter: Jitter) -> None:
    b = Backoff(50, 30_000, jitter=jitter)
    delay = b.delay_ms(attempt, rand)
    base = b.base_ms(attempt)
    assert 0 <= delay <= base <= 30_000
    if jitter is Jitter.EQUAL:
        assert delay >= base / 2
