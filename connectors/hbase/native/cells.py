"""Cellblocks in HBase's ``KeyValueCodec`` format (no tags, no compression). Pure: no I/O.

One cell, all integers big endian::

    u32 kv_len | u32 key_len | u32 val_len | u16 row_len | row | u8 fam_len | family | qualifier
          | u64 timestamp | u8 type | value

    key_len = 2 + len(row) + 1 + len(family) + len(qualifier) + 8 + 1
    kv_len  = 8 + key_len + val_len          (the two u32 lengths + key + value; kv_len itself not counted)

Types: Put=4, Delete=8 (one version, at exactly the timestamp), DeleteFamilyVersion=10,
DeleteColumn=12 (every version up to the timestamp), DeleteFamily=14 (every column of the family up
to the timestamp). ``LATEST_TIMESTAMP`` (``2**63 - 1``) asks the server to use its clock. Bounds:
row <= 32767 bytes, family <= 127 bytes (HBase's own limits), checked with ``ValueError``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "DELETE",
    "DELETE_COLUMN",
    "DELETE_FAMILY",
    "DELETE_FAMILY_VERSION",
    "LATEST_TIMESTAMP",
    "PUT",
    "Cell",
    "decode_cells",
    "encode_cell",
]

PUT, DELETE, DELETE_FAMILY_VERSION, DELETE_COLUMN, DELETE_FAMILY = 4, 8, 10, 12, 14
LATEST_TIMESTAMP = (1 << 63) - 1
MAX_ROW = 32767
MAX_FAMILY = 127

_HEAD = struct.Struct(">IIIH")  # kv_len, key_len, val_len, row_len
_TAIL = struct.Struct(">QB")    # timestamp, type


class Cell(NamedTuple):
    """One decoded cell."""

    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: int
    value: bytes


def encode_cell(row: bytes, family: bytes, qualifier: bytes, timestamp: int, kind: int, value: bytes = b"") -> bytes:
    """One KeyValue (layout in the module docstring). Raises ``ValueError`` when the row or family is
    empty or too long (an empty family is valid only for a whole-row delete, which sends no cell)."""
    if not 0 < len(row) <= MAX_ROW:
        raise ValueError(f"row length {len(row)} is not in 1..{MAX_ROW}")
    if not 0 < len(family) <= MAX_FAMILY:
        raise ValueError(f"family length {len(family)} is not in 1..{MAX_FAMILY}")
    key_len = 12 + len(row) + len(family) + len(qualifier)
    return b"".join((_HEAD.pack(8 + key_len + len(value), key_len, len(value), len(row)), row,
                     bytes((len(family),)), family, qualifier, _TAIL.pack(timestamp, kind), value))


def decode_cells(block: bytes | memoryview, count: int | None = None, offset: int = 0) -> tuple[list[Cell], int]:
    """Decode ``count`` cells (all that remain when None) from ``block[offset:]``; returns the cells and
    the offset after the last one, so that per-result counts can peel cells off one block in turn.
    Raises ``ValueError`` when the block is truncated or its lengths disagree."""
    view = memoryview(block)
    end = len(view)
    out: list[Cell] = []
    pos = offset
    while (count is None and pos < end) or (count is not None and len(out) < count):
        if pos + _HEAD.size > end:
            raise ValueError(f"truncated cellblock at byte {pos}")
        kv_len, key_len, val_len, row_len = _HEAD.unpack_from(view, pos)
        nxt = pos + 4 + kv_len
        if kv_len != 8 + key_len + val_len or nxt > end or key_len < 12 + row_len:
            raise ValueError(f"bad KeyValue lengths at byte {pos}")
        p = pos + _HEAD.size
        row = bytes(view[p:p + row_len])
        p += row_len
        fam_len = view[p]
        p += 1
        family = bytes(view[p:p + fam_len])
        p += fam_len
        key_end = pos + 12 + key_len
        qualifier = bytes(view[p:key_end - _TAIL.size])
        ts, kind = _TAIL.unpack_from(view, key_end - _TAIL.size)
        out.append(Cell(row, family, qualifier, ts, kind, bytes(view[key_end:nxt])))
        pos = nxt
    return out, pos
