"""Sliding-window write counts per key (region name or bucket) and the skew they show.

The window is cut into ``buckets`` slots of ``window_s / buckets`` seconds, aligned on multiples of
the slot width (slot ``i`` covers ``[i * width, (i + 1) * width)``). A query at ``now_s`` counts the
slot holding ``now_s`` and the ``buckets - 1`` slots before it, so a write stops counting between
``window_s - width`` and ``window_s`` seconds after it was recorded.

Skew is ``max / mean`` of the per-key counts: 1.0 is perfectly even; with ``n`` keys, ``n`` means
every write went to one key; 0.0 means nothing was written in the window.

Time is passed in (seconds). It must not go backwards: a smaller ``now_s`` than one seen before is
treated as the latest value seen.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["SkewWindow"]


@dataclass(slots=True)
class _Slot:
    index: int
    counts: dict[str, int]


class SkewWindow:
    """Write counts per key over a sliding window. Raises ``ValueError`` for ``window_s <= 0`` or
    ``buckets < 1``."""

    __slots__ = ("_latest", "_slots", "_totals", "buckets", "width_s", "window_s")

    def __init__(self, window_s: float, buckets: int) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        self.window_s = window_s
        self.buckets = buckets
        self.width_s = window_s / buckets
        self._slots: deque[_Slot] = deque()
        self._totals: dict[str, int] = {}
        self._latest: int | None = None

    def __repr__(self) -> str:
        return (
            f"SkewWindow(window_s={self.window_s}, buckets={self.buckets}, "
            f"keys={len(self._totals)})"
        )

    def _advance(self, now_s: float) -> int:
        index = math.floor(now_s / self.width_s)
        if self._latest is not None and index < self._latest:
            index = self._latest
        self._latest = index
        oldest_kept = index - self.buckets + 1
        slots = self._slots
        totals = self._totals
        while slots and slots[0].index < oldest_kept:
            for key, n in slots.popleft().counts.items():
                left = totals[key] - n
                if left:
                    totals[key] = left
                else:
                    del totals[key]
        return index

    def record(self, key: str, rows: int, now_s: float) -> None:
        """Count ``rows >= 0`` writes to ``key`` at ``now_s``."""
        self.record_many({key: rows}, now_s)

    def record_many(self, rows: Mapping[str, int], now_s: float) -> None:
        """Count ``rows[key] >= 0`` writes to each key at ``now_s`` (a batch's rows per region: the
        window advances once for all of them)."""
        if any(n < 0 for n in rows.values()):
            raise ValueError(f"rows must be >= 0, got {min(rows.values())}")
        index = self._advance(now_s)
        if not any(rows.values()):
            return
        slots = self._slots
        if not slots or slots[-1].index != index:
            slots.append(_Slot(index, {}))
        counts = slots[-1].counts
        totals = self._totals
        for key, n in rows.items():
            if n:
                counts[key] = counts.get(key, 0) + n
                totals[key] = totals.get(key, 0) + n

    def counts(self, now_s: float) -> dict[str, int]:
        """Writes per key in the window ending at ``now_s`` (keys with no writes are absent)."""
        self._advance(now_s)
        return dict(self._totals)

    def total(self, now_s: float) -> int:
        """All writes in the window ending at ``now_s``."""
        self._advance(now_s)
        return sum(self._totals.values())

    def skew(self, now_s: float, population: Iterable[str] | None = None) -> float:
        """``max / mean`` of writes per key in the window; 0.0 when nothing was written.

        Without ``population`` the mean is over keys that were written. With it, the mean is over
        the union of ``population`` and the written keys, so idle keys (regions that got nothing)
        pull the mean down and the skew up.
        """
        self._advance(now_s)
        totals = self._totals
        written = sum(totals.values())
        if written == 0:
            return 0.0
        n = len(totals)
        if population is not None:
            n += sum(1 for key in set(population) if key not in totals)
        return max(totals.values()) * n / written

    def hottest(self, now_s: float) -> tuple[str, float] | None:
        """The key with the most writes in the window and its share of all writes (0..1], or None
        when nothing was written. Ties go to the smallest key."""
        self._advance(now_s)
        totals = self._totals
        if not totals:
            return None
        key = min(totals, key=lambda k: (-totals[k], k))
        return key, totals[key] / sum(totals.values())
