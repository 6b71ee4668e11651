"""Reading a field from a decoded event and encoding it as a cell: the column encodings of a route.

Encodings: ``text`` (UTF-8; ints/floats in decimal, booleans ``true``/``false``, other values as
JSON), ``json`` (orjson of the value), ``long`` (8-byte big-endian two's complement, as Java's
``Bytes.toBytes(long)``; also what HBase counters hold). A value an encoding cannot hold raises
:class:`~pipeline.errors.EventError` (``bad_type``, ``out_of_range``) naming the field.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from pipeline.core.decode import dumps
from pipeline.errors import EventError
from pipeline.settings import ColumnSpec

__all__ = ["MISSING", "encode_long", "encoder", "getter", "text"]

_LONG = struct.Struct(">q")
#: what :func:`getter` returns for an absent field
MISSING = object()


def encode_long(value: int) -> bytes:
    return _LONG.pack(value)


def getter(path: str) -> Callable[[Mapping[str, Any]], Any]:
    """A function reading a dotted path (``a.b.c``) from a decoded event; returns a sentinel when absent."""
    parts = tuple(path.split("."))
    if len(parts) == 1:
        key = parts[0]
        return lambda event: event.get(key, MISSING)

    def get(event: Mapping[str, Any]) -> Any:
        cur: Any = event
        for p in parts:
            if not isinstance(cur, Mapping):
                return MISSING
            cur = cur.get(p, MISSING)
            if cur is MISSING:
                return MISSING
        return cur
    return get


def text(value: Any) -> bytes:
    """The ``text`` column encoding: UTF-8; ints/floats in decimal, booleans ``true``/``false``,
    anything else as JSON."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int | float):
        return str(value).encode()
    return dumps(value)


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


def encoder(spec: ColumnSpec) -> Callable[[Any], bytes]:
    """The column's encoding as a function of the field's value (:class:`EventError` for a value the
    encoding cannot hold)."""
    if spec.encoding == "long":
        return _long(spec.field)
    if spec.encoding == "json":
        return dumps
    return text


