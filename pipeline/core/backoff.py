"""Exponential backoff with jitter, as a pure function of the attempt number and a random draw.

For retry number ``attempt`` (0 for the first retry) the capped exponential is::

    base = min(max_ms, initial_ms * multiplier ** attempt)

and the delay, with ``rand`` drawn uniformly from ``[0, 1)`` by the caller, is:

- ``Jitter.FULL``:  ``rand * base``                  (uniform in ``[0, base)``)
- ``Jitter.EQUAL``: ``base / 2 + rand * base / 2``   (uniform in ``[base/2, base)``)
- ``Jitter.NONE``:  ``base``

Full jitter spreads competing clients best (AWS Architecture Blog, "Exponential Backoff And
Jitter", 2015); equal jitter guarantees a minimum pause of half the base, which suits a server that
asked us to slow down (region split, RegionTooBusy, "call queue is full").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Backoff", "Jitter"]


class Jitter(Enum):
    FULL = "full"
    EQUAL = "equal"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Backoff:
    """Backoff policy. ``max_attempts`` bounds the number of retries and ``deadline_ms`` the total
    time spent retrying (both optional; None = unbounded).

    Raises ``ValueError`` for ``initial_ms <= 0``, ``max_ms < initial_ms``, ``multiplier < 1``,
    ``max_attempts < 0`` or ``deadline_ms < 0``.
    """

    initial_ms: float
    max_ms: float
    multiplier: float = 2.0
    jitter: Jitter = Jitter.FULL
    max_attempts: int | None = None
    deadline_ms: float | None = None

    def __post_init__(self) -> None:
        if self.initial_ms <= 0:
            raise ValueError(f"initial_ms must be > 0, got {self.initial_ms}")
        if self.max_ms < self.initial_ms:
            raise ValueError(f"max_ms ({self.max_ms}) must be >= initial_ms ({self.initial_ms})")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be >= 1, got {self.multiplier}")
        if self.max_attempts is not None and self.max_attempts < 0:
            raise ValueError(f"max_attempts must be >= 0, got {self.max_attempts}")
        if self.deadline_ms is not None and self.deadline_ms < 0:
            raise ValueError(f"deadline_ms must be >= 0, got {self.deadline_ms}")

    def base_ms(self, attempt: int) -> float:
        """``min(max_ms, initial_ms * multiplier ** attempt)``; no overflow for huge attempts."""
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        try:
            base = self.initial_ms * self.multiplier**attempt
        except OverflowError:
            return self.max_ms
        return min(self.max_ms, base)

    def delay_ms(self, attempt: int, rand: float) -> float:
        """The pause before retry number ``attempt`` (0-based), for ``rand`` in ``[0, 1)``.

        Raises ``ValueError`` for a negative attempt or ``rand`` outside ``[0, 1]``.
        """
        if not 0.0 <= rand <= 1.0:
            raise ValueError(f"rand must be in [0, 1), got {rand}")
        base = self.base_ms(attempt)
        if self.jitter is Jitter.FULL:
            return rand * base
        if self.jitter is Jitter.EQUAL:
            return base / 2 + rand * base / 2
        return base

    def next_delay_ms(self, attempt: int, rand: float, elapsed_ms: float = 0.0) -> float | None:
        """The pause before retry number ``attempt``, or None when the caller should give up.

        Gives up when ``attempt >= max_attempts`` or ``elapsed_ms >= deadline_ms`` (``elapsed_ms``
        is the time since the first try). Otherwise the delay is clipped so that the retry happens
        no later than the deadline.
        """
        if self.max_attempts is not None and attempt >= self.max_attempts:
            return None
        delay = self.delay_ms(attempt, rand)
        if self.deadline_ms is not None:
            remaining = self.deadline_ms - elapsed_ms
            if remaining <= 0:
                return None
            delay = min(delay, remaining)
        return delay
