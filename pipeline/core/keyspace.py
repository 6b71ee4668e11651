"""Where a sample of row keys would land: rows per region, skew, key lengths, time-ordered hotspots.

Pure logic: keys, event times and region boundaries in, figures out. The caller builds the keys
(with a compiled rowkey design) and chooses the boundaries (the design's split points, quantiles of
the sample, or a live table's region start keys).

Regions are described by their **boundaries**: the sorted split keys ``b_1 < b_2 < ... < b_k``
(never ``b""``), giving ``k + 1`` regions. Region ``0`` holds ``[b"", b_1)``, region ``i`` holds
``[b_i, b_(i+1))`` and region ``k`` holds ``[b_k, end of table)``: start inclusive, end exclusive,
unsigned byte order, as HBase does (:mod:`pipeline.core.ingest.regions`).

Figures (all counts are exact over the sample; nothing is estimated):

- **rows per region**, **skew** = ``max / mean`` rows per region, the mean taken over *all* regions
  (empty ones included): 1.0 is perfectly even, ``n_regions`` means every key is in one region.
  The **busiest share** is the busiest region's rows over all rows.
- **key length** (bytes): min, p50, p95, max by the nearest-rank method (``p`` = the value at
  1-based rank ``ceil(p/100 * n)`` of the sorted lengths), and how many keys exceed the guides'
  16-byte advice.
- **recent writes** (a time-ordered replay of the sample): sort the rows by event time (ties and
  missing times keep sample order); the *recent window* is the last ``ceil(fraction * n)`` rows
  (``fraction`` 0.1 by default, at least one row) and the *older rows* are all the rows before it.
  Rows without an event time count as the oldest, in sample order.
  ``share`` is the fraction of the window in the region holding the sample's largest key (the region
  that takes the newest writes of a monotonically increasing design). ``beyond_share`` is the
  fraction of the window whose key sorts after every older key: for a time-first design that is
  1.0, so whatever split points were chosen from the past, every new write lands in the last region.
  ``before_share`` is the fraction that sorts before every older key (1.0 for a newest-first design
  such as ``[Long.MAX_VALUE - ts]``, whose new writes all land in the first region), and
  ``busiest_share`` the window's fraction in its busiest region, whichever that is.
  For a well-salted design these figures are close to ``1 / n_regions`` and ``1 / buckets``.
- **recommended buckets** (:func:`recommend_buckets`): the smallest power of two that is at least
  the regions (or region servers) wanted and at least 4, capped at 64 unless a larger cap is asked
  for: enough to keep every server busy, few enough that a read fans out over few scanners.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEY_LENGTH_ADVICE",
    "KeyspaceReport",
    "LengthStats",
    "RecentWrites",
    "analyze_keys",
    "count_per_region",
    "length_stats",
    "percentile",
    "recent_writes",
    "recommend_buckets",
    "region_index",
    "sample_events",
]

#: The guides' advice on row key length, in bytes.
KEY_LENGTH_ADVICE = 16


@dataclass(frozen=True, slots=True)
class LengthStats:
    """Key lengths in bytes (nearest-rank percentiles); ``over_advice`` keys are longer than
    ``advice`` bytes. All zeros for an empty sample."""

    min: int
    p50: int
    p95: int
    max: int
    mean: float
    over_advice: int
    advice: int = KEY_LENGTH_ADVICE


@dataclass(frozen=True, slots=True)
class RecentWrites:
    """The most recent ``window`` rows of a time-ordered replay (see the module docstring).

    ``counts[i]`` is how many of them land in region ``i``; ``max_key_region`` is the region holding
    the largest key of the whole sample; ``share`` the window's fraction in that region;
    ``busiest`` the region with most of the window and ``busiest_share`` its fraction;
    ``beyond_share`` / ``before_share`` the window's fraction whose key sorts after / before every
    older key (0.0 when there are no older rows).
    """

    fraction: float
    window: int
    counts: tuple[int, ...]
    max_key_region: int
    share: float
    busiest: int
    busiest_share: float
    beyond_share: float
    before_share: float

    @property
    def regions_touched(self) -> int:
        """How many regions receive at least one recent write."""
        return sum(1 for c in self.counts if c)


@dataclass(frozen=True, slots=True)
class KeyspaceReport:
    """Where a sample of keys lands over ``len(boundaries) + 1`` regions."""

    boundaries: tuple[bytes, ...]
    counts: tuple[int, ...]
    lengths: LengthStats
    recent: RecentWrites | None

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def regions(self) -> int:
        return len(self.counts)

    @property
    def mean(self) -> float:
        """Mean rows per region, over all regions."""
        return self.total / len(self.counts)

    @property
    def skew(self) -> float:
        """``max / mean`` rows per region (empty regions count); 0.0 for an empty sample."""
        return max(self.counts) / self.mean if self.total else 0.0

    @property
    def busiest(self) -> int:
        """Index of the region with the most rows (the first one on a tie)."""
        return max(range(len(self.counts)), key=lambda i: (self.counts[i], -i))

    @property
    def busiest_share(self) -> float:
        return self.counts[self.busiest] / self.total if self.total else 0.0

    @property
    def empty_regions(self) -> int:
        return sum(1 for c in self.counts if c == 0)

    def bounds(self, i: int) -> tuple[bytes, bytes]:
        """``[start, end)`` of region ``i``; ``b""`` is the open end on either side."""
        start = self.boundaries[i - 1] if i > 0 else b""
        end = self.boundaries[i] if i < len(self.boundaries) else b""
        return start, end


def _check_boundaries(boundaries: Sequence[bytes]) -> None:
    for i, b in enumerate(boundaries):
        if not b:
            raise ValueError("a split key cannot be empty")
        if i and boundaries[i - 1] >= b:
            raise ValueError(f"split keys must ascend strictly: {boundaries[i - 1]!r} >= {b!r}")


def region_index(boundaries: Sequence[bytes], key: bytes) -> int:
    """The index of the region holding ``key`` (``0..len(boundaries)``)."""
    return bisect_right(boundaries, key)


def count_per_region(keys: Iterable[bytes], boundaries: Sequence[bytes]) -> list[int]:
    """Rows per region (``len(boundaries) + 1`` counts). Raises ValueError for unsorted, repeated
    or empty boundaries."""
    _check_boundaries(boundaries)
    counts = [0] * (len(boundaries) + 1)
    for key in keys:
        counts[bisect_right(boundaries, key)] += 1
    return counts


def percentile(ordered: Sequence[int], p: float) -> int:
    """Nearest-rank percentile of the ascending ``ordered``: the value at 1-based rank
    ``ceil(p / 100 * n)`` (rank 1 for ``p == 0``). Raises ValueError when empty."""
    if not ordered:
        raise ValueError("percentile of an empty sequence")
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def length_stats(keys: Sequence[bytes], advice: int = KEY_LENGTH_ADVICE) -> LengthStats:
    """Key length figures in bytes (see :class:`LengthStats`)."""
    if not keys:
        return LengthStats(0, 0, 0, 0, 0.0, 0, advice)
    lengths = sorted(len(k) for k in keys)
    return LengthStats(
        min=lengths[0], p50=percentile(lengths, 50), p95=percentile(lengths, 95), max=lengths[-1],
        mean=sum(lengths) / len(lengths), over_advice=sum(1 for n in lengths if n > advice),
        advice=advice)


def _time_order(n: int, times: Sequence[float | None] | None) -> list[int]:
    if times is None:
        return list(range(n))
    if len(times) != n:
        raise ValueError(f"{len(times)} times for {n} keys")
    # a row without a time has no place in the replay; counting it among the oldest keeps it out
    # of the recent window, which must hold only rows known to be recent
    return sorted(range(n), key=lambda i: (times[i] is not None, times[i] or 0, i))


def recent_writes(keys: Sequence[bytes], boundaries: Sequence[bytes],
                  times: Sequence[float | None] | None = None,
                  fraction: float = 0.1) -> RecentWrites | None:
    """The recent-window figures of a time-ordered replay of ``keys`` (``times[i]`` is key ``i``'s
    event time; None = sample order). None for an empty sample. Raises ValueError for ``fraction``
    outside ``(0, 1]``."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n = len(keys)
    if n == 0:
        return None
    order = _time_order(n, times)
    window = max(1, math.ceil(fraction * n))
    older, recent = order[: n - window], order[n - window:]
    counts = [0] * (len(boundaries) + 1)
    for i in recent:
        counts[bisect_right(boundaries, keys[i])] += 1
    max_key_region = bisect_right(boundaries, max(keys))
    beyond = before = 0
    if older:
        high = max(keys[i] for i in older)
        low = min(keys[i] for i in older)
        beyond = sum(1 for i in recent if keys[i] > high)
        before = sum(1 for i in recent if keys[i] < low)
    busiest = max(range(len(counts)), key=lambda i: (counts[i], -i))
    return RecentWrites(
        fraction=fraction, window=window, counts=tuple(counts), max_key_region=max_key_region,
        share=counts[max_key_region] / window, busiest=busiest,
        busiest_share=counts[busiest] / window, beyond_share=beyond / window,
        before_share=before / window)


def analyze_keys(keys: Sequence[bytes], boundaries: Sequence[bytes],
                 times: Sequence[float | None] | None = None, *, fraction: float = 0.1,
                 advice: int = KEY_LENGTH_ADVICE) -> KeyspaceReport:
    """Every figure of the module docstring for ``keys`` over the regions cut at ``boundaries``."""
    counts = count_per_region(keys, boundaries)
    return KeyspaceReport(
        boundaries=tuple(boundaries), counts=tuple(counts), lengths=length_stats(keys, advice),
        recent=recent_writes(keys, boundaries, times, fraction))


def recommend_buckets(regions: int, servers: int = 1, cap: int = 64) -> int:
    """A salt/bucket count: the smallest power of two ``>= max(regions, servers, 4)``, but no more
    than the largest power of two ``<= cap``.

    At least as many buckets as region servers (and as regions wanted) keeps every server taking
    writes; each bucket is one scanner on every range read, so the count stays far below 256 (the
    OpenTSDB maintainers' advice: 4, 8, 16 or 20). Raises ValueError for ``cap < 1``.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    want = max(regions, servers, 4)
    pow2 = 1 << (want - 1).bit_length()
    ceiling = 1 << (cap.bit_length() - 1)
    return min(pow2, ceiling)


_METRICS = ("cpu", "mem", "disk", "net")


def sample_events(n: int = 10_000, *, seed: int = 7, hosts: int = 64, users: int = 5_000,
                  start_ms: int = 1_700_000_000_000,
                  interval_ms: int = 250) -> list[dict[str, Any]]:
    """``n`` synthetic monitoring events in event-time order, the same for the same arguments.

    Each event is ``{"ts": epoch ms, "host": "host-NNN", "metric": "cpu"|"mem"|"disk"|"net",
    "user_id": "uNNNNNN", "value": float}``. Times advance by ``interval_ms`` on average (uniform
    jitter of 0..2 intervals, never backwards); hosts, metrics and users are drawn uniformly.
    """
    rng = random.Random(seed)
    ts = start_ms
    out: list[dict[str, Any]] = []
    for _ in range(n):
        ts += rng.randrange(2 * interval_ms + 1)
        out.append({
            "ts": ts,
            "host": f"host-{rng.randrange(hosts):03d}",
            "metric": _METRICS[rng.randrange(len(_METRICS))],
            "user_id": f"u{rng.randrange(users):06d}",
            "value": round(rng.random() * 100, 2),
        })
    return out
