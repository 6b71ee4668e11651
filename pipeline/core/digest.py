"""Bounded logging of warnings that repeat per event (dead letters, offsets never delivered): a log an
operator can live with when a topic holds thousands of bad records.

Contract of :class:`LogDigest`: per key (e.g. ``dead_lettered/undecodable``), the first occurrence in
an interval is logged in full (:meth:`LogDigest.note` says so); later ones in the same interval are
only counted. :meth:`LogDigest.due` returns, once the interval has passed, one :class:`Digest` per key
with the number of occurrences not logged and the first of them as a sample; :meth:`LogDigest.drain`
returns them all at once (when stopping). At most ``1 + 1`` lines per key per interval, whatever the
rate. Pure: the caller passes the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Digest", "LogDigest"]


@dataclass(frozen=True, slots=True)
class Digest:
    """``count`` occurrences of ``key`` were not logged in ``[since, until)``; ``sample`` is the first."""

    key: str
    count: int
    sample: Mapping[str, Any]
    since: float
    until: float


@dataclass
class _Window:
    since: float
    logged: bool = False
    count: int = 0
    sample: Mapping[str, Any] = field(default_factory=dict)


class LogDigest:
    def __init__(self, interval_s: float = 10.0) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.interval_s = interval_s
        self._windows: dict[str, _Window] = {}

    def __repr__(self) -> str:
        return f"LogDigest(interval_s={self.interval_s}, keys={sorted(self._windows)})"

    def note(self, key: str, sample: Mapping[str, Any], now: float) -> bool:
        """One occurrence of ``key``; True when the caller should log it in full."""
        w = self._windows.get(key)
        if w is None or (now - w.since >= self.interval_s and not w.count):
            self._windows[key] = _Window(now, logged=True)
            return True
        if not w.count:
            w.sample = dict(sample)
        w.count += 1
        return False

    def due(self, now: float) -> list[Digest]:
        """Digests of the keys whose interval has passed with occurrences not logged."""
        out = []
        for key, w in list(self._windows.items()):
            if now - w.since < self.interval_s:
                continue
            if w.count:
                out.append(Digest(key, w.count, w.sample, w.since, now))
                self._windows[key] = _Window(now)  # the next occurrence is counted, not logged: still busy
            else:
                del self._windows[key]  # quiet for a whole interval: the next one is logged in full
        return out

    def drain(self, now: float) -> list[Digest]:
        """Every pending digest, whatever the interval (when stopping)."""
        out = [Digest(key, w.count, w.sample, w.since, now) for key, w in self._windows.items() if w.count]
        self._windows.clear()
        return out
