"""One connection to an HBase server (region server or master), speaking one service (anyio).

:meth:`RpcConnection.open` connects, sends the preamble and ConnectionHeader (the KeyValue cellblock
codec; SIMPLE auth, or with a Kerberos login the SASL GSSAPI exchange first,
:mod:`connectors.hbase.native.login`, and every later byte wrapped as its QOP says) and starts its reader
in the task group the owner passes (the owner's lifetime bounds the reader's: nothing outlives the
client). :meth:`RpcConnection.call` sends a request frame with the next call id (monotonic, from 1,
wrapping below 2**31) and awaits the response the reader
matches by call id, so that several calls share the connection and may be answered out of order.
Every call has a timeout; a call that times out is forgotten (its late answer is dropped). A call
that times out on a connection that has not delivered a single frame since the call was sent closes
the connection as lost: the socket is presumed dead (a cut network, a frozen server), and the next call
opens a new one, rather than wait for the kernel's retransmission backoff, which grows to minutes, on a
stream the server may never answer again. When the server closes the connection or the socket fails,
every pending call fails with
:class:`~pipeline.errors.HBaseUnavailable` naming the server, and the connection stays closed (the
owner opens a new one). A response carrying an ``ExceptionResponse`` raises :func:`remote_error`'s
:class:`~pipeline.errors.HBaseError`, whose ``java_class`` attribute names the Java exception. A server
that refuses the connection itself (an ``ExceptionResponse`` for call id -1, such as "Authentication is
required" or an unauthorized user, or a late SASL error) fails every call with its reason:
:class:`~pipeline.errors.HBaseAuthError` for an access refusal, else HBaseUnavailable.

Frame layouts: :mod:`connectors.hbase.native.wire`.
"""

from __future__ import annotations

import contextlib
import getpass
import ssl
import struct
import time
from dataclasses import dataclass, field

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.tls import TLSStream

from connectors.hbase.denied import ACCESS_DENIED_CLASS, access_denied, denied_error
from connectors.hbase.native.failures import BACK_OFF, RELOCATE
from connectors.hbase.native.login import kerberos_login
from connectors.hbase.native.wire import Response, WireError, connection_frame, decode_response, hello, request_frame
from connectors.hbase.sasl import Login
from pipeline.errors import (
    HBaseAuthError,
    HBaseError,
    HBaseRequestError,
    HBaseTimeout,
    HBaseUnavailable,
    RegionMapStale,
)

__all__ = ["CLIENT_SERVICE", "META_SERVICE", "RpcConnection", "connection_refused", "remote_error"]

CLIENT_SERVICE = "ClientService"
META_SERVICE = "ClientMetaService"
_U32 = struct.Struct(">I")
_MAX_FRAME = 256 << 20  # the server's own default hbase.ipc.max.request.size
#: what a broken or closed socket raises while it is read or written
_LOST = (OSError, EOFError, anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError,
         anyio.BrokenResourceError, WireError)
#: the call id of a response to no call: the server refuses the connection itself (u32 -1)
_CONNECTION_CALL = 0xFFFFFFFF
#: what a server refusing a connection for its client's identity raises
_ACCESS_DENIED = frozenset({
    "org.apache.hadoop.hbase.security.AccessDeniedException",
    "org.apache.hadoop.security.AccessControlException",
    "org.apache.hadoop.security.authorize.AuthorizationException",
})


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "hbase-ingest"


def remote_error(response: Response, address: str, method: str) -> HBaseError:
    """The project error for a call-level ``ExceptionResponse`` (``response.exception`` is set): HBaseAuthError
    for an ``AccessDeniedException`` (:mod:`connectors.hbase.denied`), RegionMapStale or HBaseUnavailable for
    a retryable one, else HBaseRequestError."""
    exc = response.exception
    assert exc is not None
    detail = exc.message.removeprefix(f"{exc.class_name}: ").removeprefix(exc.class_name)  # the trace names it
    what = f"{method} on {address} failed: {exc.class_name}" + (f": {detail}" if detail else "")
    err: HBaseError
    if exc.class_name == ACCESS_DENIED_CLASS and (denial := access_denied(f"{exc.class_name}: {detail}")):
        err = denied_error(denial, f"{method} on {address}")
    elif exc.class_name in RELOCATE:
        err = RegionMapStale(what)
    elif exc.class_name in BACK_OFF:
        err = HBaseUnavailable(what)
    else:
        err = HBaseRequestError(what)
    vars(err)["java_class"] = exc.class_name  # extra fields (pickled with the error), not a new error class
    vars(err)["detail"] = f"{method} on {address}" + (f": {detail}" if detail else "")
    return err


def connection_refused(response: Response, address: str) -> HBaseError:
    """The error of an ``ExceptionResponse`` for the connection itself (call id -1): HBaseAuthError for
    an access refusal, else HBaseUnavailable."""
    exc = response.exception
    assert exc is not None
    detail = exc.message.removeprefix(f"{exc.class_name}: ") or exc.class_name
    if exc.class_name in _ACCESS_DENIED:
        return HBaseAuthError(f"HBase at {address} refused the connection: {exc.class_name}: {detail}")
    return HBaseUnavailable(f"HBase at {address} closed the connection: {exc.class_name}: {detail}")


def _frame_size(prefix: bytes) -> int:
    size: int = _U32.unpack(prefix)[0]
    if size > _MAX_FRAME:
        raise WireError(f"response frame of {size} bytes exceeds {_MAX_FRAME}")
    return size


@dataclass(slots=True)
class _Pending:
    """One call awaiting its answer: set once, with a response or the error that ended the connection."""

    done: anyio.Event = field(default_factory=anyio.Event)
    response: Response | None = None
    error: HBaseError | None = None


class RpcConnection:
    """A connection to ``host:port`` for ``service`` (``ClientService`` or ``ClientMetaService``)."""

    def __init__(self, host: str, port: int, service: str, stream: anyio.abc.ByteStream) -> None:
        self.host = host
        self.port = port
        self.service = service
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)
        self._send_lock = anyio.Lock()
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._closed: BaseException | None = None
        self._reader_scope = anyio.CancelScope()
        self._heard = time.monotonic()  # when the last frame arrived (or the connection opened)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self._pending)} pending"
        return f"RpcConnection({self.address}, {self.service}, {state})"

    @classmethod
    async def open(cls, host: str, port: int, service: str, task_group: anyio.abc.TaskGroup, *,
                   timeout_s: float = 10.0, user: str | None = None, kerberos: Login | None = None,
                   tls: ssl.SSLContext | None = None) -> RpcConnection:
        """Connect, say hello (after a Kerberos login when ``kerberos`` is given: the ConnectionHeader then
        names the client's principal, not ``user``), and start the reader in ``task_group``. Raises
        :class:`~pipeline.errors.HBaseUnavailable` when the server cannot be reached within ``timeout_s``,
        and :class:`~pipeline.errors.HBaseAuthError` when the login fails
        (:mod:`connectors.hbase.native.login`). With ``tls`` the connection is TLS first (HBase's
        ``hbase.server.netty.tls.enabled``; the server's certificate checked for ``host``), and everything,
        the login included, goes through it; a certificate that does not verify or a server that does not
        speak TLS raises HBaseAuthError (no retry makes it right)."""
        try:
            with anyio.fail_after(timeout_s):
                tcp = await anyio.connect_tcp(host, port)
        except (OSError, TimeoutError) as e:
            raise HBaseUnavailable(f"cannot connect to HBase at {host}:{port}: {e!r}") from e
        stream: anyio.abc.ByteStream = tcp
        try:
            with anyio.fail_after(timeout_s):
                if tls is not None:
                    stream = await _tls(tcp, tls, host, port)
                if kerberos is None:
                    await stream.send(hello(user or _user(), service))
                else:
                    stream, principal = await kerberos_login(stream, kerberos, host, port)
                    await stream.send(connection_frame(principal, service))
        except (*_LOST, TimeoutError) as e:
            await _close_quietly(tcp)
            raise HBaseUnavailable(f"connection to HBase at {host}:{port} failed: {e!r}") from e
        except BaseException:
            await _close_quietly(tcp)
            raise
        conn = cls(host, port, service, stream)
        task_group.start_soon(conn._read_loop, name=f"hbase-rpc-reader {conn.address}")
        return conn

    async def call(self, method: str, param: bytes, cellblock: bytes = b"", *, timeout_s: float = 30.0) -> Response:
        """Send one request and await its response (``param`` and ``cellblock`` of the answer). Raises
        :class:`~pipeline.errors.HBaseTimeout` after ``timeout_s``, ``HBaseUnavailable`` when the
        connection is or gets closed, and :func:`remote_error`'s error when the server answers with an
        exception."""
        if isinstance(self._closed, HBaseAuthError):
            raise HBaseAuthError(str(self._closed)) from self._closed
        if self._closed is not None:
            raise HBaseUnavailable(f"connection to {self.address} is closed: {self._closed!r}")
        self._next_id = self._next_id % 0x7FFFFFFF + 1
        call_id = self._next_id
        pending = self._pending[call_id] = _Pending()
        frame = request_frame(call_id, method, param, cellblock, int(timeout_s * 1000))
        sent = time.monotonic()
        try:
            with anyio.move_on_after(timeout_s) as scope:
                async with self._send_lock:
                    try:
                        await self._stream.send(frame)
                    except _LOST as e:
                        self._fail_all(e)
                        raise HBaseUnavailable(f"{method} on {self.address} failed: {e!r}") from e
                    except BaseException:  # cancelled mid-send: part of the frame may be out, the stream is lost
                        self._fail_all(ConnectionAbortedError(f"{method} was cut off while being sent"))
                        raise
                await pending.done.wait()
        finally:
            self._pending.pop(call_id, None)
        if scope.cancelled_caught:
            silent = self._heard < sent
            if silent:
                self._fail_all(TimeoutError(f"nothing arrived within {timeout_s:g} s of a call"))
            raise HBaseTimeout(f"{method} on {self.address} did not answer within {timeout_s:g} s"
                               + ("; nothing else arrived meanwhile: the connection is closed" if silent else ""))
        if pending.error is not None:
            raise pending.error
        response = pending.response
        assert response is not None
        if response.exception is not None:
            raise remote_error(response, self.address, method)
        return response

    async def _read_loop(self) -> None:
        try:
            with self._reader_scope:
                while True:
                    size = _frame_size(await self._reader.receive_exactly(4))
                    response = decode_response(await self._reader.receive_exactly(size))
                    self._heard = time.monotonic()
                    if response.exception is not None and response.call_id & _CONNECTION_CALL == _CONNECTION_CALL:
                        raise connection_refused(response, self.address)
                    pending = self._pending.get(response.call_id)
                    if pending is not None and not pending.done.is_set():  # else: late, its call timed out
                        pending.response = response
                        pending.done.set()
        except (*_LOST, HBaseAuthError, HBaseUnavailable) as e:
            self._fail_all(e)
        finally:
            self._fail_all(ConnectionAbortedError("closed by the client"))
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()

    def _fail_all(self, cause: BaseException) -> None:
        """Close the connection for good: fail every pending call and stop the reader (it closes the socket)."""
        if self._closed is None:
            self._closed = cause
        self._reader_scope.cancel()
        for call_id, pending in list(self._pending.items()):
            if not pending.done.is_set():
                err: HBaseError
                if isinstance(cause, HBaseAuthError):
                    err = HBaseAuthError(str(cause))
                else:
                    err = HBaseUnavailable(f"connection to {self.address} lost (call {call_id}): {cause!r}")
                err.__cause__ = cause
                pending.error = err
                pending.done.set()

    async def close(self) -> None:
        """Fail pending calls and close the socket (the reader then ends). Idempotent."""
        self._fail_all(ConnectionAbortedError("closed by the client"))
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()


async def _tls(tcp: anyio.abc.ByteStream, context: ssl.SSLContext, host: str, port: int) -> TLSStream:
    """The TLS handshake over ``tcp``; a refusal of either side is HBaseAuthError naming why."""
    where = f"HBase at {host}:{port}"
    try:
        return await TLSStream.wrap(tcp, hostname=host, ssl_context=context, standard_compatible=False)
    except ssl.SSLCertVerificationError as e:
        raise HBaseAuthError(f"TLS to {where}: its certificate does not verify ({e.verify_message}): check "
                             "tls_ca_file, and that the certificate names the host connected to") from e
    except (ssl.SSLError, anyio.BrokenResourceError) as e:
        cause = e if isinstance(e, ssl.SSLError) else e.__cause__  # anyio wraps what the handshake met
        if not isinstance(cause, ssl.SSLError):
            raise
        raise HBaseAuthError(f"TLS to {where} failed ({cause.reason or cause}): does it speak TLS on its RPC port "
                             "(hbase.server.netty.tls.enabled)?") from e


async def _close_quietly(stream: anyio.abc.ByteStream) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(*_LOST):
        await stream.aclose()
