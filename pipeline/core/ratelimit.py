"""A token bucket that reserves capacity and says how long to wait; time is passed in.

The bucket holds at most ``burst`` tokens and refills at ``rate_per_s`` tokens per second. It starts
full. :meth:`RateLimiter.acquire` always takes the tokens, letting the balance go negative (a
reservation), and returns how long the caller must wait before using them. Later callers queue
behind earlier reservations, so the long-run rate never exceeds ``rate_per_s`` and waiting callers
are served in call order. A request larger than ``burst`` is allowed: it waits until the balance it
leaves behind has been refilled.

The caller sleeps for the returned time and then proceeds; it must not call ``acquire`` again for
the same work, since the tokens are already reserved.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RateLimiter", "RateLimiterStatistics"]


@dataclass(frozen=True, slots=True)
class RateLimiterStatistics:
    """``tokens`` is the balance at the last call (negative: reserved ahead); ``acquired`` counts
    tokens handed out and ``waited_s`` the total wait returned."""

    tokens: float
    acquired: float
    waited_s: float


class RateLimiter:
    """Token bucket with ``rate_per_s > 0`` and ``burst >= 1`` (``ValueError`` otherwise)."""

    __slots__ = ("_acquired", "_last_s", "_tokens", "_waited_s", "burst", "rate_per_s")

    def __init__(self, rate_per_s: float, burst: int) -> None:
        if rate_per_s <= 0:
            raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._tokens = float(burst)
        self._last_s: float | None = None
        self._acquired = 0.0
        self._waited_s = 0.0

    def __repr__(self) -> str:
        return (
            f"RateLimiter(rate_per_s={self.rate_per_s}, burst={self.burst}, "
            f"tokens={self._tokens:.1f})"
        )

    def _refill(self, now_s: float) -> None:
        # A clock that goes backwards refills nothing rather than draining the bucket.
        if self._last_s is not None and now_s > self._last_s:
            self._tokens = min(
                float(self.burst), self._tokens + (now_s - self._last_s) * self.rate_per_s
            )
        if self._last_s is None or now_s > self._last_s:
            self._last_s = now_s

    def acquire(self, n: float, now_s: float) -> float:
        """Reserve ``n >= 0`` tokens at ``now_s`` and return the seconds to wait (0.0: go now)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self._refill(now_s)
        self._tokens -= n
        self._acquired += n
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.rate_per_s
        self._waited_s += wait
        return wait

    def try_acquire(self, n: float, now_s: float) -> bool:
        """Take ``n`` tokens only if they are available now without waiting."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self._refill(now_s)
        if self._tokens < n:
            return False
        self._tokens -= n
        self._acquired += n
        return True

    def available(self, now_s: float) -> float:
        """The token balance at ``now_s`` (negative while reservations are outstanding)."""
        self._refill(now_s)
        return self._tokens

    def statistics(self) -> RateLimiterStatistics:
        return RateLimiterStatistics(
            tokens=self._tokens, acquired=self._acquired, waited_s=self._waited_s
        )
