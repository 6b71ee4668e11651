"""Bytes of HBase's native RPC: varints, a minimal protobuf field codec, and the RPC layer's own
messages and frames (HBase 2.6 ``rpc/RPC.proto``, package ``hbase.pb``, proto2). Pure: no I/O.

Connection set-up, sent once by the client (the server answers nothing when it accepts)::

    "HBas" | 0x00 (RPC version) | 0x50 (auth: SIMPLE)              -- 6-byte preamble
    u32 BE length | ConnectionHeader                                 -- NOT a varint, plain writeTo

With Kerberos (HBase's ``HBaseSaslRpcClient``/``NettyHBaseSaslRpcClientHandler``, server side
``NettyHBaseSaslRpcServerHandler``, ``ServerRpcConnection.doRawSaslReply``), the SASL GSSAPI exchange comes
between the two, then the ConnectionHeader (its ``effective_user`` the client's principal, ``user@REALM``)::

    "HBas" | 0x00 | 0x51 (auth: KERBEROS)                          -- preamble
    client: u32 BE length | token                                    -- each SASL token, the first at once
    server: i32 status 0 (SUCCESS) | i32 BE length | token           -- each challenge; length -88:
                                                                        the server is not secure, "fall back
                                                                        to SIMPLE" (refused here)
    server: i32 status 1 (ERROR) | string class | string message    -- then it closes the connection;
                                                                        a string is Hadoop's WritableUtils
                                                                        one: i32 BE length (-1: null) | UTF-8

The client's last token (its choice of security layer) gets no answer: with QOP ``auth-int``/``auth-conf``
every later byte, both ways, travels in wrapped packets, ``u32 BE length | GSSAPI wrap token`` (each
packet's plaintext holds whole frames of the layouts below: the ConnectionHeader's, requests, responses); a
server that refuses the last token answers with the ERROR reply above where the first packet or frame would
be (:func:`is_sasl_error`).

Request frame::

    u32 BE total (bytes after these 4) | varint len | RequestHeader | varint len | param | [cellblock]

Response frame (mirror image; the cellblock is the frame's tail, ``cell_block_meta.length`` bytes;
no param when the header carries an exception)::

    u32 BE total | varint len | ResponseHeader | [varint len | response] | [cellblock]

Field numbers used (RPC.proto)::

    UserInformation   1 effective_user (string)   2 real_user
    ConnectionHeader  1 user_info  2 service_name  3 cell_block_codec_class  4 cell_block_compressor_class
    CellBlockMeta     1 length (uint32)
    ExceptionResponse 1 exception_class_name  2 stack_trace  3 hostname  4 port (int32)
                      5 do_not_retry (bool)  6 server_overloaded (bool)
    RequestHeader     1 call_id (uint32)  3 method_name  4 request_param (bool)  5 cell_block_meta
                      6 priority  7 timeout (uint32, ms)
    ResponseHeader    1 call_id  2 exception  3 cell_block_meta
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "CODEC_KEYVALUE",
    "PREAMBLE",
    "PREAMBLE_KERBEROS",
    "SASL_ERROR",
    "SASL_SUCCESS",
    "SWITCH_TO_SIMPLE_AUTH",
    "RemoteException",
    "Response",
    "WireError",
    "connection_frame",
    "connection_header",
    "decode_response",
    "decode_sasl_error",
    "delimited",
    "hello",
    "i32",
    "is_sasl_error",
    "iter_fields",
    "length_prefixed",
    "pb_bool",
    "pb_bytes",
    "pb_str",
    "pb_uint",
    "read_varint",
    "request_frame",
    "request_header",
    "signed32",
    "varint",
]

#: "HBas", RPC version 0, auth SIMPLE (0x50; 0x52 would be DIGEST, a delegation token)
PREAMBLE = b"HBas\x00\x50"
#: "HBas", RPC version 0, auth KERBEROS (SASL GSSAPI)
PREAMBLE_KERBEROS = b"HBas\x00\x51"
#: the status word before each SASL reply of the server (HBase's ``SaslStatus``)
SASL_SUCCESS, SASL_ERROR = 0, 1
#: a SUCCESS reply's length saying "this server is not secure: fall back to SIMPLE" (``SaslUtil``)
SWITCH_TO_SIMPLE_AUTH = -88
CODEC_KEYVALUE = "org.apache.hadoop.hbase.codec.KeyValueCodec"

_U32 = struct.Struct(">I")
_MASK64 = (1 << 64) - 1
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that do not parse as the protocol says (truncated, bad wire type). A bug or a server
    speaking another protocol, never a condition to retry."""


# -- varints and protobuf fields ---------------------------------------------------------------------


def varint(n: int) -> bytes:
    """Base-128 varint, low 7 bits first, high bit = more bytes follow. A negative ``n`` (an int32/int64
    field) is written as its 64-bit two's complement: 10 bytes."""
    n &= _MASK64
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos:]`` and the position after it. Raises :class:`WireError` when truncated
    or longer than 10 bytes."""
    result = shift = 0
    end = len(buf)
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def pb_uint(field: int, n: int) -> bytes:
    """A varint field (uint32/uint64/int32/enum): tag ``field << 3 | 0``, then the value."""
    return varint(field << 3) + varint(n)


def pb_bool(field: int, value: bool) -> bytes:
    return varint(field << 3) + (b"\x01" if value else b"\x00")


def pb_bytes(field: int, data: bytes) -> bytes:
    """A length-delimited field (bytes, string, embedded message): tag ``field << 3 | 2``, varint length, data."""
    return varint(field << 3 | _LENGTH) + varint(len(data)) + data


def pb_str(field: int, text: str) -> bytes:
    return pb_bytes(field, text.encode())


def delimited(message: bytes) -> bytes:
    """``writeDelimitedTo``: varint length, then the message."""
    return varint(len(message)) + message


def iter_fields(buf: bytes | memoryview) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` for every field of one message, in wire order: an ``int`` for a
    varint, ``bytes`` for a length-delimited field; fixed32/fixed64 values come as ``int`` (little
    endian). Unknown fields are the caller's to skip. Raises :class:`WireError` on bad bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == _VARINT:
            value, pos = read_varint(buf, pos)
            yield field, value
        elif wt == _LENGTH:
            size, pos = read_varint(buf, pos)
            if pos + size > end:
                raise WireError(f"field {field} runs past the end of its message")
            yield field, bytes(buf[pos:pos + size])
            pos += size
        elif wt in (_FIXED64, _FIXED32):
            width = 8 if wt == _FIXED64 else 4
            if pos + width > end:
                raise WireError(f"field {field} runs past the end of its message")
            yield field, int.from_bytes(buf[pos:pos + width], "little")
            pos += width
        else:
            raise WireError(f"unsupported wire type {wt} (field {field})")


def signed32(n: int) -> int:
    """An int32 field read as a varint (negative values come as 64-bit two's complement)."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


# -- connection set-up -------------------------------------------------------------------------------


def connection_header(user: str, service: str, codec: str | None = CODEC_KEYVALUE) -> bytes:
    """``ConnectionHeader{user_info{effective_user}, service_name, cell_block_codec_class}``: the service
    (``ClientService``, ``ClientMetaService``, ``MasterService``) is fixed for the connection's life."""
    out = pb_bytes(1, pb_str(1, user)) + pb_str(2, service)
    if codec is not None:
        out += pb_str(3, codec)
    return out


def length_prefixed(data: bytes) -> bytes:
    """``u32 BE len(data) | data``: a ConnectionHeader, a SASL token the client sends, a wrapped packet."""
    return _U32.pack(len(data)) + data


def connection_frame(user: str, service: str, codec: str | None = CODEC_KEYVALUE) -> bytes:
    """The ConnectionHeader as it follows the preamble (and, with Kerberos, the SASL exchange)."""
    return length_prefixed(connection_header(user, service, codec))


def hello(user: str, service: str, codec: str | None = CODEC_KEYVALUE) -> bytes:
    """The first bytes of a connection with SIMPLE auth: preamble, u32 BE length, ConnectionHeader."""
    return PREAMBLE + connection_frame(user, service, codec)


# -- SASL replies ------------------------------------------------------------------------------------


def i32(word: bytes) -> int:
    """A 4-byte big-endian signed int (a SASL status or length)."""
    return int.from_bytes(word, "big", signed=True)


def is_sasl_error(word: bytes) -> bool:
    """Whether the first 4 bytes the server sends after the SASL exchange are an ERROR status rather than
    a frame's or wrapped packet's length (1 byte can be neither: a response header or a GSSAPI token is
    longer)."""
    return i32(word) == SASL_ERROR


def _writable_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """Hadoop's ``WritableUtils.readString`` at ``pos``: i32 BE length (-1: null) + UTF-8; what is cut
    short reads as far as it goes."""
    if pos + 4 > len(buf):
        return None, len(buf)
    size = i32(buf[pos:pos + 4])
    pos += 4
    if size < 0:
        return None, pos
    return buf[pos:pos + size].decode("utf-8", errors="replace"), min(pos + size, len(buf))


def decode_sasl_error(body: bytes) -> tuple[str, str]:
    """``(Java exception class, message)`` of an ERROR reply's body (the bytes after its status word):
    two Writable strings. Tolerant: a null or missing string is ``""`` (a truncated body still names
    what it can)."""
    cls, pos = _writable_string(body, 0)
    message, _ = _writable_string(body, pos)
    return cls or "", message or ""


# -- requests ----------------------------------------------------------------------------------------


def request_header(call_id: int, method: str, cellblock_len: int = 0, timeout_ms: int = 0) -> bytes:
    """``RequestHeader{call_id, method_name, request_param=true, cell_block_meta{length}?, timeout?}``;
    the cell block meta only when a cellblock follows, the timeout only when positive."""
    out = pb_uint(1, call_id) + pb_str(3, method) + pb_bool(4, True)
    if cellblock_len:
        out += pb_bytes(5, pb_uint(1, cellblock_len))
    if timeout_ms > 0:
        out += pb_uint(7, timeout_ms)
    return out


def request_frame(call_id: int, method: str, param: bytes, cellblock: bytes = b"", timeout_ms: int = 0) -> bytes:
    """One request: ``u32 BE total | varint+RequestHeader | varint+param | cellblock``."""
    body = delimited(request_header(call_id, method, len(cellblock), timeout_ms)) + delimited(param)
    return _U32.pack(len(body) + len(cellblock)) + body + cellblock


# -- responses ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RemoteException:
    """``ExceptionResponse``: a Java exception the server raised for a whole call."""

    class_name: str
    stack_trace: str = ""
    hostname: str = ""
    port: int = 0
    do_not_retry: bool = False

    @property
    def message(self) -> str:
        """The stack trace's first line (the exception's ``toString()``)."""
        return self.stack_trace.split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class Response:
    """One decoded response frame (without its 4-byte length): the call it answers, the exception
    (then ``param`` is empty) or the response message's bytes, and the trailing cellblock."""

    call_id: int
    exception: RemoteException | None
    param: bytes
    cellblock: bytes


def _exception(buf: bytes) -> RemoteException:
    cls = stack = host = ""
    port = 0
    dnr = False
    for f, v in iter_fields(buf):
        if f == 1 and isinstance(v, bytes):
            cls = v.decode(errors="replace")
        elif f == 2 and isinstance(v, bytes):
            stack = v.decode(errors="replace")
        elif f == 3 and isinstance(v, bytes):
            host = v.decode(errors="replace")
        elif f == 4 and isinstance(v, int):
            port = signed32(v)
        elif f == 5 and isinstance(v, int):
            dnr = bool(v)
    return RemoteException(cls, stack, host, port, dnr)


def decode_response(frame: bytes) -> Response:
    """Decode a response frame given without its leading u32 length. Raises :class:`WireError`."""
    size, pos = read_varint(frame, 0)
    end = pos + size
    if end > len(frame):
        raise WireError("response header runs past the end of its frame")
    call_id, exc, cb_len = -1, None, 0
    for f, v in iter_fields(memoryview(frame)[pos:end]):
        if f == 1 and isinstance(v, int):
            call_id = v
        elif f == 2 and isinstance(v, bytes):
            exc = _exception(v)
        elif f == 3 and isinstance(v, bytes):
            cb_len = next((n for g, n in iter_fields(v) if g == 1 and isinstance(n, int)), 0)
    body_end = len(frame) - cb_len
    if body_end < end:
        raise WireError("cellblock length exceeds the frame")
    param = b""
    if end < body_end:
        size, pos = read_varint(frame, end)
        if pos + size > body_end:
            raise WireError("response message runs past the end of its frame")
        param = frame[pos:pos + size]
    return Response(call_id, exc, param, frame[body_end:])
