"""Numeric segments: binary integers, fixed-width decimals, reverse timestamps and time buckets.

Byte layouts and sort orders (``v`` is the field's integer value; bools are never integers):

- ``long(v)`` / ``int(v)``: 8 / 4 bytes big-endian two's complement, exactly Java's
  ``Bytes.toBytes(long|int)``. Ascending for ``v >= 0``; negative values sort after every
  non-negative value.
- ``long(v, ordered)`` (alias ``olong(v)``) / ``int(v, ordered)``: the same with the sign bit
  flipped, ascending numeric order over the whole range (Phoenix's BIGINT/INTEGER encoding).
- ``long(v, desc)`` / ``int(v, desc)``: every bit of the ordered form inverted, descending numeric
  order (Phoenix DESC columns). For ``v >= 0``, ``long(v, desc)`` equals ``reverse_ts(v)``.
- ``dec(v, w)``: ``%0{w}d`` ASCII digits, ``0 <= v < 10**w``; ascending numeric order. A value with
  more digits is ``too_long``, a negative one ``out_of_range``.
- ``reverse_ts(v)`` (also ``[Long.MAX_VALUE - v]``): ``Long.MAX_VALUE - v`` as 8 bytes big-endian
  (``Bytes.toBytes(long)``), ``0 <= v <= Long.MAX_VALUE``; descending (newest first).
  ``reverse_ts(v, text)``: the same number as 19 zero-padded digits.
- ``time_bucket(v, 15m)``: ``v // width_ms`` (``v`` epoch milliseconds, ``v >= 0``) as ``%010d``
  text (the guide's ``metricRowKey``); ``time_bucket(v, 15m, long)`` / ``int`` give 8 / 4 bytes
  big-endian. Ascending by bucket. Not invertible: the bucket, not the timestamp, is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.rowkey.codecs import (
    JAVA_LONG_MAX,
    PACK_I,
    PACK_Q,
    UNPACK_I,
    UNPACK_Q,
    PACK_i,
    PACK_q,
    UNPACK_i,
    UNPACK_q,
    as_int,
)
from pipeline.rowkey.codegen import CodeGen
from pipeline.rowkey.errors import EventFieldError
from pipeline.rowkey.segments import ByteInterval, NumberedSegment, RandomLike, Segment

__all__ = ["Binary", "Dec", "Int", "Long", "ReverseTs", "TimeBucket"]


def _asc(a: int, b: int, vmax: int, enc: Callable[[int], bytes]) -> list[ByteInterval]:
    """Values a..b (inclusive) of an ascending encoding whose largest value is vmax."""
    if a > b:
        return []
    return [(enc(a), None if b >= vmax else enc(b + 1))]


def _desc(a: int, b: int, vmin: int, enc: Callable[[int], bytes]) -> list[ByteInterval]:
    """Values a..b (inclusive) of a descending encoding whose smallest value is vmin."""
    if a > b:
        return []
    return [(enc(b), None if a <= vmin else enc(a - 1))]


class Binary(Segment):
    """``long``/``int`` in the plain, ordered or desc variant (see :class:`Long`, :class:`Int`)."""

    bits = 64
    invertible = True
    time_ordered = True
    time_readable = True
    numeric = True
    __slots__ = ("hi", "lo", "variant")

    @property
    def time_descending(self) -> bool:
        return self.variant == "desc"

    def __init__(self, source: str, field: str, variant: str, pos: int) -> None:
        super().__init__(source, (field,), self.bits // 8, pos)
        self.variant = variant
        self.lo = -(1 << (self.bits - 1))
        self.hi = (1 << (self.bits - 1)) - 1

    @property
    def order(self) -> str:
        if self.variant == "ordered":
            return "ascending numeric (sign bit flipped)"
        if self.variant == "desc":
            return "descending numeric (bits inverted)"
        return "ascending for values >= 0 (negatives sort last)"

    @property
    def layout(self) -> str:
        what = {"plain": "two's complement", "ordered": "sign bit flipped", "desc": "bits inverted"}
        return f"{self.fields[0]} as {self.bits // 8} bytes big-endian, {what[self.variant]}"

    def _u(self, v: int) -> int:
        if self.variant == "ordered":
            return v - self.lo
        if self.variant == "desc":
            return self.hi - v
        return v & ((1 << self.bits) - 1)

    def enc(self, v: int) -> bytes:
        return self._u(v).to_bytes(self.bits // 8, "big")

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        v = as_int(field, values[field], self.lo, self.hi, self.source)
        return self.enc(v)

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is int and {self.lo} <= {v} <= {self.hi}")
        long = self.bits == 64
        if self.variant == "plain":
            return f"{g.const(PACK_q if long else PACK_i, 'pack')}({v})"
        unsigned = g.const(PACK_Q if long else PACK_I, "pack")
        if self.variant == "ordered":
            return f"{unsigned}({v} + {-self.lo})"
        return f"{unsigned}({self.hi} - {v})"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        u = int.from_bytes(chunk, "big")
        if self.variant == "ordered":
            v = u + self.lo
        elif self.variant == "desc":
            v = self.hi - u
        else:
            v = int.from_bytes(chunk, "big", signed=True)
        return {self.fields[0]: v}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        long = self.bits == 64
        if self.variant == "plain":
            return [(self.fields[0], f"{g.const(UNPACK_q if long else UNPACK_i, 'unpack')}"
                                     f"({key}, {start})[0]")]
        u = f"{g.const(UNPACK_Q if long else UNPACK_I, 'unpack')}({key}, {start})[0]"
        if self.variant == "ordered":
            return [(self.fields[0], f"{u} - {-self.lo}")]
        return [(self.fields[0], f"{self.hi} - {u}")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        v: int = self.decode(chunk)[self.fields[0]]
        return v, v + 1

    def interval(self, lo: int, hi: int) -> list[ByteInterval]:
        a, b = max(lo, self.lo), min(hi - 1, self.hi)
        if self.variant == "ordered":
            return _asc(a, b, self.hi, self.enc)
        if self.variant == "desc":
            return _desc(a, b, self.lo, self.enc)
        # two's complement: non-negative values first (0x00..), then negative ones (0x80..)
        out = _asc(max(a, 0), b, self.hi, self.enc)
        neg = _asc(a, min(b, -1), -1, self.enc)
        return out + neg


class Long(Binary):
    kind = "long"
    bits = 64
    __slots__ = ()


class Int(Binary):
    kind = "int"
    bits = 32
    __slots__ = ()


class Dec(Segment):
    kind = "dec"
    invertible = True
    time_ordered = True
    time_readable = True
    numeric = True
    __slots__ = ("fmt", "limit")

    def __init__(self, source: str, field: str, width: int, pos: int) -> None:
        super().__init__(source, (field,), width, pos)
        self.fmt = b"%0" + str(width).encode() + b"d"
        self.limit = 10**width

    @property
    def order(self) -> str:
        return "ascending numeric"

    @property
    def layout(self) -> str:
        return f"{self.fields[0]} as {self.width} zero-padded decimal digits"

    def enc(self, v: int) -> bytes:
        return self.fmt % v

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        v = as_int(field, values[field], 0, JAVA_LONG_MAX * 1024, self.source)
        if v >= self.limit:
            raise EventFieldError(
                field, v, "too_long", f"has more than {self.width} digits for {self.source}"
            )
        return self.enc(v)

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is int and 0 <= {v} < {self.limit}")
        return f"({g.const(self.fmt, 'fmt')} % {v})"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        if not chunk.isdigit():
            raise self.bad(chunk, "expected decimal digits")
        return {self.fields[0]: int(chunk)}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        x = g.tmp()
        g.stmt(f"{x} = {key}[{start}:{end}]")
        g.guard(f"{x}.isdigit()")
        return [(self.fields[0], f"int({x})")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        v = int(chunk) if chunk.isdigit() else -1
        return (v, v + 1) if v >= 0 else None

    def interval(self, lo: int, hi: int) -> list[ByteInterval]:
        return _asc(max(lo, 0), min(hi - 1, self.limit - 1), self.limit - 1, self.enc)


class ReverseTs(Segment):
    kind = "reverse_ts"
    invertible = True
    time_ordered = True
    time_readable = True
    numeric = True
    time_descending = True  # a constant here, a property in general
    __slots__ = ("text",)

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        return (3, self.paths[0], self.text) if terminator is None else None

    def __init__(self, source: str, field: str, text: bool, pos: int) -> None:
        super().__init__(source, (field,), 19 if text else 8, pos)
        self.text = text

    @property
    def order(self) -> str:
        return "descending (newest first)"

    @property
    def layout(self) -> str:
        form = "19 zero-padded digits" if self.text else "8 bytes big-endian"
        return f"Long.MAX_VALUE - {self.fields[0]} as {form}"

    def enc(self, v: int) -> bytes:
        r = JAVA_LONG_MAX - v
        return b"%019d" % r if self.text else PACK_q(r)

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        return self.enc(as_int(field, values[field], 0, JAVA_LONG_MAX, self.source))

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is int and 0 <= {v} <= {JAVA_LONG_MAX}")
        if self.text:
            return f"(b'%019d' % ({JAVA_LONG_MAX} - {v}))"
        return f"{g.const(PACK_q, 'pack')}({JAVA_LONG_MAX} - {v})"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        if self.text:
            if not chunk.isdigit():
                raise self.bad(chunk, "expected 19 decimal digits")
            r = int(chunk)
        else:
            r = int.from_bytes(chunk, "big", signed=True)
        if not 0 <= r <= JAVA_LONG_MAX:
            raise self.bad(chunk, "not a reverse timestamp")
        return {self.fields[0]: JAVA_LONG_MAX - r}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        r = g.tmp()
        if self.text:
            x = g.tmp()
            g.stmt(f"{x} = {key}[{start}:{end}]")
            g.guard(f"{x}.isdigit()")
            g.stmt(f"{r} = int({x})")
            g.guard(f"{r} <= {JAVA_LONG_MAX}")
        else:
            g.stmt(f"{r} = {g.const(UNPACK_q, 'unpack')}({key}, {start})[0]")
            g.guard(f"{r} >= 0")
        return [(self.fields[0], f"{JAVA_LONG_MAX} - {r}")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        v: int = self.decode(chunk)[self.fields[0]]
        return v, v + 1

    def interval(self, lo: int, hi: int) -> list[ByteInterval]:
        return _desc(max(lo, 0), min(hi - 1, JAVA_LONG_MAX), 0, self.enc)


class TimeBucket(NumberedSegment):
    kind = "time_bucket"
    time_ordered = True
    time_readable = True
    numeric = True
    time_bucket = True
    __slots__ = ("form", "limit", "step")

    def __init__(self, source: str, field: str, step: int, form: str, pos: int) -> None:
        super().__init__(source, (field,), {"text": 10, "long": 8, "int": 4}[form], pos)
        self.step = step
        self.form = form
        bucket_max = {"text": 10**10 - 1, "long": JAVA_LONG_MAX, "int": (1 << 31) - 1}[form]
        self.limit = min((bucket_max + 1) * step, JAVA_LONG_MAX + 1)  # exclusive bound on ts

    @property
    def order(self) -> str:
        return "ascending by time bucket"

    @property
    def layout(self) -> str:
        form = {"text": "%010d text", "long": "8 bytes big-endian", "int": "4 bytes big-endian"}
        return f"{self.fields[0]} // {self.step} ms as {form[self.form]}"

    def enc_bucket(self, bucket: int) -> bytes:
        if self.form == "text":
            return b"%010d" % bucket
        return PACK_q(bucket) if self.form == "long" else PACK_i(bucket)

    def enc(self, v: int) -> bytes:
        return self.enc_bucket(v // self.step)

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        v = as_int(field, values[field], 0, JAVA_LONG_MAX, self.source)
        if v >= self.limit:
            reason = "too_long" if self.form == "text" else "out_of_range"
            raise EventFieldError(field, v, reason, f"gives a bucket too large for {self.source}")
        return self.enc(v)

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is int and 0 <= {v} < {self.limit}")
        if self.form == "text":
            return f"(b'%010d' % ({v} // {self.step}))"
        pack = g.const(PACK_q if self.form == "long" else PACK_i, "pack")
        return f"{pack}({v} // {self.step})"

    def bucket_of(self, chunk: bytes) -> int:
        if self.form == "text":
            if not chunk.isdigit():
                raise self.bad(chunk, "expected 10 decimal digits")
            return int(chunk)
        b = int.from_bytes(chunk, "big", signed=True)
        if b < 0:
            raise self.bad(chunk, "negative bucket")
        return b

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        b = self.bucket_of(chunk)
        return b * self.step, (b + 1) * self.step

    def buckets(self, lo: int, hi: int) -> range:
        """Bucket numbers holding some ``v`` with ``lo <= v < hi``."""
        a, b = max(lo, 0), min(hi - 1, self.limit - 1)
        return range(a // self.step, b // self.step + 1) if a <= b else range(0)

    def interval(self, lo: int, hi: int) -> list[ByteInterval]:
        r = self.buckets(lo, hi)
        if not r:
            return []
        last = (self.limit - 1) // self.step
        return _asc(r.start, r.stop - 1, last, self.enc_bucket)

    def interval_exact(self, lo: int, hi: int) -> bool:
        return lo % self.step == 0 and hi % self.step == 0
