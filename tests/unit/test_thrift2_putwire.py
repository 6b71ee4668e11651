"""connectors.hbase.putwire: the bytes of a ``putMultiple`` call are thriftpy2's own, byte for byte,
from the compiled encoder and from the pure-Python one (``encode``: each test runs with both).

The reference is thriftpy2 itself, on HBase's real Thrift2 IDL, with the protocol factory the client
uses: it sends ``putMultiple`` with the TPut/TColumnValue objects of the client's object path
(``tputs``), unframed, framed and buffered. The reply side is checked on replies thriftpy2 encodes.
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.thrift import TClient, TMessageType
from thriftpy2.transport import TBufferedTransport, TFramedTransport, TMemoryBuffer

from connectors.hbase.errors import translate
from connectors.hbase.putwire import (
    direct_puts,
    encode_put_multiple,
    encode_python,
    put_multiple,
    thriftpy2_message,
    tputs,
)
from connectors.hbase.thrift2 import Thrift2Client, load_idl
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.errors import TableNotFound
from pipeline.settings import HBaseSettings
from tests.budget import examples

ORIGIN = Origin(TopicPartition("t", 0), 0)
PROTOCOL = TBinaryProtocolFactory(decode_response=False)  # as connectors.hbase.thrift2.open_client


@pytest.fixture(scope="module")
def idl() -> ModuleType:
    return load_idl()


@pytest.fixture(scope="module", params=["compiled", "python"])
def encode(request: pytest.FixtureRequest) -> Any:
    """The encoder under test: ``encode_put_multiple`` (compiled: ``tests/unit/test_compiled.py`` checks
    that it is) or the pure-Python ``encode_python``."""
    return encode_put_multiple if request.param == "compiled" else encode_python


def thriftpy2_call(idl: ModuleType, table: bytes, puts: list[Mutation], transport: Any) -> bytes:
    """What thriftpy2 sends for the client's object path (``tputs``) through ``transport`` (a
    transport class over a memory buffer)."""
    buf = TMemoryBuffer()
    client = TClient(idl.THBaseService, PROTOCOL.get_protocol(transport(buf)))
    client._send("putMultiple", table=table, tputs=tputs(idl, puts))
    return bytes(buf.getvalue())


columns = st.one_of(
    st.sampled_from([b"l:v", b"l:lv", b"l:m", b"d:", b"d", b":q", b"f:a:b"]),  # repeated: the cached path
    st.binary(max_size=24),  # anything: split at the first ':' or none
)
values = st.one_of(
    st.binary(max_size=40),
    st.binary(min_size=4090, max_size=4100),  # around the prebuilt length headers' end
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3), st.integers(20_000, 200_000)),  # large
)
timestamps = st.one_of(st.none(), st.integers(0, 2**41), st.integers(-(2**63), 2**63 - 1))
mutations = st.builds(
    lambda row, cells, ts: Mutation("t", row, MutationKind.PUT, cells, ts, ORIGIN),
    st.binary(max_size=64), st.dictionaries(columns, values, max_size=6), timestamps)


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=st.binary(min_size=1, max_size=40), puts=st.lists(mutations, max_size=12))
def test_the_call_is_thriftpy2s_bytes(idl: ModuleType, encode: Any, table: bytes, puts: list[Mutation]) -> None:
    assert encode(table, puts) == thriftpy2_message(idl, table, puts)


@pytest.mark.parametrize(("transport", "framed"), [(TBufferedTransport, False), (TFramedTransport, True)],
                         ids=["buffered", "framed"])
def test_the_message_is_what_thriftpy2s_transport_sends(idl: ModuleType, encode: Any, transport: Any,
                                                       framed: bool) -> None:
    puts = [Mutation("t", b"r%d" % i, MutationKind.PUT, {b"l:v": b"x" * i, b"l:m": b""}, 1_700_000_000_000 + i,
                     ORIGIN) for i in range(50)]
    assert encode(b"ns:tbl", puts, framed=framed) == thriftpy2_call(idl, b"ns:tbl", puts, transport)


@settings(max_examples=examples(50), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(puts=st.lists(mutations, max_size=6))
def test_a_framed_message_is_thriftpy2s_frame(idl: ModuleType, encode: Any, puts: list[Mutation]) -> None:
    assert encode(b"t", puts, framed=True) == thriftpy2_call(idl, b"t", puts, TFramedTransport)


def test_the_layout_of_one_cell(encode: Any) -> None:
    got = encode(b"t", [Mutation("t", b"r", MutationKind.PUT, {b"f:q": b"v"}, 5, ORIGIN)])
    i32, i64 = struct.Struct(">i").pack, struct.Struct(">q").pack
    cell = (b"\x0b\x00\x01" + i32(1) + b"f" + b"\x0b\x00\x02" + i32(1) + b"q" + b"\x0b\x00\x03" + i32(1) + b"v"
            + b"\x0a\x00\x04" + i64(5) + b"\x00")
    put = b"\x0b\x00\x01" + i32(1) + b"r" + b"\x0f\x00\x02\x0c" + i32(1) + cell + b"\x0a\x00\x03" + i64(5) + b"\x00"
    assert got == (b"\x80\x01\x00\x01" + i32(11) + b"putMultiple" + i32(0)
                   + b"\x0b\x00\x01" + i32(1) + b"t" + b"\x0f\x00\x02\x0c" + i32(1) + put + b"\x00")


def test_bad_input_names_what_is_wrong(encode: Any) -> None:
    with pytest.raises(TypeError, match=r"row b'r1': cell b'l:v' must have a bytes column name and value, got "
                                        r"bytes and str"):
        encode(b"t", [Mutation("t", b"r0", MutationKind.PUT, {b"l:v": b"1"}, 1, ORIGIN),
                                   Mutation("t", b"r1", MutationKind.PUT, {b"l:v": "1"}, 1, ORIGIN)])  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"cell 'l:v' must have a bytes column name"):
        encode(b"t", [Mutation("t", b"r", MutationKind.PUT, {"l:v": b"1"}, 1, ORIGIN)])  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="a put's row must be bytes, got str"):
        encode(b"t", [Mutation("t", "r", MutationKind.PUT, {b"l:v": b"1"}, 1, ORIGIN)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a put's row must be bytes, got NoneType"):
        encode(b"t", [Mutation("t", None, MutationKind.PUT, {b"l:v": b"1"}, 1, ORIGIN)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the table name must be bytes, got str"):
        encode("t", [])
    with pytest.raises(ValueError, match=r"row b'r': timestamp 9223372036854775808 is not a signed 64-bit"):
        encode(b"t", [Mutation("t", b"r", MutationKind.PUT, {b"l:v": b"1"}, 2**63, ORIGIN)])


def _outcome(encode: Any, table: Any, puts: list[Any], framed: bool) -> tuple[str, Any]:
    try:
        return "bytes", bytes(encode(table, puts, framed=framed))
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


class _Put:
    """What the encoders read of a put (``row``, ``cells``, ``timestamp``), with any values at all."""

    def __init__(self, row: Any, cells: Any, timestamp: Any) -> None:
        self.row, self.cells, self.timestamp = row, cells, timestamp


class _Cells:
    """A mapping that is not a dict (``items()`` only, as the encoders read it)."""

    def __init__(self, cells: dict[Any, Any]) -> None:
        self._cells = cells

    def items(self) -> Any:
        return self._cells.items()

    def __len__(self) -> int:
        return len(self._cells)


anything = st.one_of(st.binary(max_size=12), st.builds(bytearray, st.binary(max_size=12)), st.text(max_size=4),
                     st.none(), st.integers(-3, 3))
loose_puts = st.builds(
    _Put,
    st.one_of(st.binary(max_size=16), anything),
    st.one_of(st.dictionaries(st.one_of(columns, anything.filter(lambda v: v.__hash__ is not None)),
                              st.one_of(values, anything), max_size=4),
              st.dictionaries(columns, st.binary(max_size=8), max_size=3).map(_Cells)),
    st.one_of(timestamps, st.integers(2**63, 2**65), st.integers(-(2**65), -(2**63) - 1), st.just(True),
              st.floats(allow_nan=False), st.just("1")))


@settings(max_examples=examples(400), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=st.one_of(st.binary(max_size=12), st.text(max_size=3)), puts=st.lists(loose_puts, max_size=6),
       framed=st.booleans())
def test_the_compiled_encoder_gives_the_pure_python_outcome(table: Any, puts: list[Any], framed: bool) -> None:
    """Same bytes, or the same error with the same message, for puts of any shape (rows, values and
    timestamps of wrong types and ranges included)."""
    assert _outcome(encode_put_multiple, table, puts, framed) == _outcome(encode_python, table, puts, framed)


def _client_replying(idl: ModuleType, result: Any) -> tuple[Thrift2Client, TMemoryBuffer]:
    """A client whose reply stream holds ``result`` (a putMultiple_result) as thriftpy2 encodes it,
    and the buffer standing for its socket."""
    reply = TMemoryBuffer()
    proto = PROTOCOL.get_protocol(reply)
    proto.write_message_begin("putMultiple", TMessageType.REPLY, 0)
    result.write(proto)
    proto.write_message_end()
    sent = TMemoryBuffer()
    client = Thrift2Client(idl.THBaseService, PROTOCOL.get_protocol(TMemoryBuffer(reply.getvalue())), sent, False)
    return client, sent


def test_the_reply_is_read_by_thriftpy2_and_its_errors_translate_as_before(idl: ModuleType) -> None:
    puts = [Mutation("t", b"r", MutationKind.PUT, {b"l:v": b"1"}, 1, ORIGIN)]
    client, sent = _client_replying(idl, idl.THBaseService.putMultiple_result())
    put_multiple(client, b"dev_logs", puts)  # a void reply: returns
    assert sent.getvalue() == thriftpy2_message(idl, b"dev_logs", puts)
    io = idl.TIOError(message=b"dev_logs", canRetry=False)
    client, _ = _client_replying(idl, idl.THBaseService.putMultiple_result(io=io))
    with pytest.raises(idl.TIOError) as caught:
        put_multiple(client, b"dev_logs", puts)
    gone = translate(caught.value, "logs", "write batch")
    assert isinstance(gone, TableNotFound) and str(gone) == ("write batch on table 'logs': table does not exist: "
                                                             "dev_logs")


def test_the_encoder_setting() -> None:
    def settings(**kw: str) -> HBaseSettings:
        return HBaseSettings.model_validate(kw)

    assert direct_puts(settings()) and not direct_puts(settings(protocol="compact"))  # compact: thriftpy2's path
    assert not direct_puts(settings(put_encoder="thriftpy2"))
    with pytest.raises(ValidationError, match="put_encoder"):
        settings(put_encoder="fast")
