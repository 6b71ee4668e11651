"""Distributing segments: salt byte, md5 hex prefix, mod bucket and random parts.

Their bytes spread keys over the table; they carry no order of their own, so ``RowKey.sort_key``
drops them when they lead the key. Hash inputs are the fields' UTF-8 text (integers in decimal),
joined by ``0x00`` when there are several fields.

- ``salt(f1, f2, ..., N[, hash])``: one byte ``hash(input) % N``, N in 1..256, hash ``murmur3``
  (default: MurmurHash3 x86 32-bit, seed 0, unsigned), ``md5`` (first 4 digest bytes, big-endian) or
  ``phoenix`` (Java ``31*h + b`` over signed bytes from 1, ``abs(h % N)``, as Phoenix's
  ``SaltingUtil``). ``salt(N[, hash])`` without fields hashes the rest of the key after the salt
  byte, which with ``phoenix`` reproduces Phoenix's salt byte over the encoded primary key.
- ``md5(f, n)`` (also ``md5(f).subStr(0, n)``): the first ``n`` lowercase hex characters of
  ``md5(input)``; ``md5("abc001")`` starts with ``9bf0``.
- ``mod(v, n)`` (also ``[v % n]``): ``v % n`` (Python's non-negative remainder) as one byte for
  ``n <= 256``, as the fewest big-endian bytes that hold ``n - 1`` otherwise, or with ``text`` as
  zero-padded decimal of ``len(str(n - 1))`` digits.
- ``random(n)``: a value from the build's random source, rendered like ``mod``. Keys are no longer
  point-readable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import mmh3

from pipeline.rowkey.codecs import (
    BYTE,
    HASHES,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    as_int,
    encode_text,
    hash_input,
    md5_salt,
    phoenix_salt,
)
from pipeline.rowkey.codegen import CodeGen
from pipeline.rowkey.errors import RowKeyError
from pipeline.rowkey.segments import NumberedSegment, RandomLike, Segment

__all__ = ["Bucketed", "KeySalt", "Md5", "Mod", "Random", "Salt"]


def _hash_data(seg: Segment, g: CodeGen) -> str:
    parts = [g.text(f, p) for f, p in zip(seg.fields, seg.paths, strict=True)]
    if len(parts) == 1:
        return parts[0]
    return f"b'\\x00'.join(({', '.join(parts)},))"


def _input(seg: Segment, values: Mapping[str, Any]) -> bytes:
    return hash_input([encode_text(f, values[f]) for f in seg.fields])


def _bucket_prefixes(seg: Segment, n_regions: int) -> list[bytes] | None:
    """Split prefixes on bucket boundaries: the values at ``round(i * N / n)`` of the segment's ``N``
    values (one region per value, as Phoenix does, when ``n == N``); a region never holds part of a
    bucket. None when ``n_regions`` exceeds ``N``."""
    count = seg.value_count or 1
    if n_regions > count:
        return None
    values = seg.enum_values()
    return [values[b] for b in sorted({round(i * count / n_regions) for i in range(1, n_regions)}) if 0 < b < count]


class Salt(Segment):
    kind = "salt"
    distributing = True
    __slots__ = ("buckets", "hash")

    def __init__(self, source: str, fields: tuple[str, ...], buckets: int, hash: str, pos: int):
        super().__init__(source, fields, 1, pos)
        self.buckets = buckets
        self.hash = hash

    @property
    def order(self) -> str:
        return "hash bucket (no order)"

    @property
    def layout(self) -> str:
        over = ", ".join(self.fields) if self.fields else "the rest of the key"
        return f"one byte = {self.hash}({over}) % {self.buckets}"

    @property
    def value_count(self) -> int | None:
        return self.buckets

    def salt_of(self, data: bytes) -> bytes:
        return BYTE[HASHES[self.hash](data, self.buckets)]

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        return self.salt_of(_input(self, values))

    def emit(self, g: CodeGen) -> str:
        return self.emit_over(g, _hash_data(self, g))

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        return (2, self.paths, self.buckets) if self.hash == "murmur3" and terminator is None else None

    def emit_over(self, g: CodeGen, data: str) -> str:
        """Expression for the salt byte of the bytes expression ``data``."""
        table = g.const(BYTE, "b")
        n = self.buckets
        if self.hash == "murmur3":
            return f"{table}[{g.const(mmh3.hash, 'h')}({data}, 0, False) % {n}]"
        if self.hash == "md5":
            return f"{table}[{g.const(md5_salt, 'h')}({data}) % {n}]"
        return f"{table}[{g.const(phoenix_salt, 'h')}({data}, {n})]"

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return []

    def decode(self, chunk: bytes) -> dict[str, Any]:
        if chunk[0] >= self.buckets:
            raise self.bad(chunk, f"salt byte outside 0..{self.buckets - 1}")
        return {}

    def label(self, chunk: bytes) -> str:
        return f"salt={chunk[0]}"

    def enum_values(self) -> list[bytes]:
        return list(BYTE[: self.buckets])

    def split_prefixes(self, n_regions: int) -> list[bytes] | None:
        return _bucket_prefixes(self, n_regions)

    def warnings(self) -> list[str]:
        if self.buckets <= 64:
            return []
        return [f"{self.source}: {self.buckets} buckets mean {self.buckets} scans per range "
                "read; 4 to 64 buckets is the usual range"]


class KeySalt(Salt):
    """``salt(N[, hash])``: the salt byte hashes the encoded rest of the key (Phoenix style)."""

    computable = False

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        return (4, self.buckets) if index == 0 and self.hash == "murmur3" and terminator is None else None
    __slots__ = ()


class Md5(Segment):
    kind = "md5"
    distributing = True
    __slots__ = ()

    @property
    def order(self) -> str:
        return "hash prefix (no order)"

    @property
    def layout(self) -> str:
        return f"first {self.width} hex chars of md5({', '.join(self.fields)})"

    @property
    def value_count(self) -> int | None:
        return int(16 ** (self.width or 0))

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        return hashlib.md5(_input(self, values)).hexdigest()[: self.width].encode()

    def emit(self, g: CodeGen) -> str:
        md5 = g.const(hashlib.md5, "md5")
        return f"{md5}({_hash_data(self, g)}).hexdigest()[:{self.width}].encode()"

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return []

    def decode(self, chunk: bytes) -> dict[str, Any]:
        if chunk.strip(b"0123456789abcdef"):
            raise self.bad(chunk, "expected lowercase hex")
        return {}

    def label(self, chunk: bytes) -> str:
        return f"md5={chunk.decode('ascii', 'replace')}"

    def enum_values(self) -> list[bytes]:
        w = self.width or 0
        return [b"%0*x" % (w, i) for i in range(16**w)]

    def split_prefixes(self, n_regions: int) -> list[bytes] | None:
        """Evenly spaced points ``i * 16**w // n`` of the hex space, in lowercase hex with trailing zeros
        dropped, so every region gets keys (splitting the byte range would leave ``9``-``a`` empty)."""
        width = self.width or 0
        space = 16**width
        if n_regions > space:
            return None
        out: list[bytes] = []
        for i in range(1, n_regions):
            point = (b"%0*x" % (width, i * space // n_regions)).rstrip(b"0") or b"0"
            if not out or point > out[-1]:
                out.append(point)
        return out

    def warnings(self) -> list[str]:
        if (self.value_count or 0) <= 1024 or self.fields == ():
            return []
        return [f"{self.source}: {self.value_count} possible prefixes; reads that cannot "
                "compute the hash scan region by region with a filter"]


class Bucketed(NumberedSegment):
    """A value in ``0..n-1`` rendered as bytes or decimal text (``mod`` and ``random``)."""

    __slots__ = ("fmt", "n", "text")

    def __init__(self, source: str, fields: tuple[str, ...], n: int, text: bool, pos: int):
        digits = len(str(n - 1))
        width = digits if text else max(1, ((n - 1).bit_length() + 7) // 8)
        super().__init__(source, fields, width, pos)
        self.n = n
        self.text = text
        self.fmt = b"%0" + str(digits).encode() + b"d"

    @property
    def order(self) -> str:
        return "bucket number (no order of its own)"

    @property
    def value_count(self) -> int | None:
        return self.n

    def render(self, k: int) -> bytes:
        if self.text:
            return self.fmt % k
        return BYTE[k] if self.width == 1 else k.to_bytes(self.width or 1, "big")

    def emit_render(self, g: CodeGen, k: str) -> str:
        if self.text:
            return f"({g.const(self.fmt, 'fmt')} % ({k}))"
        if self.width == 1:
            return f"{g.const(BYTE, 'b')}[{k}]"
        return f"({k}).to_bytes({self.width}, 'big')"

    def bucket_of(self, chunk: bytes) -> int:
        if self.text:
            if not chunk.isdigit():
                raise self.bad(chunk, "expected decimal digits")
            k = int(chunk)
        else:
            k = int.from_bytes(chunk, "big")
        if k >= self.n:
            raise self.bad(chunk, f"bucket outside 0..{self.n - 1}")
        return k

    def enum_values(self) -> list[bytes]:
        return [self.render(k) for k in range(self.n)]

    def split_prefixes(self, n_regions: int) -> list[bytes] | None:
        return _bucket_prefixes(self, n_regions) if self.distributing else None  # a time bucket: a sample


class Mod(Bucketed):
    kind = label_name = "mod"
    numeric = True
    distributing = True
    __slots__ = ()

    @property
    def layout(self) -> str:
        form = "decimal text" if self.text else f"{self.width} byte(s)"
        return f"{self.fields[0]} % {self.n} as {form}"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        v = as_int(field, values[field], JAVA_LONG_MIN, JAVA_LONG_MAX, self.source)
        return self.render(v % self.n)

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is int and {JAVA_LONG_MIN} <= {v} <= {JAVA_LONG_MAX}")
        return self.emit_render(g, f"{v} % {self.n}")

    def residues(self, lo: int, hi: int) -> list[bytes] | None:
        """Bucket values of ``v`` in ``[lo, hi)`` when that is fewer than all ``n``, else None."""
        if hi - lo >= self.n:
            return None
        return [self.render(k) for k in sorted({v % self.n for v in range(lo, hi)})]


class Random(Bucketed):
    kind = label_name = "random"
    distributing = True
    computable = False
    __slots__ = ()

    def warnings(self) -> list[str]:
        return [f"no point reads: {self.source} makes keys unpredictable; a get must try all "
                f"{self.n} values (use a hash of fields instead if rows are read back)"]

    @property
    def layout(self) -> str:
        form = "decimal text" if self.text else f"{self.width} byte(s)"
        return f"random value in 0..{self.n - 1} as {form}"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        if rng is None:
            raise RowKeyError(f"{self.source} needs a random source")
        return self.render(rng.randrange(self.n))

    def emit(self, g: CodeGen) -> str:
        return self.emit_render(g, f"{g.rng()}.randrange({self.n})")
