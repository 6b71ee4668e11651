"""The Thrift2 ``putMultiple`` call encoded straight to bytes, for the one message shape the writer sends.

:func:`encode_put_multiple` returns a complete binary-protocol call message (``TBinaryProtocol``
with strict writes, as thriftpy2 sends it: sequence id 0), identical byte for byte to what thriftpy2
writes for ``client.putMultiple(table, [TPut(row, [TColumnValue(family, qualifier, value,
timestamp)...], timestamp)...])`` with the objects of :func:`tputs` (thriftpy2's path in
:class:`~connectors.hbase.HBaseClient`), but without a TPut or TColumnValue object per row and
cell: one ``bytearray`` grows as the rows are appended. ``framed=True`` prefixes the message with
its length (i32), as thriftpy2's framed transport does.

Layout (big-endian; ``str`` = i32 length + bytes; a field is type byte + i16 id + value)::

    message  = i32 0x80010001 (version 1, CALL) . str "putMultiple" . i32 0 (sequence id)
               . field(string 1, table) . field(list 2) byte 12 (struct) i32 n_puts . TPut* . 00 (stop)
    TPut     = field(string 1, row) . field(list 2) byte 12 i32 n_cells . TColumnValue*
               [. field(i64 3, timestamp)] . 00
    TColumnValue = field(string 1, family) . field(string 2, qualifier) . field(string 3, value)
               [. field(i64 4, timestamp)] . 00

A cell's column ``b"family:qualifier"`` splits at its first ``:`` (no ``:``: the whole column is
the family, the qualifier is empty), as the thriftpy2 path does; each cell and its row carry the
mutation's timestamp, or no timestamp field at all when it is None (HBase then stamps server time).
The cells keep their dict order. Values, rows and the table name must be ``bytes``; anything else
raises :class:`TypeError` naming the row (thriftpy2 would have encoded a ``str`` as UTF-8: the
project's mutations never hold one). A timestamp outside a signed 64-bit integer raises
:class:`ValueError`.

The encoder is compiled (``_putwire.c``, built by the package's build; :data:`COMPILED` says
whether it is in use) or, when no build of the current source is there, the pure-Python
:func:`encode_python`, the reference: both return the same bytes for the same puts (a property test
checks it) and raise the same errors (:mod:`pipeline.compiled`: which build is used, and
``HBASE_INGEST_PURE_PYTHON=1``).

:func:`put_multiple` sends the message on the socket of a client from
:func:`~connectors.hbase.thrift2.open_client` in one ``sendall`` (thriftpy2's buffered transport
would copy a message bigger than its 4 KB buffer twice, into a buffer that then stays that big) and
reads the reply with thriftpy2, so the exceptions are thriftpy2's own (``TIOError``,
``TApplicationException``, transport errors) and map through :mod:`connectors.hbase.errors`
exactly as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from connectors.hbase.thrift2 import Thrift2Client
from pipeline import compiled
from pipeline.core.model import Mutation
from pipeline.errors import HBaseRequestError
from pipeline.settings import HBaseSettings

__all__ = ["COMPILED", "TTL_ATTRIBUTE", "direct_puts", "encode_put_multiple", "encode_python", "put_multiple",
           "split_column", "thriftpy2_message", "tputs"]


_I32 = struct.Struct(">i").pack
_I64 = struct.Struct(">q").pack
_I32_INTO = struct.Struct(">i").pack_into
_NO_LENGTH = b"\x00\x00\x00\x00"  # a framed message's length, written once it is known

_STRING, _I64_T, _STRUCT, _LIST = 11, 10, 12, 15
_CALL_HEAD = _I32(-0x7FFEFFFF) + _I32(len(b"putMultiple")) + b"putMultiple" + _I32(0)  # 0x80010001
_TABLE_HEAD = bytes((_STRING, 0, 1))
_PUTS_HEAD = bytes((_LIST, 0, 2, _STRUCT))
_ROW_HEAD = bytes((_STRING, 0, 1))
_CELLS_HEAD = bytes((_LIST, 0, 2, _STRUCT))
_PUT_TS_HEAD = bytes((_I64_T, 0, 3))
_CELL_TS_HEAD = bytes((_I64_T, 0, 4))
_STOP = b"\x00"

# a value's length header, prebuilt for the lengths most cells have
_LENGTHS = tuple(_I32(n) for n in range(4096))
_N_LENGTHS = len(_LENGTHS)

# column -> the bytes of its family and qualifier fields and the value field's header
_COLUMNS: dict[bytes, bytes] = {}
_COLUMNS_MAX = 4096  # route columns repeat; tally qualifiers (one per event) are not cached
_SPLIT: dict[bytes, tuple[bytes, bytes]] = {}


def split_column(column: bytes) -> tuple[bytes, bytes]:
    """``b"family:qualifier"`` -> ``(b"family", b"qualifier")``, split at the first ``:`` (none: the
    whole column is the family), cached for the columns that repeat."""
    parts = _SPLIT.get(column)
    if parts is None:
        family, _, qualifier = column.partition(b":")
        parts = (family, qualifier)
        if len(_SPLIT) < _COLUMNS_MAX:
            _SPLIT[column] = parts
    return parts


def _column_head(column: bytes) -> bytes:
    head = _COLUMNS.get(column)
    if head is None:
        if not isinstance(column, bytes):
            raise TypeError("a cell's column must be bytes")
        family, _, qualifier = column.partition(b":")
        head = b"".join((bytes((_STRING, 0, 1)), _I32(len(family)), family,
                         bytes((_STRING, 0, 2)), _I32(len(qualifier)), qualifier, bytes((_STRING, 0, 3))))
        if len(_COLUMNS) < _COLUMNS_MAX:
            _COLUMNS[column] = head
    return head


def encode_put_multiple(table: bytes, puts: Sequence[Mutation], *, framed: bool = False) -> bytearray:
    """The whole ``putMultiple(table, puts)`` call message, length-prefixed when ``framed`` (module
    docstring: layout, contract), with the compiled encoder when it is in use. Only ``row``,
    ``cells`` and ``timestamp`` of each mutation are read (its kind is not checked)."""
    return _checked(_ENCODE, table, puts, framed)


def encode_python(table: bytes, puts: Sequence[Mutation], *, framed: bool = False) -> bytearray:
    """:func:`encode_put_multiple` with the pure-Python encoder, whatever is in use."""
    return _checked(_encode, table, puts, framed)


def _checked(encode: Callable[[bytes, Sequence[Mutation], bool], bytearray], table: bytes,
             puts: Sequence[Mutation], framed: bool) -> bytearray:
    if not isinstance(table, bytes):
        raise TypeError(f"the table name must be bytes, got {type(table).__name__}")
    try:
        return encode(table, puts, framed)
    except TypeError as exc:
        raise TypeError(_not_bytes(puts)) from exc


def _encode(table: bytes, puts: Sequence[Mutation], framed: bool) -> bytearray:
    buf = bytearray(_NO_LENGTH if framed else b"")
    buf += _CALL_HEAD
    buf += _TABLE_HEAD + _I32(len(table))
    buf += table
    buf += _PUTS_HEAD + _I32(len(puts))
    columns, column_head, lengths, n_lengths, i32 = _COLUMNS, _column_head, _LENGTHS, _N_LENGTHS, _I32
    for m in puts:
        row, cells, ts = m.row, m.cells, m.timestamp
        if ts is None:
            cell_tail = put_tail = _STOP
        else:
            try:
                stamp = _I64(ts)
            except struct.error as exc:
                raise ValueError(f"row {row!r}: timestamp {ts!r} is not a signed 64-bit integer") from exc
            cell_tail = _CELL_TS_HEAD + stamp + _STOP
            put_tail = _PUT_TS_HEAD + stamp + _STOP
        buf += _ROW_HEAD + i32(len(row))
        buf += row
        buf += _CELLS_HEAD + i32(len(cells))
        for column, value in cells.items():
            n = len(value)
            buf += columns.get(column) or column_head(column)
            buf += lengths[n] if n < n_lengths else i32(n)
            buf += value
            buf += cell_tail
        buf += put_tail
    buf += _STOP
    if framed:
        _I32_INTO(buf, 0, len(buf) - 4)
    return buf


def _compiled() -> Callable[[bytes, Sequence[Mutation], bool], bytearray] | None:
    """The compiled encoder (:func:`pipeline.compiled.load`: a build of the current ``_putwire.c``)."""
    found = compiled.load("connectors.hbase._putwire", Path(__file__).with_name("_putwire.c"))
    if found is None:
        return None
    encode: Callable[[bytes, Sequence[Mutation], bool], bytearray] = found.encode
    return encode


_COMPILED_ENCODE = _compiled()
#: whether :func:`encode_put_multiple` runs the compiled encoder
COMPILED = _COMPILED_ENCODE is not None
_ENCODE = _COMPILED_ENCODE or _encode


def _not_bytes(puts: Sequence[Mutation]) -> str:
    """The message for a mutation holding something other than bytes (off the hot path)."""
    for m in puts:
        if not isinstance(m.row, bytes):
            return f"a put's row must be bytes, got {type(m.row).__name__} {m.row!r}"
        for column, value in m.cells.items():
            if not isinstance(column, bytes) or not isinstance(value, bytes):
                return (f"row {m.row!r}: cell {column!r} must have a bytes column name and value, "
                        f"got {type(column).__name__} and {type(value).__name__}")
    return "a put holds something other than bytes"


def put_multiple(client: Thrift2Client, table: bytes, puts: Sequence[Mutation]) -> None:
    """``client.putMultiple(table, puts)`` with the message from :func:`encode_put_multiple`:
    returns when HBase applied every put, raises thriftpy2's exception otherwise (the caller
    translates it). A put the wire cannot hold (a timestamp outside a signed 64-bit integer: routing
    refuses those, this is the last guard) is :class:`~pipeline.errors.HBaseRequestError`, as HBase's
    own refusal of a put is: the writer then isolates it and dead-letters it, and the batch's other
    puts are written."""
    try:
        message = encode_put_multiple(table, puts, framed=client.framed)
    except ValueError as exc:
        raise HBaseRequestError(f"a put the Thrift wire cannot hold: {exc}",
                                table=table.decode("utf-8", "replace")) from exc
    client.send(message)
    client.receive("putMultiple")


def direct_puts(settings: HBaseSettings) -> bool:
    """Whether a client with ``settings`` sends puts through this module: on the ``binary`` protocol
    (the only one it encodes) unless ``put_encoder`` is ``"thriftpy2"``."""
    return settings.protocol == "binary" and settings.put_encoder == "direct"


#: the put attribute of a cell TTL (HBase's ``OperationWithAttributes``: ``Mutation.setTTL``)
TTL_ATTRIBUTE = b"_ttl"


def tputs(idl: ModuleType, puts: Sequence[Mutation]) -> list[Any]:
    """The ``TPut`` objects of thriftpy2's path for ``puts`` (``idl``: the Thrift2 IDL module): the
    client's path on the compact protocol, with ``put_encoder = "thriftpy2"``, and for puts with a
    cell TTL (:class:`~pipeline.core.model.ExpiringPut`: the ``_ttl`` attribute, which
    :func:`encode_put_multiple` does not write)."""
    # positional arguments in IDL field order: (family, qualifier, value, timestamp) and
    # (row, columnValues, timestamp); keyword construction costs 2.5x as much per row
    tcv, tput, split = idl.TColumnValue, idl.TPut, split_column
    out = [tput(m.row, [tcv(*split(col), val, m.timestamp) for col, val in m.cells.items()], m.timestamp)
           for m in puts]
    for t, m in zip(out, puts, strict=True):
        if m.ttl is not None:  # HBase's Mutation.setTTL: the "_ttl" attribute, 8 bytes big-endian
            t.attributes = {TTL_ATTRIBUTE: _I64(m.ttl)}
    return out


def thriftpy2_message(idl: ModuleType, table: bytes, puts: Sequence[Mutation]) -> bytes:
    """The call message thriftpy2 itself writes for ``putMultiple(table, tputs(idl, puts))`` with the
    client's binary protocol factory, unframed: the reference :func:`encode_put_multiple` must equal
    (tests, benchmarks)."""
    memory: Any = TMemoryBuffer  # thriftpy2's Cython classes are untyped
    factory: Any = TBinaryProtocolFactory
    buf = memory()
    proto = factory(decode_response=False).get_protocol(buf)
    args = idl.THBaseService.putMultiple_args(table=table, tputs=tputs(idl, puts))
    proto.write_message_begin("putMultiple", TMessageType.CALL, 0)  # as thriftpy2's client writes a call
    args.write(proto)
    proto.write_message_end()
    return bytes(buf.getvalue())
