"""One asyncio connection to an HBase server (region server or master), speaking one service.

:meth:`RpcConnection.open` connects, sends the preamble and ConnectionHeader (SIMPLE auth, the
KeyValue cellblock codec) and starts a reader task. :meth:`RpcConnection.call` sends a request frame
with the next call id (monotonic, from 1, wrapping below 2**31) and awaits the response the reader
matches by call id, so that several calls share the connection and may be answered out of order.
Every call has a timeout; a call that times out is forgotten (its late answer is dropped). When the
server closes the connection or the socket fails, every pending call fails with
:class:`~pipeline.errors.HBaseUnavailable` naming the server, and the connection stays closed (the
owner opens a new one). A response carrying an ``ExceptionResponse`` raises :func:`remote_error`'s
:class:`~pipeline.errors.HBaseError`, whose ``java_class`` attribute names the Java exception.

Frame layouts: :mod:`connectors.hbase.native.wire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import struct

from connectors.hbase.native.failures import BACK_OFF, RELOCATE
from connectors.hbase.native.wire import Response, WireError, decode_response, hello, request_frame
from pipeline.errors import HBaseError, HBaseRequestError, HBaseTimeout, HBaseUnavailable, RegionMapStale

__all__ = ["CLIENT_SERVICE", "META_SERVICE", "RpcConnection", "remote_error"]

CLIENT_SERVICE = "ClientService"
META_SERVICE = "ClientMetaService"
_U32 = struct.Struct(">I")
_MAX_FRAME = 256 << 20  # the server's own default hbase.ipc.max.request.size


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "hbase-ingest"


def remote_error(response: Response, address: str, method: str) -> HBaseError:
    """The project error for a call-level ``ExceptionResponse`` (``response.exception`` is set)."""
    exc = response.exception
    assert exc is not None
    what = f"{method} on {address} failed: {exc.class_name}: {exc.message}"
    err: HBaseError
    if exc.class_name in RELOCATE:
        err = RegionMapStale(what)
    elif exc.class_name in BACK_OFF:
        err = HBaseUnavailable(what)
    else:
        err = HBaseRequestError(what)
    vars(err)["java_class"] = exc.class_name  # an extra field (pickled with the error), not a new error class
    return err


def _frame_size(prefix: bytes) -> int:
    size: int = _U32.unpack(prefix)[0]
    if size > _MAX_FRAME:
        raise WireError(f"response frame of {size} bytes exceeds {_MAX_FRAME}")
    return size


class RpcConnection:
    """A connection to ``host:port`` for ``service`` (``ClientService`` or ``ClientMetaService``)."""

    def __init__(self, host: str, port: int, service: str, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.host = host
        self.port = port
        self.service = service
        self._reader = reader
        self._writer = writer
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Response]] = {}
        self._closed: BaseException | None = None
        self._task = asyncio.create_task(self._read_loop(), name=f"hbase-rpc-reader {self.address}")

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
    async def open(cls, host: str, port: int, service: str, *, timeout_s: float = 10.0,
                   user: str | None = None) -> RpcConnection:
        """Connect and say hello. Raises :class:`~pipeline.errors.HBaseUnavailable` when the server cannot
        be reached within ``timeout_s``."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except (OSError, TimeoutError) as e:
            raise HBaseUnavailable(f"cannot connect to HBase at {host}:{port}: {e!r}") from e
        writer.write(hello(user or _user(), service))
        conn = cls(host, port, service, reader, writer)
        try:
            await writer.drain()
        except OSError as e:
            await conn.close()
            raise HBaseUnavailable(f"connection to HBase at {host}:{port} failed: {e!r}") from e
        return conn

    async def call(self, method: str, param: bytes, cellblock: bytes = b"", *, timeout_s: float = 30.0) -> Response:
        """Send one request and await its response (``param`` and ``cellblock`` of the answer). Raises
        :class:`~pipeline.errors.HBaseTimeout` after ``timeout_s``, ``HBaseUnavailable`` when the
        connection is or gets closed, and :func:`remote_error`'s error when the server answers with an
        exception."""
        if self._closed is not None:
            raise HBaseUnavailable(f"connection to {self.address} is closed: {self._closed!r}")
        self._next_id = self._next_id % 0x7FFFFFFF + 1
        call_id = self._next_id
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            self._writer.write(request_frame(call_id, method, param, cellblock, int(timeout_s * 1000)))
            await self._writer.drain()
            response = await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError as e:
            raise HBaseTimeout(f"{method} on {self.address} did not answer within {timeout_s:g} s") from e
        except OSError as e:
            self._fail_all(e)
            raise HBaseUnavailable(f"{method} on {self.address} failed: {e!r}") from e
        finally:
            self._pending.pop(call_id, None)
        if response.exception is not None:
            raise remote_error(response, self.address, method)
        return response

    async def _read_loop(self) -> None:
        try:
            while True:
                size = _frame_size(await self._reader.readexactly(4))
                response = decode_response(await self._reader.readexactly(size))
                future = self._pending.get(response.call_id)
                if future is not None and not future.done():  # else: a late answer to a call that timed out
                    future.set_result(response)
        except asyncio.CancelledError:
            self._fail_all(ConnectionAbortedError("closed by the client"))
            raise
        except (OSError, EOFError, asyncio.IncompleteReadError, WireError) as e:
            self._fail_all(e)

    def _fail_all(self, cause: BaseException) -> None:
        if self._closed is None:
            self._closed = cause
        for call_id, future in list(self._pending.items()):
            if not future.done():
                err = HBaseUnavailable(f"connection to {self.address} lost (call {call_id}): {cause!r}")
                err.__cause__ = cause
                future.set_exception(err)
        self._writer.close()

    async def close(self) -> None:
        """Fail pending calls, stop the reader, close the socket. Idempotent."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._fail_all(ConnectionAbortedError("closed by the client"))
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
