"""Scan planning: a query (field values + optional time range) -> ``[start, stop)`` key ranges.

The planner walks the segments left to right, keeping a set of key prefixes:

- a literal, or a segment whose input fields are all given, appends its bytes to every prefix;
- a distributing segment (salt, md5 prefix, mod, random, or a time bucket under a time range) fans
  out: every prefix is extended with each of its values, when it leads the key or when a later
  segment narrows the ranges, and when the product stays within ``max_ranges``; beyond that the plan
  is ``per_region`` / ``too_many`` and the reader must scan region by region with ``matches``;
- the first time-ordered segment of the time field turns the time range into a byte interval and
  ends the walk; so does any segment it cannot determine.

Each prefix ``P`` gives ``[P, successor(P))``, or ``[P + lo, P + hi)`` for a time interval, or
``[K, K + b"\\x00")`` for a complete key ``K`` (a point read). A variable-width segment inside the
prefix must be followed by a literal delimiter (or end the key): otherwise a prefix for ``host1``
would also cover ``host12``, and the planner raises :class:`PlanError`.

``exact`` is True when the ranges hold only matching keys; otherwise ``matches(key)`` filters them,
decoding the segments of the fields (and the time) that the ranges do not pin down.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.rowkey.codecs import BYTE, prefix_successor
from pipeline.rowkey.errors import KeyDecodeError, PlanError
from pipeline.rowkey.layout import Layout
from pipeline.rowkey.segments import ByteInterval, Segment
from pipeline.rowkey.segments_dist import KeySalt, Mod
from pipeline.rowkey.segments_num import TimeBucket
from pipeline.rowkey.segments_text import Code, Literal

__all__ = ["KeyRange", "ScanPlan", "make_plan"]


@dataclass(frozen=True, slots=True)
class KeyRange:
    """Keys ``k`` with ``start <= k < stop``; ``stop == b""`` means the end of the table."""

    start: bytes
    stop: bytes
    label: str

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.start <= key and (not self.stop or key < self.stop)


@dataclass(frozen=True, eq=False)
class ScanPlan:
    """Ranges to scan for one query, sorted by ``start`` and pairwise disjoint.

    - ``fans_out``: more than one range (one per salt/bucket value), or ``per_region``.
    - ``exact``: every key in the ranges matches; otherwise filter rows with ``matches``.
    - ``per_region`` / ``too_many``: the fan-out exceeded ``max_ranges``; ``ranges`` then holds the
      common prefix ranges only (the whole table when nothing narrows it) and the reader should scan
      each region with ``matches`` as filter.
    - ``order``: the row order within each range and how to merge ranges (by ``RowKey.sort_key``).
    """

    ranges: list[KeyRange]
    fans_out: bool
    exact: bool
    order: str
    per_region: bool = False
    too_many: bool = False
    notes: tuple[str, ...] = ()
    _filter: Callable[[bytes], bool] | None = field(default=None, repr=False)
    _starts: list[bytes] = field(default_factory=list, repr=False)

    def range_of(self, key: bytes) -> KeyRange | None:
        """The range holding ``key``, if any."""
        i = bisect.bisect_right(self._starts, key) - 1
        if i >= 0 and key in self.ranges[i]:
            return self.ranges[i]
        return None

    def matches(self, key: bytes) -> bool:
        """True when ``key`` lies in a range and satisfies the whole query."""
        if self.range_of(key) is None:
            return False
        return self._filter is None or self._filter(key)


def _exact_for(seg: Segment, encoded: bytes) -> bool:
    if isinstance(seg, Code):
        return encoded in seg.reverse
    return seg.invertible


class _Walk:
    def __init__(
        self,
        segs: tuple[Segment, ...],
        layout: Layout,
        where: Mapping[str, Any],
        trange: tuple[int, int] | None,
        time_field: str | None,
        max_ranges: int,
    ) -> None:
        self.segs, self.layout, self.where = segs, layout, where
        self.trange, self.tf, self.max = trange, time_field, max_ranges
        self.prefixes: list[tuple[bytes, tuple[str, ...]]] = [(b"", ())]
        self.pinned: set[str] = set()
        self.time_done = False
        self.too_many = False
        self.tail: list[ByteInterval] | None = None
        self.stop = len(segs)

    def determined(self, seg: Segment) -> bool:
        return seg.computable and bool(seg.fields) and all(f in self.where for f in seg.fields)

    def timed(self, seg: Segment) -> bool:
        return self.trange is not None and seg.time_ordered and seg.fields == (self.tf,)

    def enumerable(self, seg: Segment) -> bool:
        return (seg.distributing and seg.value_count is not None) or (
            isinstance(seg, TimeBucket) and self.timed(seg)
        )

    def useful_after(self, i: int) -> bool:
        for seg in self.segs[i + 1 :]:
            if isinstance(seg, Literal):
                continue
            if self.determined(seg) or self.timed(seg):
                return True
            if not self.enumerable(seg):
                return False
        return False

    def fan(self, values: list[bytes], seg: Segment) -> bool:
        if len(self.prefixes) * len(values) > self.max:
            self.too_many = True
            return False
        self.prefixes = [(p + v, (*lab, seg.label(v))) for p, lab in self.prefixes for v in values]
        return True

    def run(self, start: int, lead_end: int) -> None:
        i, segs, where = start, self.segs, self.where
        while i < len(segs):
            seg = segs[i]
            if isinstance(seg, Literal):
                self.prefixes = [(p + seg.data, lab) for p, lab in self.prefixes]
            elif self.determined(seg):
                data = seg.encode(where, None)
                term = self.layout.terminator[i]
                if term is not None and term in data:
                    raise PlanError(
                        f"{seg.fields[0]}={where[seg.fields[0]]!r} contains the "
                        f"delimiter {term!r}, so no key can hold it"
                    )
                self.prefixes = [(p + data, lab) for p, lab in self.prefixes]
                if _exact_for(seg, data):
                    self.pinned.update(seg.fields)
            elif (
                isinstance(seg, TimeBucket)
                and self.timed(seg)
                and self.useful_after(i)
                and self.trange is not None
                and len(seg.buckets(*self.trange)) * len(self.prefixes) <= self.max
            ):
                self.fan([seg.enc_bucket(b) for b in seg.buckets(*self.trange)], seg)
                self.time_done = seg.interval_exact(*self.trange)
            elif self.timed(seg) and self.trange is not None:
                self.tail = seg.interval(*self.trange)
                self.time_done = seg.interval_exact(*self.trange)
                self.stop = i
                return
            elif self.enumerable(seg) and (i < lead_end or self.useful_after(i)):
                values = None
                if isinstance(seg, Mod) and self.trange and seg.fields == (self.tf,):
                    values = seg.residues(*self.trange)
                if not self.fan(values if values is not None else seg.enum_values(), seg):
                    self.stop = i
                    return
            else:
                self.stop = i
                return
            i += 1
        self.stop = len(segs)


def _check_boundaries(segs: tuple[Segment, ...], layout: Layout, upto: int) -> None:
    for k in range(upto):
        if k in layout.ambiguous:
            nxt = segs[k + 1].source
            raise PlanError(
                f"ambiguous field boundary: {segs[k].source} is variable-length and directly "
                f"followed by {nxt}, so a prefix for 'host1' would also match 'host12'; use "
                f"rpad({segs[k].fields[0] if segs[k].fields else 'field'}, '\\x00', N) or a "
                "delimiter such as [_] after it"
            )


def make_plan(
    segs: tuple[Segment, ...],
    layout: Layout,
    lead_end: int,
    where: Mapping[str, Any],
    trange: tuple[int, int] | None,
    time_field: str | None,
    max_ranges: int,
    order: str,
) -> ScanPlan:
    """See the module docstring; ``lead_end`` is the index after the leading distributing run."""
    keysalt = isinstance(segs[0], KeySalt)
    walk = _Walk(segs, layout, where, trange, time_field, max_ranges)
    walk.run(1 if keysalt else 0, lead_end)
    full = walk.stop == len(segs) and walk.tail is None
    _check_boundaries(segs, layout, walk.stop)
    if keysalt:
        salt = segs[0]
        assert isinstance(salt, KeySalt)
        if full and not walk.too_many:
            walk.prefixes = [(salt.salt_of(p) + p, lab) for p, lab in walk.prefixes]
        elif len(walk.prefixes) * salt.buckets <= max_ranges and not walk.too_many:
            walk.prefixes = [
                (BYTE[s] + p, (f"salt={s}", *lab))
                for s in range(salt.buckets)
                for p, lab in walk.prefixes
            ]
        else:
            walk.too_many = True
            walk.prefixes, walk.tail, full = [(b"", ())], None, False
            walk.pinned.clear()
            walk.time_done = False
    ranges: list[KeyRange] = []
    for p, lab in walk.prefixes:
        if full:
            ranges.append(KeyRange(p, p + b"\x00", ",".join(lab) or "point"))
        elif walk.tail is not None:
            for lo, hi in walk.tail:
                stop = p + hi if hi is not None else prefix_successor(p)
                ranges.append(KeyRange(p + lo, stop, ",".join(lab) or "time"))
        else:
            ranges.append(
                KeyRange(p, prefix_successor(p), ",".join(lab) or ("all" if not p else "prefix"))
            )
    ranges.sort(key=lambda r: r.start)
    need = [f for f in where if f not in walk.pinned]
    need_time = trange is not None and not walk.time_done
    check = _filter(segs, layout, where, trange, time_field, need, need_time)
    notes: list[str] = []
    if need_time and trange is not None and check is not None and check[1] == "bucket":
        notes.append("time is stored as buckets only: matches() keeps whole edge buckets")
    exact = not walk.too_many and not need and not need_time
    return ScanPlan(
        ranges=ranges,
        fans_out=len(ranges) > 1 or walk.too_many,
        exact=exact,
        order=order,
        per_region=walk.too_many,
        too_many=walk.too_many,
        notes=tuple(notes),
        _filter=check[0] if check is not None else None,
        _starts=[r.start for r in ranges],
    )


def _filter(
    segs: tuple[Segment, ...],
    layout: Layout,
    where: Mapping[str, Any],
    trange: tuple[int, int] | None,
    time_field: str | None,
    need: list[str],
    need_time: bool,
) -> tuple[Callable[[bytes], bool], str] | None:
    """A key predicate for what the ranges leave open, or None when nothing is open."""
    if not need and not need_time:
        return None
    ok = layout.locatable()
    checks: list[tuple[int, bytes]] = []
    for f in need:
        cands = [
            i
            for i, s in enumerate(segs)
            if f in s.fields
            and s.invertible
            and ok[i]
            and s.computable
            and _exact_for(s, s.encode(where, None))
        ]
        if not cands:
            raise PlanError(
                f"cannot filter on {f!r}: it is not stored in a segment whose bytes can "
                "be located and decoded (hashed only, or behind an ambiguous boundary)"
            )
        i = cands[0]
        checks.append((i, segs[i].encode({**where}, None)))
    tidx: int | None = None
    kind = "exact"
    if need_time:
        cands = [
            i for i, s in enumerate(segs) if ok[i] and s.fields == (time_field,) and s.time_readable
        ]
        exact_c = [i for i in cands if not isinstance(segs[i], TimeBucket)]
        if exact_c:
            tidx = exact_c[0]
        elif cands:
            tidx, kind = cands[0], "bucket"
        else:
            raise PlanError(
                f"cannot select a time range on {time_field!r}: no locatable segment "
                "stores it (use long(ts), reverse_ts(ts), dec(ts, 13) or time_bucket)"
            )
    t0, t1 = trange if trange is not None else (0, 0)

    def check(key: bytes) -> bool:
        try:
            spans = layout.locate(key, strict=False)
            for i, want in checks:
                sp = spans[i]
                if sp is None or key[sp[0] : sp[1]] != want:
                    return False
            if tidx is not None:
                sp = spans[tidx]
                if sp is None:
                    return False
                span = segs[tidx].time_of(key[sp[0] : sp[1]])
                if span is None or not (span[0] < t1 and span[1] > t0):
                    return False
        except (KeyDecodeError, ValueError):
            return False
        return True

    return check, kind
