"""Text segments: literals, plain fields, padded fields, reversed text and dictionary codes.

Byte layouts and sort orders:

- ``literal`` (``[_]``, ``['#']``): the literal's UTF-8 bytes; constant.
- ``text`` (``[user_id]``): the field's UTF-8 text (integers in decimal); variable width; sorts in
  byte order, which for UTF-8 is code point order.
- ``text(f, escaped)``: the same text with every 0x00 byte written as 0x00 0xFF, then the terminator
  0x00 0x01 (CockroachDB's ascending bytes encoding, without its type marker): one byte more per
  0x00, two for the terminator. Self-delimiting: the segment ends at the first 0x00 0x01, so it takes
  any value (the delimiter, 0x00, any byte) and needs no delimiter after it. Sorts as the plain
  text (UTF-8 byte order) whatever follows it, a value before every longer value it is a prefix of.
- ``rpad(f, 'x', 20)`` / ``lpad(f, '0', 10)``: the text padded on the right / left with one ASCII
  pad byte to exactly ``width`` bytes; a longer value is an error (``too_long``), never truncated.
  Sorts as the padded bytes: the value order when the pad byte sorts below every value byte (rpad
  with ``'\\x00'``), numeric order for digit strings left-padded with ``'0'``. Decoding strips the
  pad, so a value that itself ends (rpad) or starts (lpad) with the pad character does not
  round-trip.
- ``reverse(f)``: the text reversed by code point (phone numbers, increasing ids); variable width;
  the natural order is lost on purpose.
- ``code(f, {Taobao: tb, ...}, default=xx)``: the short code's UTF-8 bytes; fixed width when every
  code has the same length. A value outside the dictionary is ``unmapped_code`` unless a default is
  given. Sorts in the codes' byte order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.rowkey.codecs import (
    ESC_END,
    ESC_NUL,
    ESC_ZERO,
    as_text,
    encode_text,
    escape_bytes,
    escape_fault,
    escaped_end,
)
from pipeline.rowkey.codegen import CodeGen
from pipeline.rowkey.errors import EventFieldError, KeyDecodeError
from pipeline.rowkey.segments import RandomLike, Segment

__all__ = ["Code", "EscapedText", "LPad", "Literal", "Pad", "RPad", "Reverse", "Text"]


def _utf8(seg: Segment, chunk: bytes) -> str:
    try:
        return chunk.decode()
    except UnicodeDecodeError as exc:
        raise seg.bad(chunk, "not UTF-8 text") from exc


def _digits_time(text: str) -> tuple[int, int] | None:
    if text.isascii() and text.isdigit():
        n = int(text)
        return n, n + 1
    return None


class Literal(Segment):
    kind = "literal"
    __slots__ = ("data",)

    def __init__(self, source: str, data: bytes, pos: int) -> None:
        super().__init__(source, (), len(data), pos)
        self.data = data

    @property
    def order(self) -> str:
        return "constant"

    @property
    def layout(self) -> str:
        return f"literal {self.data!r}"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        return self.data

    def emit(self, g: CodeGen) -> str:
        return g.const(self.data, "lit")

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        return (1, self.data) if terminator is None else None

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return []

    def decode(self, chunk: bytes) -> dict[str, Any]:
        if chunk != self.data:
            raise self.bad(chunk, f"expected literal {self.data!r}")
        return {}


class Text(Segment):
    kind = "text"
    invertible = True
    time_readable = True
    __slots__ = ()

    @property
    def order(self) -> str:
        return "ascending, UTF-8 byte order"

    @property
    def layout(self) -> str:
        return f"{self.fields[0]} as UTF-8 text (integers in decimal)"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        return encode_text(self.fields[0], values[self.fields[0]])

    def key_op(self, index: int, terminator: bytes | None) -> tuple[Any, ...] | None:
        return (0, self.paths[0], terminator)

    def emit(self, g: CodeGen) -> str:
        return g.text(self.fields[0], self.paths[0])

    def decode(self, chunk: bytes) -> dict[str, Any]:
        return {self.fields[0]: _utf8(self, chunk)}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return [(self.fields[0], f"{key}[{start}:{end}].decode()")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        return _digits_time(_utf8(self, chunk))


class EscapedText(Segment):
    """``text(f, escaped)``: any text, self-delimiting and order-preserving.

    Bytes: the field's UTF-8 text (as :class:`Text`: integers in decimal, ``bytes`` as they are) with
    every 0x00 written as 0x00 0xFF, then 0x00 0x01. Order: for values ``a < b`` in UTF-8 byte order
    (``a`` a prefix of ``b`` included), ``enc(a) + x < enc(b) + y`` for any bytes ``x``, ``y`` that
    follow, since no encoded value is a prefix of another. Decoding finds the end (the first 0x00
    0x01) without the segments after it, and refuses a 0x00 followed by anything but 0xFF or 0x01,
    or bytes without the terminator. A distinct class from :class:`Text` on purpose: code that takes
    ``type(seg) is Text`` for raw UTF-8 bytes must not take this one.
    """

    kind = "escaped_text"
    invertible = True
    time_readable = True
    self_delimiting = True
    __slots__ = ()

    @property
    def order(self) -> str:
        return "ascending, UTF-8 byte order (self-delimiting)"

    @property
    def layout(self) -> str:
        return (
            f"{self.fields[0]} as UTF-8 text (integers in decimal), each 0x00 as 0x00 0xFF, "
            "ended by 0x00 0x01"
        )

    @property
    def min_width(self) -> int:
        return len(ESC_END)

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        return escape_bytes(encode_text(self.fields[0], values[self.fields[0]]))

    def emit(self, g: CodeGen) -> str:
        t = g.text(self.fields[0], self.paths[0])
        nul, zero, end = g.const(ESC_NUL, "nul"), g.const(ESC_ZERO, "esc"), g.const(ESC_END, "end")
        return f"({t}.replace({nul}, {zero}) + {end})"

    def end_in(self, key: bytes, start: int) -> int:
        end = escaped_end(key, start)
        if end < 0:
            raise KeyDecodeError(f"segment {self.source}: {escape_fault(key, start)}")
        return end

    def emit_end(self, g: CodeGen, key: str, start: str) -> str:
        return f"{g.const(escaped_end, 'end')}({key}, {start})"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        end = escaped_end(chunk, 0)
        if end < 0:
            raise self.bad(chunk, escape_fault(chunk, 0))
        if end != len(chunk):
            raise self.bad(chunk, f"the terminator ends at byte {end}, before the segment's end")
        return {self.fields[0]: _utf8(self, chunk[: -len(ESC_END)].replace(ESC_ZERO, ESC_NUL))}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        zero, nul = g.const(ESC_ZERO, "esc"), g.const(ESC_NUL, "nul")
        body = f"{key}[{start}:({end}) - {len(ESC_END)}]"
        return [(self.fields[0], f"{body}.replace({zero}, {nul}).decode()")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        text: str = self.decode(chunk)[self.fields[0]]
        return _digits_time(text)


class Pad(Segment):
    """Base of :class:`RPad` and :class:`LPad`."""

    right = True
    invertible = True
    time_readable = True
    __slots__ = ("pad",)

    def __init__(self, source: str, field: str, pad: bytes, width: int, pos: int) -> None:
        super().__init__(source, (field,), width, pos)
        self.pad = pad

    @property
    def order(self) -> str:
        if self.right:
            return f"byte order of the value right-padded with {self.pad!r}"
        return f"byte order of the value left-padded with {self.pad!r}"

    @property
    def layout(self) -> str:
        side = "right" if self.right else "left"
        return f"{self.fields[0]} as UTF-8, {side}-padded with {self.pad!r} to {self.width} bytes"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        data = encode_text(field, values[field])
        width = self.width or 0
        if len(data) > width:
            raise EventFieldError(
                field,
                values[field],
                "too_long",
                f"is {len(data)} bytes, longer than the {self.kind} width {width}",
            )
        return data.ljust(width, self.pad) if self.right else data.rjust(width, self.pad)

    def emit(self, g: CodeGen) -> str:
        t = g.text(self.fields[0], self.paths[0])
        g.guard(f"len({t}) <= {self.width}")
        pad = g.const(self.pad, "pad")
        return f"{t}.{'ljust' if self.right else 'rjust'}({self.width}, {pad})"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        raw = chunk.rstrip(self.pad) if self.right else chunk.lstrip(self.pad)
        return {self.fields[0]: _utf8(self, raw)}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        strip = "rstrip" if self.right else "lstrip"
        pad = g.const(self.pad, "pad")
        return [(self.fields[0], f"{key}[{start}:{end}].{strip}({pad}).decode()")]

    def time_of(self, chunk: bytes) -> tuple[int, int] | None:
        text = _utf8(self, chunk.rstrip(self.pad) if self.right else chunk.lstrip(self.pad))
        return _digits_time(text)


class RPad(Pad):
    kind = "rpad"
    right = True
    __slots__ = ()


class LPad(Pad):
    kind = "lpad"
    right = False
    __slots__ = ()


class Reverse(Segment):
    kind = "reverse"
    invertible = True
    __slots__ = ()

    @property
    def order(self) -> str:
        return "byte order of the reversed text (natural order lost)"

    @property
    def layout(self) -> str:
        return f"{self.fields[0]} as UTF-8 text, reversed"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        text = as_text(field, values[field])
        return encode_text(field, text[::-1])

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is str")
        return f"{v}[::-1].encode()"

    def decode(self, chunk: bytes) -> dict[str, Any]:
        return {self.fields[0]: _utf8(self, chunk)[::-1]}

    def emit_decode(
        self, g: CodeGen, key: str, start: str, end: str
    ) -> list[tuple[str | None, str]]:
        return [(self.fields[0], f"{key}[{start}:{end}].decode()[::-1]")]


class Code(Segment):
    kind = "code"
    invertible = True  # except for values mapped to the default or to a shared code
    __slots__ = ("codes", "default", "reverse")

    def __init__(
        self, source: str, field: str, codes: dict[str, bytes], default: bytes | None, pos: int
    ) -> None:
        lengths = {len(c) for c in codes.values()} | (
            {len(default)} if default is not None else set()
        )
        super().__init__(source, (field,), lengths.pop() if len(lengths) == 1 else None, pos)
        self.codes = codes
        self.default = default
        rev: dict[bytes, str] = {}
        dup: set[bytes] = set()
        for value, code in codes.items():
            if code in rev:
                dup.add(code)
            rev[code] = value
        for code in dup | ({default} if default is not None else set()):
            rev.pop(code, None)
        self.reverse = rev

    @property
    def order(self) -> str:
        return "byte order of the codes"

    @property
    def layout(self) -> str:
        d = f", default {self.default!r}" if self.default is not None else ""
        return f"{self.fields[0]} as one of {len(self.codes)} short codes{d}"

    def encode(self, values: Mapping[str, Any], rng: RandomLike | None) -> bytes:
        field = self.fields[0]
        raw = values[field]
        code = self.codes.get(as_text(field, raw))
        if code is None:
            if self.default is None:
                known = ", ".join(sorted(self.codes)[:8])
                raise EventFieldError(field, raw, "unmapped_code", f"has no code (known: {known})")
            code = self.default
        return code

    def emit(self, g: CodeGen) -> str:
        v = g.value(self.fields[0], self.paths[0])
        g.guard(f"{v}.__class__ is str")
        table = g.const(self.codes, "codes")
        if self.default is not None:
            return f"{table}.get({v}, {g.const(self.default, 'dflt')})"
        x = g.tmp()
        g.stmt(f"{x} = {table}.get({v})")
        g.guard(f"{x} is not None")
        return x

    def decode(self, chunk: bytes) -> dict[str, Any]:
        value = self.reverse.get(chunk)
        if value is not None:
            return {self.fields[0]: value}
        if chunk == self.default or chunk in self.codes.values():
            return {}
        raise self.bad(chunk, "unknown code")
