"""Scan pages fetched and post-processed in worker processes.

A full scan through threads is bound by one process's CPU: Thrift decoding and the caller's own
per-row work (the reader's row decoding) all hold the GIL. Here a page is fetched in an
``anyio.to_process`` worker, on that worker's own connections, and turned into the caller's rows
there by a :data:`PageTransform`; only the transformed page (pickled) comes back. What the calling
process keeps is the unpickling, about a fifth of the work per row. As in the thread path
(:meth:`~connectors.hbase.client.HBaseClient.scan_cells`), a page of at most
:data:`~connectors.hbase.scanrows.SMALL_PAGE_ROWS` rows is one Thrift2 call and a bigger one goes
through Thrift1.

Contract of :func:`scan_page_in_process`:

- The page is exactly ``scan_cells``' page (same bounds, order and limit, the same rows and
  cells; the scanner is opened and closed in the worker, whatever happens), passed through
  ``transform``. A transform is ``(factory, args)``: ``factory(*args)`` is called once per worker
  process (cached by ``(factory, args)``, so ``args`` must be hashable; the 16 most recently used
  are kept) and returns ``fn(rows, label)``. The factory is pickled by reference: a module-level
  function. The page travels in ``marshal`` form when it is made of builtin types, pickled
  otherwise.
- A worker keeps one Thrift1 connection and one Thrift2 client per :class:`Gateway`, each opened
  on first use; one whose call failed is dropped and reopened on the next call. When a kept one
  fails at the connection level (the gateway restarted since it was opened), the page is read
  once more on a fresh connection before the failure is reported (a page is read-only), so a
  gateway that came back is not taken out again by a worker's stale socket.
- Errors: HBase and socket errors come back as the project's :class:`~pipeline.errors.HBaseError`
  types (as from the thread path). An exception the transform raises comes back as it is when it
  pickles (the caller's own types should), otherwise as ``RuntimeError`` with its type and text.
- A worker that dies raises ``anyio.BrokenWorkerProcess`` (also when it dies while starting). A
  worker re-runs the program's main module (under the name ``__mp_main__``) before it takes work;
  when that raises, the error says so and names the main module's exception: a script whose work
  is not under ``if __name__ == "__main__":`` re-runs that work in every worker. A scan in
  processes started by such a re-run is refused at once, and the error says so in one sentence.
- A call is not cancellable once started (like a worker thread): it finishes within the socket
  timeout and returns its connection to a sane state. Worker processes are anyio's: spawned on
  demand up to the caller's limiter, reused, stopped when the event loop ends or after 5 idle minutes.
"""

from __future__ import annotations

import contextlib
import gc
import marshal
import pickle
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_process
import happybase

from connectors.hbase.errors import is_gateway_failure, map_exceptions
from connectors.hbase.scanrows import SMALL_PAGE_ROWS, CellRow, scan_rows, scan_rows2, tscan
from connectors.hbase.thrift2 import load_idl, open_client
from connectors.hbase.transport import PLAIN, ThriftSecurity, open_thrift1, security_of
from pipeline.settings import GatewaySpec, HBaseSettings

__all__ = ["Gateway", "PageTransform", "scan_page_in_process", "warm_worker"]

PageFn = Callable[[list[CellRow], str], Any]
PageTransform = tuple[Callable[..., PageFn], tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Gateway:
    """How a worker process reaches the Thrift1 and Thrift2 gateways (picklable, hashable)."""

    host: str
    port: int
    thrift2_port: int
    timeout_ms: int
    transport: str
    protocol: str
    security: ThriftSecurity = PLAIN

    @classmethod
    def of(cls, spec: GatewaySpec, settings: HBaseSettings, timeout_ms: int | None = None) -> Gateway:
        """Gateway ``spec`` as ``settings`` reach it (its own overrides first); ``timeout_ms``: per call,
        by default ``settings.timeout_ms``."""
        return cls(spec.host, spec.port, spec.thrift2_port, timeout_ms or settings.timeout_ms,
                   spec.transport or settings.transport, settings.protocol, security_of(spec, settings))

    def thrift1(self) -> happybase.Connection:
        """A new open Thrift1 connection (the caller closes it)."""
        return open_thrift1(self.host, self.port, self.timeout_ms, self.transport, self.protocol, self.security)

    def thrift2(self) -> Any:
        """A new open Thrift2 client (:func:`~connectors.hbase.thrift2.open_client`; the caller closes it)."""
        return open_client(self.host, self.thrift2_port, self.timeout_ms, framed=self.transport == "framed",
                           compact=self.protocol == "compact", security=self.security)


# -- worker-process state (module globals live as long as the worker) ----------------------------

_connections: dict[Gateway, happybase.Connection] = {}
_clients2: dict[Gateway, Any] = {}
_transforms: dict[tuple[Callable[..., PageFn], tuple[Any, ...]], PageFn] = {}  # oldest use first
_TRANSFORMS_KEPT = 16  # a transform may carry one query's filter: keep the recent ones only
_GC_THRESHOLD0 = 50_000  # a page allocates a few objects per cell: keep young collections rare


class _Marshalled(bytes):
    """A page in ``marshal`` form. For pages of builtin types (tuples, dicts, bytes, str, int) marshal
    writes 2.5x and reads 1.2x faster than pickle; both processes run the same interpreter, so its
    version-specific format is safe here."""


def _tune_gc() -> None:
    if gc.get_threshold()[0] < _GC_THRESHOLD0:
        gc.set_threshold(_GC_THRESHOLD0)


def _connection(gw: Gateway) -> happybase.Connection:
    conn = _connections.get(gw)
    if conn is None:
        _tune_gc()
        conn = _connections[gw] = gw.thrift1()
    return conn


def _client2(gw: Gateway) -> Any:
    client = _clients2.get(gw)
    if client is None:
        _tune_gc()
        client = _clients2[gw] = gw.thrift2()
    return client


def _drop(gw: Gateway, small: bool) -> None:
    """Forget (and close) the connection whose call failed: the Thrift2 client for small pages."""
    conn = _clients2.pop(gw, None) if small else _connections.pop(gw, None)
    if conn is not None:
        with contextlib.suppress(Exception):  # a broken socket may fail to close; it is gone either way
            conn.close()


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # any failure to round-trip means: send a plain one
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _warm(gw: Gateway) -> None:
    """Open the worker's connections (imports and the Thrift2 IDL included) ahead of use."""
    with map_exceptions(None, "connect"):
        _connection(gw)
        _client2(gw)


def _transform(transform: PageTransform) -> PageFn:
    fn = _transforms.pop(transform, None)
    if fn is None:
        factory, args = transform
        fn = factory(*args)
        if len(_transforms) >= _TRANSFORMS_KEPT:
            del _transforms[next(iter(_transforms))]
    _transforms[transform] = fn  # the most recent last
    return fn


def _scan_page(gw: Gateway, name: bytes, table: str, start: bytes, stop: bytes, limit: int, reverse: bool,
               columns: tuple[bytes, ...] | None, transform: PageTransform, label: str) -> Any:
    """The worker-process body of :func:`scan_page_in_process`."""
    try:
        fn = _transform(transform)
    except Exception as exc:
        raise _picklable(exc) from None
    small = limit <= SMALL_PAGE_ROWS

    def fetch() -> list[CellRow]:
        try:
            with map_exceptions(table, "scan"):
                if small:
                    return scan_rows2(_client2(gw), load_idl(), name, start, stop, limit, reverse, columns, None)
                return scan_rows(_connection(gw), name, tscan(start, stop, None, limit, reverse, columns, None),
                                 limit)
        except Exception:
            _drop(gw, small)
            raise

    kept = gw in (_clients2 if small else _connections)
    try:
        rows = fetch()
    except Exception as exc:
        if not (kept and is_gateway_failure(exc)):
            raise
        rows = fetch()  # the kept socket was stale: once more on a fresh one (module docstring)
    try:
        page = fn(rows, label)
    except Exception as exc:
        raise _picklable(exc) from None
    try:
        return _Marshalled(marshal.dumps(page))
    except ValueError:  # a type marshal does not know: pickled as it is
        return page


async def scan_page_in_process(gw: Gateway, name: bytes, table: str, *, start: bytes, stop: bytes,
                               limit: int, reverse: bool, columns: Sequence[bytes] | None,
                               transform: PageTransform, label: str,
                               limiter: anyio.CapacityLimiter) -> Any:
    """``transform`` applied to at most ``limit`` rows of ``[start, stop)`` of the table ``name``
    (its full name; ``table`` is the name errors give), in a worker process (the module docstring
    gives the contract); at most ``limiter``'s tokens of workers run at once."""
    cols = tuple(columns) if columns else None
    with _died_starting():
        page = await anyio.to_process.run_sync(_scan_page, gw, name, table, start, stop, limit, reverse, cols,
                                               transform, label, limiter=limiter)
    return marshal.loads(page) if isinstance(page, _Marshalled) else page


async def warm_worker(gw: Gateway, limiter: anyio.CapacityLimiter) -> None:
    """Start (or reuse) a worker and open its connection, so the first page does not pay for it."""
    with _died_starting():
        await anyio.to_process.run_sync(_warm, gw, limiter=limiter)


_INIT_FAILED = "Error during worker process initialization"  # anyio's message; the cause says why
_GUARD_HINT = "A program that scans in worker processes must do its work under 'if __name__ == \"__main__\":'"
_NESTED = "scan worker processes cannot start while a worker process re-runs the program's main module"


@contextlib.contextmanager
def _died_starting() -> Iterator[None]:
    """A worker that dies while it starts makes anyio kill a process that is already gone, and the
    ``ProcessLookupError`` of that kill escapes instead of ``BrokenWorkerProcess``: raise the latter.
    A worker whose start failed in the program's main module is explained (module docstring).

    A worker re-runs the main module with ``__main__`` taken out of ``sys.modules`` (anyio would fail
    on that with a bare ``KeyError``). A scan in processes that this re-run starts (an unguarded
    script) is refused here at once, and the parent reports it in one sentence instead of nesting
    the worker's own failure in its message. The refusal reaches the parent either as it is (anyio
    passes a worker's ``BrokenWorkerProcess`` through) or as the cause of anyio's initialization error."""
    if "__main__" not in sys.modules:
        raise anyio.BrokenWorkerProcess(f"{_NESTED}. {_GUARD_HINT}")
    try:
        yield
    except ProcessLookupError as exc:
        raise anyio.BrokenWorkerProcess("the worker process died while starting") from exc
    except anyio.BrokenWorkerProcess as exc:
        cause = exc.__cause__
        prefix = "the worker process failed to start: re-running the program's main module"
        if _NESTED in str(exc) or (str(exc) == _INIT_FAILED and _NESTED in str(cause)):
            raise anyio.BrokenWorkerProcess(f"{prefix} started a scan in worker processes again. {_GUARD_HINT}"
                                            ) from exc
        if str(exc) != _INIT_FAILED or cause is None or isinstance(cause, OSError | EOFError):
            raise  # not the worker's own error (a pipe or process error): as anyio says it
        raise anyio.BrokenWorkerProcess(f"{prefix} raised {type(cause).__name__}: {cause}. {_GUARD_HINT}") from exc
