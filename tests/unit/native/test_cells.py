"""KeyValue cellblocks: golden bytes of one cell, and round trips."""

from __future__ import annotations

import pytest

from connectors.hbase.native.cells import (
    DELETE_COLUMN,
    LATEST_TIMESTAMP,
    PUT,
    Cell,
    decode_cells,
    encode_cell,
)

ONE_PUT = bytes.fromhex(
    "00000019"          # kv_len 25 = 8 + key_len + val_len
    "00000010"          # key_len 16 = 2 + 2 (row) + 1 + 1 (family) + 1 (qualifier) + 8 + 1
    "00000001"          # val_len
    "0002" "7231"       # row "r1"
    "01" "64"           # family "d"
    "71"                # qualifier "q"
    "0000000000000005"  # timestamp 5
    "04"                # type Put
    "76")               # value "v"


def test_one_put_cell() -> None:
    assert encode_cell(b"r1", b"d", b"q", 5, PUT, b"v") == ONE_PUT
    assert decode_cells(ONE_PUT) == ([Cell(b"r1", b"d", b"q", 5, PUT, b"v")], len(ONE_PUT))


def test_round_trip_of_several_cells_peeled_by_count() -> None:
    cells = [Cell(b"row-%d" % i, b"fam", b"q" * i, LATEST_TIMESTAMP - i, PUT if i % 2 else DELETE_COLUMN,
                  bytes(range(i * 7 % 256)) if i % 2 else b"") for i in range(6)]
    block = b"".join(encode_cell(*c) for c in cells)
    first, pos = decode_cells(block, 2)
    rest, end = decode_cells(block, None, pos)
    assert first + rest == cells and end == len(block)


def test_bad_blocks_and_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="truncated"):
        decode_cells(ONE_PUT[:10])
    with pytest.raises(ValueError, match="bad KeyValue lengths"):
        decode_cells(b"\x00\x00\x00\x18" + ONE_PUT[4:])
    with pytest.raises(ValueError, match="family length"):
        encode_cell(b"r", b"", b"q", 1, PUT)
    with pytest.raises(ValueError, match="row length"):
        encode_cell(b"r" * 32768, b"d", b"q", 1, PUT)
