"""The Confluent wire format's framing (pure): what a schema-registry serializer puts before a body.

Byte layout of a framed value (or key)::

    offset 0     magic byte, always 0
    offset 1..4  schema id: unsigned 32-bit big-endian, as the registry numbered it
    offset 5..   Avro: the body (Avro binary, no container header)
                 JSON Schema: the body (UTF-8 JSON)
                 Protobuf: the message indexes, then the body (protobuf binary)

Protobuf message indexes say which message of the schema's file the body is: a count, then that many
indexes, each a zigzag varint (the path through nested messages, from the file's top-level messages).
The single byte ``0`` (a count of zero) stands for ``[0]``, the file's first message.

Errors are :class:`~pipeline.errors.EventError` with reason ``undecodable`` and a message that says
what the bytes hold instead (a value that starts with ``{`` is plain JSON, not framed).
"""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.errors import EventError

__all__ = ["HEADER_BYTES", "MAGIC", "frame", "framed_ids", "message_indexes", "schema_id"]

MAGIC = 0
HEADER_BYTES = 5
#: a Protobuf schema may nest messages, but not this deep: a longer index path is corrupt bytes
_MAX_INDEXES = 64


def schema_id(raw: bytes, what: str = "value") -> int:
    """The schema id of a framed ``raw``; :class:`EventError` ``undecodable`` when it is not framed
    (too short, or its first byte is not the magic byte 0). ``what`` names the part ("value", "key")."""
    if len(raw) < HEADER_BYTES:
        raise EventError("undecodable", f"{what} is {len(raw)} bytes, shorter than the Confluent wire format's "
                                        "5-byte header (magic byte 0, 4-byte schema id)")
    if raw[0] != MAGIC:
        hint = " (it looks like plain JSON: value_format = 'json' reads that)" if raw[:1] in (b"{", b"[") else ""
        raise EventError("undecodable", f"{what} does not start with the Confluent wire format's magic byte 0 "
                                        f"(found 0x{raw[0]:02x}){hint}")
    return int.from_bytes(raw[1:HEADER_BYTES], "big")


def frame(schema: int, body: bytes, indexes: Iterable[int] | None = None) -> bytes:
    """``body`` framed under schema id ``schema`` (with Protobuf message ``indexes`` when given; ``[0]``
    is written as the single byte 0, as Confluent's serializers do). The inverse of :func:`schema_id` and
    :func:`message_indexes`; producers and tests use it."""
    out = bytearray(b"\x00")
    out += schema.to_bytes(4, "big")
    if indexes is not None:
        path = list(indexes)
        if path == [0]:
            out.append(0)
        else:
            out += _zigzag_varint(len(path))
            for i in path:
                out += _zigzag_varint(i)
    return bytes(out + body)


def message_indexes(raw: bytes, start: int = HEADER_BYTES, what: str = "value") -> tuple[tuple[int, ...], int]:
    """The Protobuf message indexes that start at ``raw[start]``, and the offset of the body after them.
    :class:`EventError` ``undecodable`` when they run past the end or are implausible."""
    count, pos = _read_zigzag(raw, start, what)
    if count == 0:
        return (0,), pos
    if not 0 < count <= _MAX_INDEXES:
        raise EventError("undecodable", f"{what}'s Protobuf message index count is {count}, expected 1 to "
                                        f"{_MAX_INDEXES}: the bytes are not a framed Protobuf message")
    path = []
    for _ in range(count):
        index, pos = _read_zigzag(raw, pos, what)
        if index < 0:
            raise EventError("undecodable", f"{what}'s Protobuf message index {index} is negative")
        path.append(index)
    return tuple(path), pos


def framed_ids(raws: Iterable[bytes | None]) -> set[int]:
    """The schema ids named by the framed ones among ``raws`` (others are skipped: decoding them
    reports what is wrong). What a runtime fetches before routing a batch of records."""
    ids: set[int] = set()
    for raw in raws:
        if raw is not None and len(raw) >= HEADER_BYTES and raw[0] == MAGIC:
            ids.add(int.from_bytes(raw[1:HEADER_BYTES], "big"))
    return ids


def _read_zigzag(raw: bytes, pos: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(raw):
            raise EventError("undecodable", f"{what} ends inside its Protobuf message indexes")
        byte = raw[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise EventError("undecodable", f"{what}'s Protobuf message indexes hold a varint longer than 10 bytes")


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7
