"""The compiled rowkey design: :class:`RowKey` and :func:`compile_rowkey`.

A :class:`RowKey` is immutable and compiled once. ``build`` and the unverified ``decode`` of the
read path are generated functions specialised for the spec (see ``codegen``); everything else
(verified decode, plan, sort_key, split points, explain) reads the same segment tuple, so writer,
reader and pre-splitter can never disagree about the layout.
"""

from __future__ import annotations

import math
import operator
import random as _random
import re
from collections.abc import Callable, Mapping
from typing import Any

from pipeline.rowkey.codecs import fetch
from pipeline.rowkey.codegen import BuildFn, DecodeFn
from pipeline.rowkey.compiler import compile_segments
from pipeline.rowkey.errors import EventFieldError, KeyDecodeError, PlanError
from pipeline.rowkey.generate import generate_builder, generate_decoder
from pipeline.rowkey.layout import Layout
from pipeline.rowkey.planner import ScanPlan, make_plan
from pipeline.rowkey.segments import RandomLike, Segment
from pipeline.rowkey.segments_dist import KeySalt, Random, Salt
from pipeline.rowkey.segments_num import Binary, Dec, ReverseTs, TimeBucket
from pipeline.rowkey.segments_text import Literal

__all__ = ["RowKey", "compile_rowkey"]

_TIMEISH = re.compile(r"(?i)(^|[_.\-])(ts|time|timestamp|date|datetime|event_time)$")
_FANOUT_LIST_MAX = 1 << 20


def compile_rowkey(
    spec: str, *, time_field: str | None = None, rng: RandomLike | None = None
) -> RowKey:
    """Compile ``spec`` (see ``pipeline.rowkey`` for the notation).

    ``time_field`` names the field that ``plan(time_range=...)`` applies to when the spec alone does
    not make it clear; ``rng`` is the default random source of ``random(n)`` segments.
    Raises SpecSyntaxError.
    """
    return RowKey(spec, time_field=time_field, rng=rng)


class RowKey:
    """A compiled rowkey design. See the package docstring for the API contract."""

    __slots__ = (
        "_build",
        "_decode_fast",
        "_lead_end",
        "_lead_width",
        "_rng",
        "_sort_key",
        "fields",
        "layout",
        "segments",
        "spec",
        "time_field",
    )

    spec: str
    fields: tuple[str, ...]
    segments: tuple[Segment, ...]
    layout: Layout
    time_field: str | None
    _build: BuildFn
    _decode_fast: DecodeFn
    _lead_end: int
    _lead_width: int
    _rng: RandomLike
    _sort_key: Callable[[bytes], bytes]

    def __init__(
        self, spec: str, *, time_field: str | None = None, rng: RandomLike | None = None
    ) -> None:
        segments = compile_segments(spec)
        fields: list[str] = []
        for seg in segments:
            fields.extend(f for f in seg.fields if f not in fields)
        if time_field is not None and time_field not in fields:
            raise PlanError(f"time_field {time_field!r} is not a field of {spec!r}")
        s = object.__setattr__
        s(self, "spec", spec)
        s(self, "segments", segments)
        s(self, "fields", tuple(fields))
        s(self, "layout", Layout(segments))
        s(self, "time_field", time_field or _infer_time_field(segments))
        s(self, "_rng", rng if rng is not None else _random.Random())
        s(self, "_lead_end", _lead_end(segments))
        # every leading salt/hash/mod/random/literal segment is fixed-width
        s(self, "_lead_width", sum(seg.width or 0 for seg in segments[: self._lead_end]))
        s(self, "_sort_key", operator.itemgetter(slice(self._lead_width, None)))
        s(self, "_build", generate_builder(self.segments, self.layout, self.build_reference, self._rng, self.spec))
        s(self, "_decode_fast", generate_decoder(self.segments, self.layout, self.max_length, self.decode, self.spec))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RowKey is immutable")

    def __repr__(self) -> str:
        return f"RowKey({self.spec!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowKey) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    # --- building -----------------------------------------------------------------------------
    def build(self, event: Mapping[str, Any], rng: RandomLike | None = None) -> bytes:
        """The row key of ``event``. ``rng`` overrides the random source of ``random(n)``.

        Raises EventFieldError (``.field``, ``.value``, ``.reason``) for a missing or null field, a
        wrong type (bools are not integers; text fields take str or int), a value too long for its
        fixed width, an unmapped code, a number out of range, or variable text that contains the
        delimiter following it.
        """
        return self._build(event, rng)

    @property
    def builder(self) -> BuildFn:
        """The generated ``build(event, rng=None)`` function itself (saves a call on hot loops)."""
        return self._build

    def build_reference(self, event: Mapping[str, Any], rng: RandomLike | None = None) -> bytes:
        """The reference (interpretive) builder: same bytes and errors as :meth:`build`, slower."""
        rng = rng if rng is not None else self._rng
        segs, term = self.segments, self.layout.terminator
        values = {f: fetch(event, tuple(f.split(".")), f) for f in self.fields}
        parts = [b"" if isinstance(s, KeySalt) else s.encode(values, rng) for s in segs]
        for i, t in enumerate(term):
            if t is not None and t in parts[i]:
                f = segs[i].fields[0]
                raise EventFieldError(
                    f,
                    values[f],
                    "contains_delimiter",
                    f"contains {t!r}, the delimiter that follows it in the key",
                )
        first = segs[0]
        if isinstance(first, KeySalt):
            rest = b"".join(parts[1:])
            return first.salt_of(rest) + rest
        key = b"".join(parts)
        if not key:
            raise EventFieldError(
                self.fields[0] if self.fields else "",
                values.get(self.fields[0]) if self.fields else None,
                "empty_key",
                "makes an empty row key (every part of the key is empty), which HBase refuses",
            )
        return key

    # --- reading ------------------------------------------------------------------------------
    @property
    def decodable(self) -> bool:
        """True when every segment boundary can be found in any key of this design."""
        return self.layout.decodable

    @property
    def point_readable(self) -> bool:
        """False when a random segment makes keys unpredictable (a get must try every value)."""
        return not any(isinstance(s, Random) for s in self.segments)

    def decode(self, key: bytes, verify: bool = True) -> dict[str, Any]:
        """The logical fields stored recoverably in ``key`` (text as str, numbers as int).

        Hash prefixes, salts, buckets and random parts are checked and skipped; salts, md5 prefixes,
        mod and time buckets are verified against the decoded fields when those are present.
        Raises KeyDecodeError when the key does not fit the layout or the design is not decodable.

        ``verify=False`` is the read path for keys this design built (rows read back from its own
        table): a generated decoder (see :attr:`fast_decoder`) that locates the segments and decodes
        the fields but does not check the bytes that hold no field (salt, md5, mod, random, time
        bucket, literals) nor recompute any hash, and when a field is stored twice it does not
        compare the copies. On any key that ``decode(key)`` accepts it returns the same dict; a key
        that does not fit the layout (length, delimiters, UTF-8, digits) still raises the same
        KeyDecodeError. Keep the default for keys from outside.
        """
        if not verify:
            return self._decode_fast(key)
        spans = self.layout.locate(key, strict=True)
        out: dict[str, Any] = {}
        chunks: list[bytes] = []
        for seg, span in zip(self.segments, spans, strict=True):
            assert span is not None
            chunk = key[span[0] : span[1]]
            chunks.append(chunk)
            for f, v in seg.decode(chunk).items():
                if f in out and out[f] != v:
                    raise KeyDecodeError(f"{f!r} decodes to {out[f]!r} and {v!r}")
                out[f] = v
        for seg, chunk in zip(self.segments, chunks, strict=True):
            if isinstance(seg, KeySalt):
                expected = seg.salt_of(key[1:])
            elif seg.invertible or not seg.computable or not seg.fields:
                continue
            elif all(f in out for f in seg.fields):
                try:
                    expected = seg.encode(out, None)
                except EventFieldError:
                    continue
            else:
                continue
            if expected != chunk:
                raise KeyDecodeError(
                    f"{seg.source} is {chunk!r} but the decoded fields give {expected!r}"
                )
        return out

    @property
    def fast_decoder(self) -> DecodeFn:
        """The generated ``decode(key)`` of ``decode(key, verify=False)`` itself (saves a call and
        the keyword on hot loops). Its ``__doc__`` holds the generated source."""
        return self._decode_fast

    def sort_key(self, key: bytes) -> bytes:
        """``key`` without its leading salt/hash/mod/random segments: the logical order used to
        merge fanned-out scans (byte order of the remaining segments)."""
        return key[self._lead_width :]

    @property
    def sort_key_fn(self) -> Callable[[bytes], bytes]:
        """:meth:`sort_key` as a C-level callable (``operator.itemgetter`` of the slice after the
        fixed-width leading segments): the same result without a Python frame per key."""
        return self._sort_key

    @property
    def fanout_size(self) -> int:
        """Number of distinct leading salt/hash/bucket prefixes (1 when the key has none)."""
        return math.prod(
            s.value_count or 1
            for s in self.segments[: self._lead_end]
            if not isinstance(s, Literal)
        )

    @property
    def fanout(self) -> list[bytes] | None:
        """Every leading salt/hash/bucket prefix value in ascending order, or None when the key
        starts with none (or when there are more than 2**20 of them: see ``fanout_size``)."""
        if self._lead_end == 0 or self.fanout_size > _FANOUT_LIST_MAX:
            return None
        out = [b""]
        for seg in self.segments[: self._lead_end]:
            vals = [seg.data] if isinstance(seg, Literal) else seg.enum_values()
            out = [p + v for p in out for v in vals]
        return out

    def plan(
        self,
        where: Mapping[str, Any] | None = None,
        time_range: tuple[int, int] | None = None,
        *,
        time_field: str | None = None,
        max_ranges: int = 1024,
    ) -> ScanPlan:
        """Key ranges for the rows whose fields equal ``where`` and whose time field lies in
        ``time_range`` = ``[t0, t1)`` (epoch ms). Raises PlanError when the design cannot answer
        (ambiguous boundary, unknown field, no usable time segment)."""
        where = dict(where or {})
        unknown = [f for f in where if f not in self.fields]
        if unknown:
            raise PlanError(f"unknown field(s) {unknown}; the key has {list(self.fields)}")
        tf = time_field or self.time_field
        if time_range is not None:
            if tf is None or tf not in self.fields:
                raise PlanError(
                    "time_range needs a time field: pass time_field= (the spec does not "
                    "make it clear)"
                )
            t0, t1 = time_range
            if tf in where:
                inside = t0 <= where[tf] < t1
                time_range = None
                if not inside:
                    return ScanPlan([], False, True, self.order())
            elif t0 >= t1:
                return ScanPlan([], False, True, self.order())
        if max_ranges < 1:
            raise PlanError("max_ranges must be at least 1")
        return make_plan(
            self.segments,
            self.layout,
            self._lead_end,
            where,
            time_range,
            tf,
            max_ranges,
            self.order(),
        )

    def order(self) -> str:
        """The logical order of keys (by ``sort_key``)."""
        parts = [
            f"{s.source}: {s.order}"
            for s in self.segments[self._lead_end :]
            if not isinstance(s, Literal)
        ]
        text = "; ".join(parts) or "none"
        if self._lead_end:
            return f"fan-out over {self.fanout_size} prefixes, merge ranges by sort_key: {text}"
        return text

    def ordered_before_time(self, time_field: str) -> tuple[str, ...]:
        """The fields the logical order (:meth:`sort_key`) sorts by before ``time_field``: those of
        the segments after the leading salt/hash/bucket run and before the first time-ordered
        segment of ``time_field`` that is not a coarse bucket (a time bucket orders buckets, and the
        fields after it order rows within one); every field but the time field when no segment
        orders it. Time orders rows across the whole key space only when this is empty, or when a
        query fixes these fields."""
        out: list[str] = []
        for seg in self.segments[self._lead_end :]:
            if seg.time_ordered and seg.fields == (time_field,) and not isinstance(seg, TimeBucket):
                return tuple(out)
            out.extend(f for f in seg.fields if f != time_field and f not in out)
        return tuple(out)

    # --- design advice --------------------------------------------------------------------------
    @property
    def max_length(self) -> int | None:
        """The key length in bytes when every segment is fixed-width, else None."""
        widths = [s.width for s in self.segments]
        return None if None in widths else sum(w or 0 for w in widths)

    @property
    def min_length(self) -> int:
        """The bytes every key has (variable-width segments counted at their ``min_width``: empty
        text, an escaped text's terminator)."""
        return sum(s.min_width for s in self.segments)


def _lead_end(segments: tuple[Segment, ...]) -> int:
    end = 0
    for i, seg in enumerate(segments):
        if seg.distributing:
            end = i + 1
        elif not isinstance(seg, Literal):
            break
    return end


def _infer_time_field(segments: tuple[Segment, ...]) -> str | None:
    strong = {s.fields[0] for s in segments if isinstance(s, ReverseTs | TimeBucket)}
    if len(strong) == 1:
        return strong.pop()
    if strong:
        return None
    named = {
        f for s in segments for f in s.fields if _TIMEISH.search(f) and not isinstance(s, Salt)
    }
    typed = {
        f for f in named if any(isinstance(s, Binary | Dec) and s.fields == (f,) for s in segments)
    }
    pick = typed or named
    return pick.pop() if len(pick) == 1 else None
