"""Pre-split points that cover the real keyspace of a design evenly.

- Leading salt / one-byte ``mod`` / ``random``: split on bucket boundaries. With ``n_regions`` equal
  to the bucket count the points are the bytes ``\\x01 .. \\x(N-1)`` (one region per salt value, as
  Phoenix does); with fewer regions the boundaries ``round(i * N / n)`` are used. A region never
  straddles part of a bucket. Decimal-text buckets (``mod(x, n, text)``) split the same way on their
  zero-padded digits.
- Leading md5 hex prefix of ``w`` characters: evenly spaced points ``i * 16**w // n`` written as
  lowercase hex (trailing zeros dropped), so every region gets keys; splitting the whole byte range
  instead would leave the regions between ``9`` and ``a`` empty.
- Anything else (including leading time buckets) needs ``sample_keys``: the split points are then
  the sample's quantiles. A sample is also used when ``n_regions`` exceeds the bucket count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pipeline.rowkey.errors import PlanError
from pipeline.rowkey.segments_text import Literal

if TYPE_CHECKING:
    from pipeline.rowkey.rowkey import RowKey

__all__ = ["sample_quantiles", "split_points"]


def sample_quantiles(sample: Iterable[bytes], n_regions: int) -> list[bytes]:
    """``n_regions - 1`` quantiles of ``sample`` (fewer when the sample has few distinct keys)."""
    keys = sorted(set(sample))
    if not keys:
        raise PlanError("sample_keys is empty")
    out: list[bytes] = []
    for i in range(1, n_regions):
        k = keys[(i * len(keys)) // n_regions]
        if k and (not out or k > out[-1]):
            out.append(k)
    return out


def split_points(rk: RowKey, n_regions: int, sample_keys: Iterable[bytes] | None = None) -> list[bytes]:
    """Split keys for ``n_regions`` regions (``n_regions - 1`` keys, ascending)."""
    if n_regions < 1:
        raise PlanError("n_regions must be at least 1")
    if n_regions == 1:
        return []
    prefix = b""
    lead = None
    for seg in rk.segments:
        if isinstance(seg, Literal):
            prefix += seg.data
            continue
        lead = seg
        break
    points = lead.split_prefixes(n_regions) if lead is not None else None
    if points is not None:
        return [prefix + p for p in points]
    if sample_keys is not None:
        return sample_quantiles(sample_keys, n_regions)
    if lead is not None and lead.distributing:
        raise PlanError(
            f"{n_regions} regions exceed the {lead.value_count} values of "
            f"{lead.source}; split at a sample's quantiles instead (tables create --sample)"
        )
    raise PlanError(
        "the key has no leading salt/hash/bucket segment, so its keyspace is unknown: "
        "split at the quantiles of keys built from a sample of events instead (tables create --sample)"
    )
