"""Watching one pipeline process of the peer benchmark until every row is written: CPU seconds of
the process and of the HBase JVM, its peak RSS, and when its first and last rows were acknowledged.

A *probe* returns how many rows the pipeline reports as acknowledged by HBase and when that count
was seen (``time.perf_counter``): Flume's sink counter over HTTP, or the hbase-ingest child's
progress lines, or the Flink job's (the same lines, from its counting BufferedMutator). The first
write is the first time the count is above zero, when the process's CPU and the HBase JVM's CPU are
read; all written is when it reaches the total, when they are read again with the process's peak
RSS (``VmHWM``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from bench.cpu import cpu_seconds, status_mb

from .peer_flume import drained
from .peer_ingest import parse_progress

__all__ = ["ChildProgress", "RunFailed", "RunFigures", "flume_probe", "load_average", "stop", "vm_hwm_mb", "watch"]

Probe = Callable[[], tuple[int, float]]


class RunFailed(RuntimeError):
    """A pipeline process exited, stalled or ran out of time before writing every row."""


def vm_hwm_mb(pid: int) -> float | None:
    """Peak resident set of ``pid`` in MB (``VmHWM``), None when it is gone."""
    return status_mb(pid, "VmHWM")


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def flume_probe(port: int) -> Probe:
    """Rows Flume's sink ``k1`` has written, from its ``/metrics`` on ``port`` (0 until it serves)."""
    url = f"http://127.0.0.1:{port}/metrics"

    def probe() -> tuple[int, float]:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                body = resp.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, time.perf_counter()
        return drained(body), time.perf_counter()
    return probe


class ChildProgress:
    """Reads the hbase-ingest child's stdout in a thread: the latest ``written`` count with the
    time its line arrived, and the summary line at the end."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.written, self.seen = 0, time.perf_counter()
        self.summary: dict[str, object] | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            written, summary = parse_progress(raw.decode(errors="replace").strip())
            with self._lock:
                if written is not None:
                    self.written, self.seen = written, time.perf_counter()
                if summary is not None:
                    self.summary = summary

    def probe(self) -> tuple[int, float]:
        with self._lock:
            return self.written, self.seen

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


@dataclass(frozen=True)
class RunFigures:
    """One run, times in seconds from the process's start; ``first_rows`` were already acknowledged
    when the first write was seen. ``hbase_cpu_s`` is the HBase JVM's CPU from the process's start,
    ``hbase_cpu_writing_s`` from its first write, to all written; ``process_cpu_s`` and
    ``process_cpu_writing_s`` the same for the process (so the latter leaves out its start-up)."""

    rows: int
    first_rows: int
    first_write_s: float
    all_written_s: float
    process_cpu_s: float
    hbase_cpu_s: float
    hbase_cpu_writing_s: float
    peak_rss_mb: float
    process_cpu_writing_s: float


def watch(proc: subprocess.Popen[bytes], probe: Probe, total: int, started: float, hbase_cpu: Callable[[], float],
          hbase_cpu0: float, *, tick_s: float = 0.1, stall_s: float = 120.0, timeout_s: float = 3600.0) -> RunFigures:
    """Poll ``probe`` until it reports ``total`` rows; ``started`` is the ``perf_counter`` of the
    process's start and ``hbase_cpu0`` the HBase JVM's CPU seconds then. Raises :class:`RunFailed`
    when the process exits first, no row arrives for ``stall_s`` or the run exceeds ``timeout_s``."""
    first: float | None = None
    first_rows, hbase_at_first, cpu_at_first = 0, hbase_cpu0, 0.0
    last_n, last_change = 0, time.perf_counter()
    while True:
        n, seen = probe()
        now = time.perf_counter()
        if n > 0 and first is None:
            first, first_rows, hbase_at_first, cpu_at_first = seen, n, hbase_cpu(), cpu_seconds(proc.pid)
        if n >= total:
            cpu = cpu_seconds(proc.pid)
            hbase = hbase_cpu()
            hwm = vm_hwm_mb(proc.pid) or 0.0
            assert first is not None
            return RunFigures(n, first_rows, first - started, seen - started, cpu, hbase - hbase_cpu0,
                              hbase - hbase_at_first, hwm, cpu - cpu_at_first)
        if n != last_n:
            last_n, last_change = n, now
        if proc.poll() is not None:
            raise RunFailed(f"the process exited (status {proc.returncode}) after {n:,} of {total:,} rows")
        if now - last_change > stall_s:
            raise RunFailed(f"no progress for {stall_s:.0f} s at {n:,} of {total:,} rows")
        if now - started > timeout_s:
            raise RunFailed(f"not done after {timeout_s:.0f} s: {n:,} of {total:,} rows")
        time.sleep(tick_s)


def stop(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> int:
    """SIGTERM ``proc`` (its own session: the whole group), SIGKILL after ``grace_s``; returns its status."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()
