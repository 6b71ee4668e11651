"""The column encodings: how a field's value becomes a cell's bytes and back. One table,
:data:`ENCODINGS`, that every user of an encoding reads: the router's reference path
(:func:`pipeline.core.routes.fields.encoder`), the generated put builders (:mod:`pipeline.core.routes.putgen`), the
reader's cell decoders (:mod:`pipeline.runtime.read.columns`) and its generated row decoders
(:mod:`pipeline.runtime.read.rows`). ``ColumnSpec.encoding`` accepts exactly its names.

- ``text``: UTF-8; ints and floats in decimal, booleans ``true``/``false``, anything else as JSON.
  Read back as ``str`` (invalid UTF-8 raises).
- ``json``: orjson's compact JSON of the value (integers beyond 64 bits exact). Read back parsed.
- ``long``: 8 bytes, big-endian two's complement (Java's ``Bytes.toBytes(long)``, what HBase counters
  hold); an integer outside 64 bits is ``out_of_range``, anything but an integer ``bad_type``. Read
  back as ``int`` from exactly 8 bytes (any other length raises ``ValueError``).
- ``bytes``: ``bytes`` as they are (Avro ``bytes``/``fixed``, Protobuf ``bytes``), a string as UTF-8;
  anything else ``bad_type``. Read back as ``bytes``.
- ``decimal``: Java's ``Bytes.toBytes(BigDecimal)`` (what Phoenix and HBase clients read): the scale as
  4 bytes big-endian, then the unscaled value as the shortest big-endian two's complement
  (``BigInteger.toByteArray``). Takes a ``Decimal`` (Avro's and Protobuf's decimals), an integer, or a
  string holding a decimal number (``"12.50"``: scale 2); a float is ``bad_type`` (binary floats are
  not exact), NaN and infinities ``out_of_range``. Read back as ``Decimal`` (fewer than 5 bytes raises
  ``ValueError``).

``text`` writes ``bytes`` as they are and a ``Decimal`` as its plain text with its scale (``12.50``,
never an exponent); ``json`` writes a ``Decimal`` as that exact number and ``bytes`` as base64 text.

Each encoding carries its rule twice: as functions (``encoder``, ``decode``) and as the statements the
code generators inline (``write_lines``, ``read_lines``), side by side so that one change touches
both; property tests hold the generated code to the functions. ``write_lines`` turn the value ``{v}``
into the bytes ``{r}`` or end in ``{slow}`` (the fast form gives up: the reference decides);
``read_lines`` turn the bytes ``v`` into ``cols[{name}]`` or raise ``ValueError``. The names they use
are in :data:`NAMESPACE`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from pipeline.core.records.decode import dumps, loads
from pipeline.errors import EventError

__all__ = ["ENCODINGS", "NAMESPACE", "Encoding", "decode_decimal", "decode_long", "encode_decimal", "encode_long",
           "text"]

_LONG = struct.Struct(">q")
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def encode_long(value: int) -> bytes:
    return _LONG.pack(value)


def decode_long(value: bytes) -> int:
    """8-byte big-endian signed -> int (Java ``Bytes.toLong``); other lengths raise ValueError."""
    if len(value) != 8:
        raise ValueError(f"expected 8 bytes, got {len(value)}")
    return int.from_bytes(value, "big", signed=True)


def text(value: Any) -> bytes:
    """The ``text`` encoding of one value."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int | float):
        return str(value).encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, Decimal):
        return format(value, "f").encode()
    return dumps(value)


def encode_decimal(value: Decimal) -> bytes:
    """Java's ``Bytes.toBytes(BigDecimal)`` of a finite ``value`` (module docstring)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite: checked by the caller
    unscaled = int("".join(map(str, digits)) or "0")
    if sign:
        unscaled = -unscaled
    scale = -exponent
    size = (unscaled + (unscaled < 0)).bit_length() // 8 + 1  # BigInteger.toByteArray: sign bit included
    return struct.pack(">i", scale) + unscaled.to_bytes(size, "big", signed=True)


def decode_decimal(value: bytes) -> Decimal:
    """The inverse of :func:`encode_decimal`; fewer than 5 bytes raise ValueError."""
    if len(value) < 5:
        raise ValueError(f"expected at least 5 bytes (4 of scale, then the unscaled value), got {len(value)}")
    scale = struct.unpack_from(">i", value)[0]
    return Decimal(f"{int.from_bytes(value[4:], 'big', signed=True)}E{-scale}")  # exact: no context rounding


def _decimal(field: str) -> Callable[[Any], bytes]:
    def enc(value: Any) -> bytes:
        number = value
        if isinstance(value, str):
            try:
                number = Decimal(value.strip())
            except InvalidOperation:
                raise EventError("bad_type", f"field {field!r}: {value!r} is not a decimal number") from None
        elif isinstance(value, int) and not isinstance(value, bool):
            number = Decimal(value)
        elif not isinstance(value, Decimal):
            raise EventError("bad_type", f"field {field!r}: expected a decimal (Decimal, integer or decimal text) "
                                         f"for a decimal column, got {type(value).__name__} {value!r}")
        if not number.is_finite():
            raise EventError("out_of_range", f"field {field!r}: {value} is not a finite decimal")
        return encode_decimal(number)
    return enc


def _bytes(field: str) -> Callable[[Any], bytes]:
    def enc(value: Any) -> bytes:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode()
        raise EventError("bad_type", f"field {field!r}: expected bytes or a string for a bytes column, "
                                     f"got {type(value).__name__} {value!r}")
    return enc


def _long(field: str) -> Callable[[Any], bytes]:
    def enc(value: Any) -> bytes:
        if not isinstance(value, int) or isinstance(value, bool):
            raise EventError("bad_type", f"field {field!r}: expected an integer for a long column, "
                                         f"got {type(value).__name__} {value!r}")
        try:
            return _LONG.pack(value)
        except struct.error as exc:
            raise EventError("out_of_range", f"field {field!r}: {value} does not fit in 8 bytes") from exc
    return enc


def _utf8(value: bytes) -> str:
    return value.decode("utf-8")


@dataclass(frozen=True)
class Encoding:
    """One column encoding (module docstring)."""

    name: str
    #: ``encoder(field)``: the encoding of one field's values (its errors name the field)
    encoder: Callable[[str], Callable[[Any], bytes]]
    decode: Callable[[bytes], Any]
    write_lines: tuple[str, ...]
    read_lines: tuple[str, ...]


ENCODINGS: dict[str, Encoding] = {e.name: e for e in (
    Encoding("text", lambda field: text, _utf8,
             ("c = {v}.__class__", "if c is str:", "    {r} = {v}.encode()", "elif c is int or c is float:",
              "    {r} = str({v}).encode()", "else:", "    {r} = _text({v})"),
             ("cols[{name}] = v.decode()",)),
    Encoding("json", lambda field: dumps, loads,
             ("{r} = _dumps({v})",),
             ("cols[{name}] = _loads(v)",)),
    Encoding("long", _long, decode_long,
             (f"if {{v}}.__class__ is int and {LONG_MIN} <= {{v}} <= {LONG_MAX}:", "    {r} = _pack_q({v})", "else:",
              "    {slow}"),
             ("if len(v) != 8:", "    raise ValueError", "cols[{name}] = _from_bytes(v, 'big', signed=True)")),
    Encoding("bytes", _bytes, bytes,
             ("c = {v}.__class__", "if c is bytes:", "    {r} = {v}", "elif c is str:", "    {r} = {v}.encode()",
              "else:", "    {slow}"),
             ("cols[{name}] = v",)),
    Encoding("decimal", _decimal, decode_decimal,
             ("if {v}.__class__ is _Decimal and {v}.is_finite():", "    {r} = _encode_decimal({v})", "else:",
              "    {slow}"),
             ("cols[{name}] = _decode_decimal(v)",)),
)}

#: the names ``write_lines`` and ``read_lines`` use
NAMESPACE: dict[str, Any] = {"_text": text, "_dumps": dumps, "_pack_q": _LONG.pack, "_loads": loads,
                             "_from_bytes": int.from_bytes, "_decode_decimal": decode_decimal,
                             "_Decimal": Decimal, "_encode_decimal": encode_decimal}
