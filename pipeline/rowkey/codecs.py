"""Low-level encoders shared by the segment kinds: value coercion, hashes, durations, byte tables.

Every function here is pure. Coercion helpers raise :class:`EventFieldError` naming the field.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import mmh3

from pipeline.rowkey.errors import EventFieldError

__all__ = [
    "BYTE",
    "ESC_END",
    "ESC_NUL",
    "ESC_ZERO",
    "HASHES",
    "JAVA_LONG_MAX",
    "JAVA_LONG_MIN",
    "PACK_I",
    "PACK_Q",
    "UNPACK_I",
    "UNPACK_Q",
    "PACK_i",
    "PACK_q",
    "UNPACK_i",
    "UNPACK_q",
    "as_int",
    "as_text",
    "encode_text",
    "escape_bytes",
    "escape_fault",
    "escaped_end",
    "fetch",
    "hash_input",
    "md5_salt",
    "murmur3",
    "parse_duration",
    "phoenix_hash",
    "phoenix_salt",
    "prefix_successor",
]

JAVA_LONG_MAX = (1 << 63) - 1
JAVA_LONG_MIN = -(1 << 63)

#: ``BYTE[n]`` is the one-byte ``bytes`` object for ``n`` in 0..255 (no allocation on the hot path).
BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(256))

PACK_q = struct.Struct(">q").pack  # Java Bytes.toBytes(long): 8 bytes, big-endian two's complement
PACK_Q = struct.Struct(">Q").pack
PACK_i = struct.Struct(">i").pack  # Java Bytes.toBytes(int): 4 bytes
PACK_I = struct.Struct(">I").pack
#: ``UNPACK_x(buffer, offset)[0]``: the number stored at ``offset`` (no slice on the read path)
UNPACK_q = struct.Struct(">q").unpack_from
UNPACK_Q = struct.Struct(">Q").unpack_from
UNPACK_i = struct.Struct(">i").unpack_from
UNPACK_I = struct.Struct(">I").unpack_from

_MISSING = object()


def fetch(event: Mapping[str, Any], path: tuple[str, ...], field: str) -> Any:
    """Return ``event[path[0]][path[1]]...``; a missing key, a null or a non-mapping step is
    ``missing_field``."""
    value: Any = event
    for part in path:
        if not isinstance(value, Mapping):
            raise EventFieldError(field, None, "missing_field", "is missing from the event")
        value = value.get(part, _MISSING)
        if value is _MISSING:
            raise EventFieldError(field, None, "missing_field", "is missing from the event")
    if value is None:
        raise EventFieldError(field, None, "missing_field", "is null")
    return value


def as_text(field: str, value: Any) -> str:
    """Text for a text segment: a ``str`` as is, an ``int`` (not bool) in decimal, a
    :class:`~decimal.Decimal` (a registry format's ``decimal``) as plain decimal text with its scale (no
    exponent: ``12.50``), anything else is ``bad_type``."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, Decimal) and value.is_finite():
        return format(value, "f")
    raise EventFieldError(
        field, value, "bad_type", f"must be text or an integer, got {type(value).__name__}"
    )


def as_int(field: str, value: Any, lo: int, hi: int, what: str) -> int:
    """An integer in ``[lo, hi]``; bools, floats and strings are ``bad_type``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise EventFieldError(
            field, value, "bad_type", f"must be an integer for {what}, got {type(value).__name__}"
        )
    if not lo <= value <= hi:
        raise EventFieldError(field, value, "out_of_range", f"must lie in [{lo}, {hi}] for {what}")
    return int(value)


def encode_text(field: str, value: Any) -> bytes:
    """UTF-8 bytes of :func:`as_text`; ``bytes`` as they are (a registry format's ``bytes``/``fixed``, a
    record key read as ``bytes``); lone surrogates are ``bad_type``."""
    if isinstance(value, bytes):
        return value
    text = as_text(field, value)
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise EventFieldError(field, value, "bad_type", "is not valid Unicode text") from exc


#: Escaped text (``text(f, escaped)``, CockroachDB's ascending bytes encoding without its type marker):
#: every ``ESC_NUL`` byte of the value is written as ``ESC_ZERO`` and the value ends with ``ESC_END``.
ESC_NUL = b"\x00"
ESC_ZERO = b"\x00\xff"
ESC_END = b"\x00\x01"


def escape_bytes(data: bytes) -> bytes:
    """``data`` with every 0x00 written as 0x00 0xFF, then the terminator 0x00 0x01.

    The result is self-delimiting (its end is the first 0x00 followed by 0x01), injective, and sorts
    as ``data`` does whatever follows it: for ``a < b``, ``escape_bytes(a) + x < escape_bytes(b) + y``
    for any ``x`` and ``y``, a proper prefix included, because the terminator (0x00 0x01) sorts below
    an escaped 0x00 (0x00 0xFF), which sorts below every other byte, and no encoded value is a prefix
    of another.
    """
    return data.replace(ESC_NUL, ESC_ZERO) + ESC_END


def escaped_end(key: bytes, start: int) -> int:
    """The end (exclusive, after the terminator) of the :func:`escape_bytes` bytes that start at
    ``start`` in ``key``; -1 when they are malformed (see :func:`escape_fault`)."""
    i = key.find(ESC_NUL, start)
    while i >= 0:
        nxt = key[i + 1 : i + 2]
        if nxt == b"\x01":
            return i + 2
        if nxt != b"\xff":
            return -1
        i = key.find(ESC_NUL, i + 2)
    return -1


def escape_fault(key: bytes, start: int) -> str:
    """Why :func:`escaped_end` finds no end for the bytes at ``start``: a 0x00 followed by neither
    0xFF nor 0x01, or no terminator."""
    i = key.find(ESC_NUL, start)
    while i >= 0 and key[i + 1 : i + 2] == b"\xff":
        i = key.find(ESC_NUL, i + 2)
    if i >= 0 and i + 1 < len(key):
        return (
            f"0x00 at byte {i} is followed by 0x{key[i + 1]:02X}, neither 0xFF (an escaped 0x00) "
            "nor 0x01 (the terminator)"
        )
    return f"no 0x00 0x01 terminator after byte {start}"


def hash_input(parts: list[bytes]) -> bytes:
    """The bytes fed to a hash over several fields: their UTF-8 text joined by ``0x00``."""
    return parts[0] if len(parts) == 1 else b"\x00".join(parts)


def murmur3(data: bytes) -> int:
    """MurmurHash3 x86 32-bit, seed 0, as an unsigned int (``mmh3.hash(data, 0, False)``)."""
    return int(mmh3.hash(data, 0, False))


def md5_salt(data: bytes) -> int:
    """The first 4 bytes of MD5(data) as an unsigned big-endian int."""
    return int.from_bytes(hashlib.md5(data).digest()[:4], "big")


def phoenix_hash(data: bytes) -> int:
    """Java ``result = 31 * result + b`` over signed bytes, starting at 1, with int32 overflow
    (Phoenix ``SaltingUtil.calculateHashCode``)."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def phoenix_salt(data: bytes, buckets: int) -> int:
    """Phoenix ``SaltingUtil.getSaltingByte``: ``abs(hash % buckets)`` with Java's truncating
    ``%``."""
    h = phoenix_hash(data)
    r = abs(h) % buckets
    return r


#: hash name -> function(data, buckets) -> bucket in [0, buckets)
HASHES: dict[str, Callable[[bytes, int], int]] = {
    "murmur3": lambda data, n: murmur3(data) % n,
    "md5": lambda data, n: md5_salt(data) % n,
    "phoenix": phoenix_salt,
}

_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(text: str) -> int | None:
    """``15m`` -> 900000 (milliseconds). Units: ms, s, m, h, d, w; a bare number is milliseconds.
    Returns None when ``text`` is not a duration."""
    m = _DURATION.match(text)
    if not m:
        return None
    return int(m.group(1)) * _UNIT_MS[m.group(2) or "ms"]


def prefix_successor(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix``; ``b""`` (end of table) when
    there is none (empty prefix or all 0xFF)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b""
    return stripped[:-1] + BYTE[stripped[-1] + 1]
