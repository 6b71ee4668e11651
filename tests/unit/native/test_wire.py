"""Golden bytes of the RPC layer: varints, the connection preamble and header, request and response frames."""

from __future__ import annotations

import pytest

from connectors.hbase.native.wire import (
    PREAMBLE,
    WireError,
    decode_response,
    hello,
    iter_fields,
    read_varint,
    request_frame,
    request_header,
    varint,
)


@pytest.mark.parametrize(("n", "wire"), [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"),
    ((1 << 63) - 1, "ffffffffffffffff7f"),
    (-1, "ffffffffffffffffff01"),  # an int32/int64 -1: 64-bit two's complement, 10 bytes
])
def test_varints(n: int, wire: str) -> None:
    assert varint(n) == bytes.fromhex(wire)
    assert read_varint(bytes.fromhex(wire) + b"\x99", 0) == (n & ((1 << 64) - 1), len(wire) // 2)


def test_a_truncated_varint_is_refused() -> None:
    with pytest.raises(WireError):
        read_varint(b"\x80\x80", 0)


def test_preamble_and_connection_header() -> None:
    codec = b"org.apache.hadoop.hbase.codec.KeyValueCodec"  # 43 bytes
    header = (b"\x0a\x03" + b"\x0a\x01u"                      # 1 user_info{1 effective_user "u"}
              + b"\x12\x0d" + b"ClientService"                # 2 service_name
              + b"\x1a\x2b" + codec)                          # 3 cell_block_codec_class
    assert len(header) == 0x41
    assert PREAMBLE == b"HBas\x00\x50"
    assert hello("u", "ClientService") == b"HBas\x00\x50" + b"\x00\x00\x00\x41" + header  # u32 BE, not a varint


def test_request_header_with_cell_block_meta() -> None:
    assert request_header(1, "Multi", cellblock_len=10, timeout_ms=300) == (
        b"\x08\x01"                 # 1 call_id
        + b"\x1a\x05Multi"          # 3 method_name
        + b"\x20\x01"               # 4 request_param = true
        + b"\x2a\x02\x08\x0a"       # 5 cell_block_meta{1 length = 10}
        + b"\x38\xac\x02")          # 7 timeout = 300


def test_request_frame_without_cellblock() -> None:
    assert request_frame(1, "Get", b"\x0a\x00") == (
        b"\x00\x00\x00\x0d"                       # u32 BE: 13 bytes follow
        + b"\x09" + b"\x08\x01\x1a\x03Get\x20\x01"  # varint + RequestHeader (no cell_block_meta)
        + b"\x02" + b"\x0a\x00")                  # varint + param


def test_response_with_param_and_cellblock() -> None:
    frame = (b"\x06" + b"\x08\x07" + b"\x1a\x02\x08\x03"  # ResponseHeader{call_id 7, cell_block_meta{length 3}}
             + b"\x02" + b"\x08\x01"                    # the response message
             + b"xyz")                                  # cellblock
    r = decode_response(frame)
    assert (r.call_id, r.exception, r.param, r.cellblock) == (7, None, b"\x08\x01", b"xyz")


def test_response_with_an_exception() -> None:
    exc = b"\x0a\x13java.io.IOException" + b"\x12\x0aboom\nat x1" + b"\x28\x01"  # class, stack, do_not_retry
    header = b"\x08\x02" + b"\x12" + bytes((len(exc),)) + exc  # ResponseHeader{call_id 2, exception}
    r = decode_response(bytes((len(header),)) + header)      # no response message follows an exception
    assert r.call_id == 2 and r.param == b"" and r.cellblock == b""
    assert r.exception is not None
    assert (r.exception.class_name, r.exception.message, r.exception.do_not_retry) == (
        "java.io.IOException", "boom", True)


def test_unknown_fields_are_yielded_for_skipping() -> None:
    buf = b"\x08\x01" + b"\x11" + bytes(8) + b"\x1a\x01z" + b"\x25" + bytes(4)  # varint, fixed64, bytes, fixed32
    assert list(iter_fields(buf)) == [(1, 1), (2, 0), (3, b"z"), (4, 0)]
