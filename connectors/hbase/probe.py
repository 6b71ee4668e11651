"""Taking a gateway that was marked down back in: a cheap periodic probe in one daemon thread.

:func:`probe_gateway` makes one round trip on each of the gateway's two ports with a short timeout:
Thrift1 ``getTableNames`` and Thrift2 ``tableExists(hbase:meta)``; it raises the transport's
exception when either does not answer. An answer that is an HBase error still proves the gateway
serves (the caller only cares whether the process is there).

:class:`Prober` runs only while some gateway is down: :meth:`Prober.wake` (called when a gateway is
marked down) starts its thread if needed; the thread probes each down gateway every
``interval_s`` (the first probe one interval after it went down), marks the ones that answer up,
and ends when none is down or the prober is closed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence

import structlog

from connectors.hbase.gateways import GatewayBoard
from connectors.hbase.scanprocs import Gateway
from connectors.hbase.thrift2 import load_idl
from pipeline.settings import GatewaySpec, HBaseSettings

__all__ = ["Prober", "probe_gateway"]

log = structlog.get_logger("hbase_ingest.hbase")


def probe_gateway(spec: GatewaySpec, settings: HBaseSettings) -> None:
    """One round trip on ``spec``'s Thrift1 and Thrift2 ports within ``probe_timeout_ms`` each;
    raises (thriftpy2's or the socket's exception) when either fails to answer."""
    gw = Gateway.of(spec, settings, settings.probe_timeout_ms)
    conn = gw.thrift1()
    try:
        conn.client.getTableNames()
    finally:
        conn.close()
    idl = load_idl()
    client = gw.thrift2()
    try:
        with contextlib.suppress(idl.TIOError):  # an HBase-side error: the gateway itself answered
            client.tableExists(idl.TTableName(ns=b"hbase", qualifier=b"meta"))
    finally:
        client.close()


class Prober:
    """Probes the down gateways of ``board`` (``probe(i)`` raises when gateway ``i`` does not answer)
    every ``interval_s`` in one daemon thread (module docstring)."""

    def __init__(self, board: GatewayBoard, probe: Callable[[int], None], interval_s: float,
                 on_up: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._board = board
        self._probe = probe
        self._interval = interval_s
        self._on_up = on_up
        self._clock = clock
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.probes = 0

    def wake(self) -> None:
        """Make sure the thread runs (a gateway was just marked down)."""
        with self._lock:
            if self._closed.is_set() or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="hbase-gateway-probe", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop probing; the thread ends within one probe (it is a daemon: nothing waits for it)."""
        self._closed.set()

    def _run(self) -> None:
        while not self._closed.wait(self._interval):
            with self._lock:
                down: Sequence[int] = self._board.down()
                if not down:
                    self._thread = None  # under the lock: a wake() after this starts a new thread
                    return
            for i in down:
                if self._closed.is_set():
                    break
                self.probes += 1
                try:
                    self._probe(i)
                except Exception as exc:  # any failure to answer keeps it down
                    log.debug("gateway_probe_failed", gateway=self._board.name(i), error=f"{type(exc).__name__}: {exc}")
                    continue
                if self._board.mark_up(i, self._clock()):
                    log.info("gateway_up", gateway=self._board.name(i))
                    if self._on_up is not None:
                        self._on_up(i)
        with self._lock:
            self._thread = None
