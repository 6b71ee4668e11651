"""Translation of happybase / thriftpy2 / socket exceptions into the project's error tree.

HBase reports server-side failures through Thrift as IOError/TIOError with the Java exception's
text in ``message``; the class name inside that text decides the mapping. The Thrift2 gateway's
``TIOError`` carries only the exception's own message, without its class, plus ``canRetry`` (False
for HBase's do-not-retry exceptions). A missing table's message there is the table's name alone:
a non-retryable ``TIOError`` whose message is the name of the table the call was about is
:class:`~pipeline.errors.TableNotFound` (a disabled table says "<name> is disabled."). A write's
``RetriesExhaustedWithDetailsException`` summarises its causes the same way
("Failed 1 action: <name>: 1 time, servers with issues: null"): when every cause is that name and
no server was reached, the table is missing too. HBase's ``AccessDeniedException`` (a permission the user
lacks, :mod:`connectors.hbase.denied`) is :class:`~pipeline.errors.HBaseAuthError`, whichever of these carries it.

A failure of the project's own code (a ``TypeError``, ``AttributeError``, ``LookupError``,
``ValueError``, ``AssertionError``, ``NameError`` raised on this side of the wire, for instance while
encoding a request) is not HBase's answer and is never translated: it propagates as it is, so the
worker stops without committing. Translated, it would be an :class:`HBaseRequestError`, and the
writer would dead-letter every mutation of every batch it touches as refused by HBase.

Connection-level failures (the gateway refused, reset or closed the connection, a round trip timed
out) are marked: :func:`is_gateway_failure` is True for their errors, also after the error crossed
a process boundary (the mark is an attribute, and the project's errors pickle with theirs). The
client takes such a gateway out and may retry the call on another one; an error that HBase itself
returned through the gateway is not marked. Among them, a *stale connection* (:func:`is_stale_connection`:
a connection that was open and is found closed or reset by the other side, not a timeout and not a
refused connect) is what pooled sockets look like after a gateway restart, an idle cut by a middlebox or
a connection killed on purpose: the client first tries the same gateway once more on a new connection.

A ``TApplicationException`` ("Internal error processing <method>") is the gateway's handler failing with
an exception its interface does not declare, e.g. while a region server it asked is frozen. For a method
that only reads (``get...``, ``scanner...``, ``openScanner``, ``closeScanner``, ``exists...``, ``is...``,
``tableExists``) there is nothing of the caller's to refuse: it is :class:`~pipeline.errors.HBaseUnavailable`,
retried with backoff. For any other method it stays :class:`~pipeline.errors.HBaseRequestError`: the
writer then writes the batch's mutations one by one, so that a mutation the gateway cannot process is
dead-lettered alone.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from thriftpy2.transport import TTransportException

from connectors.hbase.denied import access_denied, denied_error
from connectors.hbase.pool import PoolExhausted
from pipeline.errors import (
    HBaseError,
    HBaseRequestError,
    HBaseTimeout,
    HBaseUnavailable,
    RegionMapStale,
    TableNotFound,
)

__all__ = ["is_gateway_failure", "is_stale_connection", "map_exceptions", "translate"]

_STALE = ("NotServingRegionException", "RegionMovedException", "RegionOpeningException",
          "WrongRegionException", "RegionServerStoppedException")
_BUSY = ("RegionTooBusyException", "CallQueueTooBigException", "ServerNotRunningYetException",
         "PleaseHoldException", "RetriesExhaustedException", "SocketTimeoutException",
         "CallTimeoutException", "ConnectException", "TableNotEnabledException", "TableNotDisabledException",
         "is disabled", "MasterNotRunningException")
_MISSING_TABLE = ("TableNotFoundException",)
#: a gateway's handler failed on a call that writes nothing (module docstring)
_INTERNAL_READ = re.compile(
    r"Internal error processing (get|scanner|openScanner|closeScanner|exists|is|tableExists)\w*")
_BAD_REQUEST = ("NoSuchColumnFamilyException", "IllegalArgumentException", "DoNotRetryIOException",
                "FailedSanityCheckException", "KeyValue size too large", "TableExistsException")


#: errors of the project's own code: :func:`map_exceptions` lets them through (module docstring)
PROGRAM_ERRORS = (TypeError, AttributeError, LookupError, ValueError, AssertionError, NameError)


def _message(exc: BaseException) -> str:
    msg = getattr(exc, "message", None)
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return str(msg or exc)


_RETRIES_EXHAUSTED = re.compile(r"Failed \d+ actions?: (\S+): \d+ times?, servers with issues: null")


def _is_table_name(text: str, table: str) -> bool:
    return text.endswith(table) and not any(c.isspace() for c in text)  # the full name: prefix + table


def _names_missing_table(exc: BaseException, msg: str, table: str | None) -> bool:
    """A Thrift2 ``TIOError`` that says no more than the table's (full) name (module docstring)."""
    if not table or not hasattr(exc, "canRetry"):
        return False
    text = msg.strip()
    if exc.canRetry is False:
        return _is_table_name(text, table)
    summary = _RETRIES_EXHAUSTED.fullmatch(text)
    return summary is not None and _is_table_name(summary.group(1), table)


_GATEWAY_FAILURE = "gateway_failure"
_STALE_CONNECTION = "stale_connection"


def is_gateway_failure(exc: BaseException) -> bool:
    """True for an error of a connection-level failure (module docstring)."""
    return bool(getattr(exc, _GATEWAY_FAILURE, False))


def is_stale_connection(exc: BaseException) -> bool:
    """True for the error of a connection found closed or reset by the other side (module docstring)."""
    return bool(getattr(exc, _STALE_CONNECTION, False))


def _gateway_failure(err: HBaseError, stale: bool) -> HBaseError:
    setattr(err, _GATEWAY_FAILURE, True)  # attributes, so that they survive pickling
    if stale:
        setattr(err, _STALE_CONNECTION, True)
    return err


def _is_stale(exc: BaseException) -> bool:
    if isinstance(exc, TTransportException):
        if exc.type == TTransportException.END_OF_FILE:
            return True
        exc = exc.__cause__ or exc  # the HTTP transport's wraps the socket's error
    return isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError)


def translate(exc: BaseException, table: str | None = None, what: str = "HBase call") -> HBaseError:
    """The project error for ``exc`` (not raised: the caller raises it ``from exc``)."""
    if isinstance(exc, HBaseError):
        return exc
    err = _translate(exc, table, what)
    return _gateway_failure(err, _is_stale(exc)) if _is_connection_failure(exc) else err


def _is_connection_failure(exc: BaseException) -> bool:
    if isinstance(exc, PoolExhausted):
        return False
    if isinstance(exc, TTransportException):
        return True
    # socket.timeout and TimeoutError are OSErrors; the Thrift IOError/TIOError come from HBase itself
    return isinstance(exc, ConnectionError | OSError) and not type(exc).__name__.endswith(("IOError", "TIOError"))


def _translate(exc: BaseException, table: str | None, what: str) -> HBaseError:
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
    if name == "TApplicationException" and _INTERNAL_READ.fullmatch(msg.strip()):
        return HBaseUnavailable(f"{where}: the gateway failed to process a read: {msg}", table=table)
    if (denial := access_denied(msg, table)) is not None:
        return denied_error(denial, where, table)
    if any(s in msg for s in _MISSING_TABLE) or _names_missing_table(exc, msg, table):
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
    """Re-raise any exception from the block as the project's own type, except the project's own
    errors and :data:`PROGRAM_ERRORS` (module docstring) that are not also an ``OSError``."""
    try:
        yield
    except HBaseError:
        raise
    except PROGRAM_ERRORS as exc:
        if not isinstance(exc, OSError):
            raise
        # an I/O failure that is a ValueError too (ssl.SSLCertVerificationError): translated as I/O
        raise translate(exc, table, what) from exc
    except Exception as exc:
        raise translate(exc, table, what) from exc
