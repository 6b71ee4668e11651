"""Translation of happybase / thriftpy2 / socket exceptions into the project's error tree.

HBase reports server-side failures through Thrift as IOError/TIOError with the Java exception's
text in ``message``; the class name inside that text decides the mapping.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from thriftpy2.transport import TTransportException

from pipeline.errors import (
    HBaseError,
    HBaseRequestError,
    HBaseTimeout,
    HBaseUnavailable,
    RegionMapStale,
    TableNotFound,
)

__all__ = ["map_exceptions", "translate"]

_STALE = ("NotServingRegionException", "RegionMovedException", "RegionOpeningException",
          "WrongRegionException", "RegionServerStoppedException")
_BUSY = ("RegionTooBusyException", "CallQueueTooBigException", "ServerNotRunningYetException",
         "PleaseHoldException", "RetriesExhaustedException", "SocketTimeoutException",
         "CallTimeoutException", "ConnectException", "TableNotEnabledException", "TableNotDisabledException",
         "is disabled", "MasterNotRunningException")
_MISSING_TABLE = ("TableNotFoundException",)
_BAD_REQUEST = ("NoSuchColumnFamilyException", "IllegalArgumentException", "DoNotRetryIOException",
                "FailedSanityCheckException", "KeyValue size too large", "TableExistsException")


def _message(exc: BaseException) -> str:
    msg = getattr(exc, "message", None)
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return str(msg or exc)


def translate(exc: BaseException, table: str | None = None, what: str = "HBase call") -> HBaseError:
    """The project error for ``exc`` (not raised: the caller raises it ``from exc``)."""
    if isinstance(exc, HBaseError):
        return exc
    msg = _message(exc)
    where = f"{what} on table {table!r}" if table else what
    if isinstance(exc, socket.timeout | TimeoutError):
        return HBaseTimeout(f"{where} timed out: {msg}", table=table)
    if isinstance(exc, TTransportException):
        if "timed out" in msg.lower():
            return HBaseTimeout(f"{where} timed out: {msg}", table=table)
        return HBaseUnavailable(f"{where}: Thrift gateway unreachable or closed the connection: {msg}", table=table)
    if isinstance(exc, ConnectionError | OSError) and not type(exc).__name__.endswith(("IOError", "TIOError")):
        return HBaseUnavailable(f"{where}: connection failed: {msg}", table=table)
    name = type(exc).__name__
    if name == "TIllegalArgument" or name == "IllegalArgument":
        return HBaseRequestError(f"{where} rejected: {msg}", table=table)
    if any(s in msg for s in _MISSING_TABLE):
        return TableNotFound(f"{where}: table does not exist: {msg.splitlines()[0] if msg else ''}", table=table)
    if any(s in msg for s in _STALE):
        return RegionMapStale(f"{where}: region moved or split: {msg.splitlines()[0]}", table=table)
    if any(s in msg for s in _BAD_REQUEST):
        return HBaseRequestError(f"{where} rejected: {msg.splitlines()[0]}", table=table)
    if any(s in msg for s in _BUSY):
        return HBaseUnavailable(f"{where}: HBase busy or unavailable: {msg.splitlines()[0]}", table=table)
    if name in ("IOError", "TIOError"):
        # unknown server-side IOError: HBase marks many transient ones so; retry with backoff
        return HBaseUnavailable(f"{where} failed on the server: {msg.splitlines()[0] if msg else name}",
                                table=table)
    return HBaseRequestError(f"{where} failed: {name}: {msg}", table=table)


@contextmanager
def map_exceptions(table: str | None = None, what: str = "HBase call") -> Iterator[None]:
    """Re-raise any exception from the block as the project's own type."""
    try:
        yield
    except HBaseError:
        raise
    except Exception as exc:
        raise translate(exc, table, what) from exc
