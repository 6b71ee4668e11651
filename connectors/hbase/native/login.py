"""The Kerberos login of one native RPC connection (anyio): HBase's SASL GSSAPI exchange after the
preamble, then the stream every later byte goes through (wrapped packets with QOP ``auth-int`` and
``auth-conf``). Byte layouts: :mod:`connectors.hbase.native.wire`; the GSSAPI side (credentials, the
security layer, wrap/unwrap): :mod:`connectors.hbase.sasl`.

:func:`kerberos_login` gets the service ticket for ``<service>/<host>`` in a worker thread (it may reach
the KDC), sends the preamble and the first token, and answers the server's challenges until the security
layer is settled; it returns a :class:`SaslStream` over the connection and the client's principal (the
ConnectionHeader's user). The caller bounds it with its connect timeout.

Errors: a server's SASL ERROR reply (Java's class and message), credentials that cannot be had and a QOP
the server does not offer raise :class:`~pipeline.errors.HBaseAuthError` naming the server; so does a
server that is not secure (it asks to fall back to SIMPLE). A KDC that cannot be reached, and a server
that closes the connection without a reason, raise :class:`~pipeline.errors.HBaseUnavailable`. A refusal
of the client's last token arrives where the first answer would: :class:`SaslStream` raises it, as
HBaseAuthError, from the first ``receive``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from connectors.hbase.native.wire import (
    PREAMBLE_KERBEROS,
    SASL_SUCCESS,
    SWITCH_TO_SIMPLE_AUTH,
    WireError,
    decode_sasl_error,
    i32,
    is_sasl_error,
    length_prefixed,
)
from connectors.hbase.sasl import GssSession, Login
from connectors.kerberos import gss_reason
from pipeline.errors import HBaseAuthError, HBaseUnavailable

__all__ = ["SaslStream", "kerberos_login", "refusal"]

#: the largest SASL challenge, error string or wrapped packet read (HBase's own challenge limit is 1 MiB;
#: a packet holds whole response frames, up to the server's largest)
_MAX_TOKEN = 1 << 20
_MAX_PACKET = 256 << 20
_REMEDY = ("set sasl_qop to a level the servers' hbase.rpc.protection allows "
           "(authentication = auth, integrity = auth-int, privacy = auth-conf)")
_CLOSED = (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)


def refusal(where: str, body: bytes) -> HBaseAuthError:
    """The error for a SASL ERROR reply of ``where`` whose body (after the status) is ``body``."""
    cls, message = decode_sasl_error(body)
    reason = ": ".join(part for part in (cls, message) if part) or "no reason given"
    return HBaseAuthError(f"{where} refused the Kerberos login: {reason}")


async def _error_body(reader: BufferedByteReceiveStream) -> bytes:
    """The two Writable strings after an ERROR status, as far as the server sent them."""
    raw = b""
    try:
        for _ in range(2):
            head = await reader.receive_exactly(4)
            raw += head
            size = i32(head)
            if size > 0:
                raw += await reader.receive_exactly(min(size, _MAX_TOKEN))
    except _CLOSED:
        pass
    return raw


async def _challenge(reader: BufferedByteReceiveStream, where: str) -> bytes:
    """The server's next SASL token; raises on an ERROR reply and a request to fall back to SIMPLE."""
    if i32(await reader.receive_exactly(4)) != SASL_SUCCESS:
        raise refusal(where, await _error_body(reader))
    size = i32(await reader.receive_exactly(4))
    if size == SWITCH_TO_SIMPLE_AUTH:
        raise HBaseAuthError(f"{where} does not use Kerberos (it asks the client to fall back to SIMPLE "
                             'authentication): set auth = "none" for this cluster')
    if size < 0 or size > _MAX_TOKEN:
        raise WireError(f"{where} sent a SASL token length of {size}")
    return await reader.receive_exactly(size)


async def kerberos_login(stream: anyio.abc.ByteStream, login: Login, host: str, port: int) -> tuple[SaslStream, str]:
    """Log in to the server at ``host:port`` over the fresh ``stream`` (module docstring); returns the
    stream to speak RPC through and the client's principal."""
    where = f"HBase at {host}:{port}"
    session = GssSession(login, host, peer=where, remedy=_REMEDY)
    reader = BufferedByteReceiveStream(stream)
    try:
        # a slow KDC must not outlast the caller's timeout: the thread is left to finish on its own
        token = await anyio.to_thread.run_sync(session.start, abandon_on_cancel=True)
        await stream.send(PREAMBLE_KERBEROS + length_prefixed(token))
        while not session.complete:
            await stream.send(length_prefixed(session.respond(await _challenge(reader, where))))
    except (anyio.EndOfStream, anyio.IncompleteRead) as e:
        raise HBaseUnavailable(f"{where} closed the connection during the Kerberos login") from e
    except HBaseAuthError as e:
        if where in str(e):
            raise
        raise HBaseAuthError(f"Kerberos login to {where} as {login.principal or 'the ticket cache principal'}: "
                             f"{e}") from e
    return SaslStream(stream, reader, session, where), session.principal


class SaslStream(anyio.abc.ByteStream):
    """The connection's bytes after the login: with ``auth-int``/``auth-conf`` each :meth:`send` goes out
    as one wrapped packet and :meth:`receive` gives the plaintext of the packets read; with ``auth`` the
    bytes pass as they are. The first 4 bytes read are checked for a late SASL ERROR reply
    (:func:`~connectors.hbase.native.wire.is_sasl_error`), raised as HBaseAuthError. A packet that does not
    unwrap raises :class:`~connectors.hbase.native.wire.WireError` (the connection is lost)."""

    def __init__(self, stream: anyio.abc.ByteStream, reader: BufferedByteReceiveStream, session: GssSession,
                 where: str) -> None:
        self._stream = stream
        self._reader = reader
        self._session = session
        self._where = where
        self._checked = False
        self._plain = b""
        self._at = 0

    def __repr__(self) -> str:
        return f"SaslStream({self._where}, {self._session!r})"

    async def send(self, item: bytes) -> None:
        if self._session.wraps:
            try:
                item = length_prefixed(self._session.wrap(item))
            except Exception as e:
                raise WireError(f"a message to {self._where} could not be wrapped: {gss_reason(e)}") from e
        await self._stream.send(item)

    async def _first_word(self) -> bytes:
        word = await self._reader.receive_exactly(4)
        self._checked = True
        if is_sasl_error(word):
            raise refusal(self._where, await _error_body(self._reader))
        return word

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._session.wraps:
            if not self._checked:
                return await self._first_word()
            return await self._reader.receive(max_bytes)
        if self._at >= len(self._plain):
            head = await self._first_word() if not self._checked else await self._reader.receive_exactly(4)
            size = i32(head)
            if size < 0 or size > _MAX_PACKET:
                raise WireError(f"{self._where} sent a wrapped packet length of {size}")
            token = await self._reader.receive_exactly(size)
            try:
                self._plain, self._at = self._session.unwrap(token), 0
            except Exception as e:
                raise WireError(f"a packet from {self._where} did not unwrap: {gss_reason(e)}") from e
        chunk = self._plain[self._at:self._at + max_bytes]
        self._at += len(chunk)
        return chunk

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return self._stream.extra_attributes
