"""A thread-safe pool of blocking Thrift connections, each used by one worker thread at a time.

Connections are opened lazily, handed out LIFO (warm sockets first), and thrown away (closed, not
returned) when a call on them failed: after a timeout or transport error the socket state is unknown.
The async layer bounds concurrency with an ``anyio.CapacityLimiter`` of the same size, so a thread
never waits here for long. :meth:`ConnectionPool.discard_idle` closes the idle connections (of a
gateway found dead: their sockets are, too).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["ConnectionPool", "PoolExhausted"]

C = TypeVar("C")


class PoolExhausted(TimeoutError):
    """No connection came free in time: this client's own limit, not the gateway's failure."""


class ConnectionPool(Generic[C]):
    def __init__(self, size: int, connect: Callable[[], C], close: Callable[[C], None], name: str = "pool") -> None:
        self.size = size
        self.name = name
        self._connect = connect
        self._close = close
        self._idle: queue.LifoQueue[C] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._open = 0
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def __repr__(self) -> str:
        return f"ConnectionPool({self.name!r}, size={self.size}, open={self._open}, idle={self._idle.qsize()})"

    def statistics(self) -> dict[str, int]:
        return {"size": self.size, "open": self._open, "idle": self._idle.qsize()}

    @contextmanager
    def connection(self, timeout_s: float | None = None) -> Iterator[C]:
        if not self._slots.acquire(timeout=timeout_s):
            raise PoolExhausted(f"no free connection in {self.name} within {timeout_s} s")
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._connect()
                with self._lock:
                    self._open += 1
            try:
                yield conn
            except BaseException:
                self._discard(conn)
                raise
            else:
                if self._closed:
                    self._discard(conn)
                else:
                    self._idle.put(conn)
        finally:
            self._slots.release()

    def _discard(self, conn: C) -> None:
        with self._lock:
            self._open -= 1
        with contextlib.suppress(Exception):
            self._close(conn)

    def discard_idle(self) -> None:
        """Close every idle connection (those in use are discarded when their call fails)."""
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            self._discard(conn)

    def close(self) -> None:
        self._closed = True
        self.discard_idle()
