"""The Kerberos login of a native connection: the SASL replies' and wrapped packets' byte layouts, the
security-layer choice, and the whole exchange against a scripted in-process server with a stand-in GSSAPI
context (each wrap marks the bytes): tokens and status words in order, the ConnectionHeader and calls in
wrapped packets, and each refusal as HBaseAuthError naming the server and its reason."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.abc
import pytest

from connectors.hbase import sasl
from connectors.hbase.native.connection import RpcConnection
from connectors.hbase.native.login import refusal
from connectors.hbase.native.wire import (
    PREAMBLE_KERBEROS,
    SWITCH_TO_SIMPLE_AUTH,
    connection_header,
    decode_sasl_error,
    i32,
    is_sasl_error,
    iter_fields,
    length_prefixed,
)
from connectors.hbase.sasl import KerberosLogin, choose_layer
from pipeline.errors import HBaseAuthError, HBaseUnavailable
from pipeline.settings import HBaseSettings

from .test_connection import answer, read_request


def writable(text: str | None) -> bytes:
    """Hadoop's ``WritableUtils.writeString``."""
    if text is None:
        return struct.pack(">i", -1)
    data = text.encode()
    return struct.pack(">i", len(data)) + data


def success(token: bytes) -> bytes:
    return struct.pack(">ii", 0, len(token)) + token


def error(cls: str, message: str | None) -> bytes:
    return struct.pack(">i", 1) + writable(cls) + writable(message)


# -- byte layouts ----------------------------------------------------------------------------------------


def test_the_kerberos_preamble_and_length_prefixed_tokens() -> None:
    assert PREAMBLE_KERBEROS == b"HBas\x00\x51"
    assert length_prefixed(b"tok") == b"\x00\x00\x00\x03tok"
    assert length_prefixed(b"") == b"\x00\x00\x00\x00"
    assert i32(struct.pack(">i", SWITCH_TO_SIMPLE_AUTH)) == -88


def test_an_error_reply_is_two_writable_strings() -> None:
    body = error("javax.security.sasl.SaslException", "GSS initiate failed")[4:]
    assert decode_sasl_error(body) == ("javax.security.sasl.SaslException", "GSS initiate failed")
    assert decode_sasl_error(writable("java.io.IOException") + writable(None)) == ("java.io.IOException", "")
    assert decode_sasl_error(writable("x.Y") + b"\x00\x00\x00\x09cut") == ("x.Y", "cut")  # cut short
    assert decode_sasl_error(b"") == ("", "")
    assert decode_sasl_error(writable("é.Ünïcode") + writable("ok")) == ("é.Ünïcode", "ok")


def test_a_refusal_names_the_server_and_its_reason() -> None:
    err = refusal("HBase at h:1", error("javax.security.sasl.SaslException", "GSS initiate failed")[4:])
    assert str(err) == "HBase at h:1 refused the Kerberos login: javax.security.sasl.SaslException: GSS initiate failed"
    assert str(refusal("HBase at h:1", b"")) == "HBase at h:1 refused the Kerberos login: no reason given"


def test_only_an_error_status_reads_as_a_late_sasl_error() -> None:
    assert is_sasl_error(b"\x00\x00\x00\x01")
    assert not is_sasl_error(length_prefixed(b"x" * 60)[:4])  # a wrapped packet's or a frame's length
    assert not is_sasl_error(b"\x00\x00\x00\x00")


@pytest.mark.parametrize(("qop", "bit"), [("auth", 1), ("auth-int", 2), ("auth-conf", 4)])
def test_the_security_layer_asks_for_the_qop_and_the_largest_buffer(qop: sasl.Qop, bit: int) -> None:
    assert choose_layer(bytes([7]) + (65536).to_bytes(3, "big"), qop, "fix it") == bytes([bit, 0xFF, 0xFF, 0xFF])


def test_a_qop_the_server_does_not_offer_names_both_and_the_remedy() -> None:
    with pytest.raises(HBaseAuthError, match=r"asks for QOP auth-conf, the server is offering \(auth, auth-int\): "
                                             r"set sasl_qop"):
        choose_layer(bytes([3, 0, 0, 1]), "auth-conf", "set sasl_qop")
    with pytest.raises(HBaseAuthError, match="offer is 3 bytes, not 4"):
        choose_layer(b"\x07\x00\x00", "auth", "")


def test_the_login_comes_from_the_hbase_keys() -> None:
    s = HBaseSettings(auth="kerberos", kerberos_principal="ingest@R", kerberos_keytab=Path("/k/ingest.keytab"),
                      sasl_qop="auth-int", client="native", masters=["localhost:16700"])
    assert KerberosLogin.of(s) == KerberosLogin("ingest@R", "/k/ingest.keytab", "hbase", "auth-int")
    assert KerberosLogin.of(HBaseSettings(client="native")) is None


class _GssError(Exception):
    """Shaped as gssapi's errors: their module, and the major and minor messages ``gss_reason`` reads."""

    __module__ = "gssapi.raw.misc"

    def __init__(self, minor: str) -> None:
        super().__init__(minor)
        self.min_message = minor

    def gen_message(self) -> str:
        return "Major (851968): Unspecified GSS failure"


def test_an_unreachable_kdc_is_unavailable_and_a_refusal_is_an_auth_error() -> None:
    down = sasl.auth_failure("Kerberos service ticket for hbase/h", _GssError("Cannot contact any KDC for realm 'R'"))
    assert isinstance(down, HBaseUnavailable) and "the Kerberos KDC cannot be reached" in str(down)
    unknown = sasl.auth_failure("Kerberos service ticket for x/h",
                                _GssError("Server x/h@R not found in Kerberos database"))
    assert isinstance(unknown, HBaseAuthError)
    assert str(unknown) == ("Kerberos service ticket for x/h: Major (851968): Unspecified GSS failure: Server x/h@R "
                            "not found in Kerberos database")


# -- the exchange against a scripted server --------------------------------------------------------------


class _Wrapped:
    def __init__(self, message: bytes) -> None:
        self.message = message


class _StandInContext:
    """A GSSAPI context established by its second step; its wraps mark the bytes (``E`` encrypted,
    ``S`` signed only)."""

    initiator_name = "ingest@R"

    def __init__(self) -> None:
        self.complete = False

    def step(self, token: bytes | None = None) -> bytes | None:
        if token is None:
            return b"ap-req"
        assert token == b"ap-rep"
        self.complete = True
        return None

    def wrap(self, data: bytes, encrypt: bool) -> _Wrapped:
        return _Wrapped((b"E" if encrypt else b"S") + data)

    def unwrap(self, data: bytes) -> _Wrapped:
        assert data[:1] in (b"E", b"S")
        return _Wrapped(data[1:])


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sasl, "gss_context", lambda login, service, host, spnego=False: _StandInContext())


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serve(script: Script) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await script(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def token(reader: asyncio.StreamReader) -> bytes:
    return await reader.readexactly(struct.unpack(">I", await reader.readexactly(4))[0])


async def handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, offer: int = 7) -> int:
    """The server's side up to the client's choice of layer; returns the QOP bit chosen."""
    assert await reader.readexactly(6) == PREAMBLE_KERBEROS
    assert await token(reader) == b"ap-req"
    writer.write(success(b"ap-rep"))
    assert await token(reader) == b""  # the context is established: an empty token, as Java's client sends
    writer.write(success(b"S" + bytes([offer]) + (65536).to_bytes(3, "big")))
    choice = await token(reader)
    assert choice[:1] == b"S" and choice[2:] == b"\xff\xff\xff"  # the choice is signed, never encrypted
    return choice[1]


async def unwrapped(reader: asyncio.StreamReader) -> bytes:
    packet = await token(reader)
    assert packet[:1] in (b"E", b"S")
    return packet[1:]


@pytest.mark.parametrize(("qop", "mark"), [("auth", b""), ("auth-int", b"S"), ("auth-conf", b"E")])
async def test_the_login_then_every_byte_wrapped_as_the_qop_says(qop: sasl.Qop, mark: bytes) -> None:
    seen: dict[str, bytes] = {}

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["bit"] = bytes([await handshake(reader, writer)])
        if not mark:
            seen["header"] = await token(reader)
            call_id, param = await read_request(reader)
            writer.write(answer(call_id, b"re:" + param))
        else:
            packet = await token(reader)
            assert packet[:1] == mark
            seen["header"] = packet[5:]
            call_id, param = await read_request(asyncio_reader(await unwrapped(reader)))
            frame = answer(call_id, b"re:" + param)
            writer.write(length_prefixed(mark + frame[:7]) + length_prefixed(mark + frame[7:]))  # split frame
        await reader.read()

    server, port = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="os-user",
                                        kerberos=KerberosLogin("ingest@R", None, "hbase", qop))
        assert (await conn.call("Get", b"q", timeout_s=5)).param == b"re:q"
        await conn.close()
    assert seen["bit"] == bytes([sasl.QOP_BIT[qop]])
    assert seen["header"] == connection_header("ingest@R", "ClientService")  # the principal, not the OS user
    assert dict(iter_fields(seen["header"]))[2] == b"ClientService"


def asyncio_reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def login_error(script: Script, qop: sasl.Qop = "auth-conf") -> str:
    server, port = await serve(script)

    async def first_call(tg: anyio.abc.TaskGroup) -> None:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg,
                                        kerberos=KerberosLogin("ingest@R", None, "hbase", qop))
        await conn.call("Get", b"q", timeout_s=5)

    async with server, anyio.create_task_group() as tg:
        with pytest.raises(HBaseAuthError) as caught:
            await first_call(tg)
    return str(caught.value)


async def test_a_server_error_reply_is_the_reason_given() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(6)
        await token(reader)
        writer.write(error("javax.security.sasl.SaslException", "GSS initiate failed"))

    text = await login_error(script)
    assert text.startswith("HBase at 127.0.0.1:")
    assert text.endswith("refused the Kerberos login: javax.security.sasl.SaslException: GSS initiate failed")


async def test_a_refusal_of_the_last_token_comes_with_the_first_call() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await handshake(reader, writer)
        writer.write(error("javax.security.sasl.SaslException", "Problem with callback handler"))

    assert "refused the Kerberos login: javax.security.sasl.SaslException: Problem with callback" in (
        await login_error(script))


async def test_a_server_without_kerberos_is_not_fallen_back_to() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(6)
        await token(reader)
        writer.write(struct.pack(">ii", 0, SWITCH_TO_SIMPLE_AUTH))
        await reader.read()

    assert "does not use Kerberos (it asks the client to fall back to SIMPLE" in await login_error(script)


async def test_a_qop_the_server_does_not_offer_is_refused_by_the_client() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(6)
        await token(reader)
        writer.write(success(b"ap-rep"))
        await token(reader)
        writer.write(success(b"S" + bytes([1]) + (65536).to_bytes(3, "big")))
        await reader.read()

    text = await login_error(script, "auth-int")
    assert "the client asks for QOP auth-int, the server is offering (auth)" in text
    assert "hbase.rpc.protection" in text and "HBase at 127.0.0.1:" in text
