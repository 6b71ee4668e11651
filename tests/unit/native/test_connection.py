"""The connection against a scripted in-process server: hello bytes, out-of-order answers, remote
exceptions, timeouts (a silent connection given up, a live one kept), a connection lost with calls
pending, a call cut off while being sent, and TLS (a CA made here with openssl)."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from connectors.hbase.native.connection import RpcConnection
from connectors.hbase.native.wire import hello, iter_fields, read_varint
from pipeline.errors import HBaseAuthError, HBaseRequestError, HBaseTimeout, HBaseUnavailable

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def server_tls(certs: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs / "server.pem", certs / "server.key")
    return ctx


async def read_request(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """(call id, param) of the next request frame."""
    frame = await reader.readexactly(struct.unpack(">I", await reader.readexactly(4))[0])
    size, pos = read_varint(frame, 0)
    call_id = next(v for f, v in iter_fields(frame[pos:pos + size]) if f == 1)
    psize, ppos = read_varint(frame, pos + size)
    assert isinstance(call_id, int)
    return call_id, frame[ppos:ppos + psize]


def answer(call_id: int, param: bytes, header_extra: bytes = b"") -> bytes:
    header = b"\x08" + bytes((call_id,)) + header_extra
    body = bytes((len(header),)) + header + (bytes((len(param),)) + param if param else b"")
    return struct.pack(">I", len(body)) + body


async def serve(script: Script, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, int, list[bytes]]:
    greetings: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readexactly(10)
        greetings.append(head + await reader.readexactly(struct.unpack(">I", head[6:])[0]))
        await script(reader, writer)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    return server, server.sockets[0].getsockname()[1], greetings


async def test_answers_out_of_order_reach_their_calls() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first, second = await read_request(reader), await read_request(reader)
        writer.write(answer(second[0], b"re:" + second[1]) + answer(first[0], b"re:" + first[1]))
        third = await read_request(reader)
        exc = b"\x0a\x0bjava.lang.X" + b"\x12\x05bad\nz"
        writer.write(answer(third[0], b"", b"\x12" + bytes((len(exc),)) + exc))
        await reader.read()

    server, port, greetings = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="u")
        a, b = await asyncio.gather(conn.call("Get", b"one"), conn.call("Get", b"two"))
        assert (a.param, b.param, a.call_id, b.call_id) == (b"re:one", b"re:two", 1, 2)
        with pytest.raises(HBaseRequestError, match=r"java\.lang\.X: bad") as info:
            await conn.call("Get", b"three")
        assert info.value.java_class == "java.lang.X"  # type: ignore[attr-defined]
        await conn.close()
        assert conn.closed
    assert greetings == [hello("u", "ClientService")]


async def test_a_lost_connection_fails_every_pending_call() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await read_request(reader)

    server, port, _ = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="u")
        results = await asyncio.gather(conn.call("Get", b""), conn.call("Get", b""), return_exceptions=True)
        assert all(isinstance(r, HBaseUnavailable) and "lost" in str(r) for r in results), results
        with pytest.raises(HBaseUnavailable, match="closed"):
            await conn.call("Get", b"")
        await conn.close()


async def test_a_call_timed_out_on_a_silent_connection_closes_it() -> None:
    """Nothing arrives after the call was sent (a cut network): the connection is given up at the timeout."""
    release = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await release.wait()

    server, port, _ = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="u")
        with pytest.raises(HBaseTimeout, match=r"did not answer.*nothing else arrived"):
            await conn.call("Get", b"", timeout_s=0.05)
        assert conn.closed
        with pytest.raises(HBaseUnavailable, match="closed"):
            await conn.call("Get", b"")
        release.set()


async def test_a_call_timed_out_while_others_are_answered_keeps_the_connection() -> None:
    """A slow call on a live connection (another call answered after it was sent) only times out."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # never answered
        second = await read_request(reader)
        writer.write(answer(second[0], b"re:" + second[1]))
        third = await read_request(reader)
        writer.write(answer(third[0], b"re:" + third[1]))
        await reader.read()

    server, port, _ = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="u")
        slow, fast = await asyncio.gather(conn.call("Get", b"one", timeout_s=0.3), conn.call("Get", b"two"),
                                          return_exceptions=True)
        assert isinstance(slow, HBaseTimeout) and "nothing else" not in str(slow), slow
        assert not isinstance(fast, BaseException) and fast.param == b"re:two"
        assert not conn.closed
        assert (await conn.call("Get", b"three")).param == b"re:three"
        await conn.close()


async def test_a_refused_connection_is_unavailable() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with anyio.create_task_group() as tg:
        with pytest.raises(HBaseUnavailable, match="cannot connect"):
            await RpcConnection.open("127.0.0.1", port, "ClientService", tg)


async def test_a_call_cut_off_while_sending_closes_the_connection() -> None:
    """A server that stops reading: the request's frame cannot all be sent before the timeout, and
    what went out is part of a frame, so the connection is given up, not reused."""
    release = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()  # reads nothing until the test ends

    server, port, _ = await serve(script)
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("127.0.0.1", port, "ClientService", tg, user="u")
        with pytest.raises(HBaseTimeout):
            await conn.call("Multi", bytes(64 << 20), timeout_s=0.2)
        assert conn.closed
        with pytest.raises(HBaseUnavailable, match="cut off"):
            await conn.call("Get", b"")
        await conn.close()
        release.set()


async def test_over_tls_the_hello_and_the_calls_go_through_the_tls_stream(certs: Path) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        call_id, param = await read_request(reader)
        writer.write(answer(call_id, b"re:" + param))
        await reader.read()

    server, port, greetings = await serve(script, server_tls(certs))
    client_tls = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    async with server, anyio.create_task_group() as tg:
        conn = await RpcConnection.open("localhost", port, "ClientService", tg, user="u", tls=client_tls)
        assert (await conn.call("Get", b"one")).param == b"re:one"
        await conn.close()
    assert greetings == [hello("u", "ClientService")]  # what the server read after the handshake


async def test_over_tls_a_certificate_from_another_ca_is_refused_clearly(certs: Path) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server, port, _ = await serve(script, server_tls(certs))
    other = ssl.create_default_context(cafile=str(certs / "other.pem"))
    async with server, anyio.create_task_group() as tg:
        with pytest.raises(HBaseAuthError, match=r"certificate does not verify .*tls_ca_file"):
            await RpcConnection.open("localhost", port, "ClientService", tg, tls=other)


async def test_tls_to_a_server_without_tls_is_refused_clearly(certs: Path) -> None:
    """A plain server reads the TLS hello as a bad preamble, answers something that is not TLS and closes."""
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(6)
        writer.write(struct.pack(">I", 16) + bytes(16))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(plain, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client_tls = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    async with server, anyio.create_task_group() as tg:
        with pytest.raises(HBaseAuthError, match=r"does it speak TLS .*hbase.server.netty.tls.enabled"):
            await RpcConnection.open("localhost", port, "ClientService", tg, tls=client_tls)
