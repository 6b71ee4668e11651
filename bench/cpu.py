"""CPU time of the local stack's JVMs and of the benchmark process, and a process's memory figures,
read from ``/proc``.

The benchmarks run on the machine that also runs Kafka and HBase, so a figure of wall time means
little without the CPU each side spent: these meters put both in the results.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from devstack import LocalStack

__all__ = ["CpuMeter", "children_cpu_seconds", "cpu_seconds", "hbase_cpu_seconds", "status_mb"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, ...); [] when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _cpu(fields: list[str]) -> float:
    return (int(fields[11]) + int(fields[12])) / _TICK if fields else 0.0


def status_mb(pid: int | str, field: str) -> float | None:
    """A memory figure of ``/proc/PID/status`` in MB (``field`` such as ``VmRSS`` or ``VmHWM``, the
    peak resident set; ``pid`` may be ``"self"``); None when the process is gone or has no such field."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (0 when unknown)."""
    return 0.0 if pid is None else _cpu(_stat(pid))


def hbase_cpu_seconds(stack: LocalStack) -> float:
    """User + system CPU seconds so far of every HBase-side process of ``stack``: the one JVM of the
    standalone stack, or ZooKeeper, the master, the region servers and the gateways of a cluster.
    A process that is not running counts 0, so compare two readings only over a run in which none
    of them restarted."""
    return sum(cpu_seconds(pid) for pid in stack.hbase_pids().values())


def children_cpu_seconds() -> float:
    """User + system CPU seconds so far of this process's live child processes (such as the
    reader's scan worker processes)."""
    me, total = str(os.getpid()), 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(entry.name)) and fields[1] == me:  # [1]: parent pid
            total += _cpu(fields)
    return total


class CpuMeter:
    """CPU seconds used by the HBase side (``hbase_jvm``: every HBase-side JVM, see
    :func:`hbase_cpu_seconds`), the Kafka JVM and this process between two points (the JVMs count 0
    when the stack is not the local one)."""

    def __init__(self, stack: LocalStack) -> None:
        kafka, me = stack.kafka.pid(), os.getpid()
        self.readers: dict[str, Callable[[], float]] = {
            "hbase_jvm": lambda: hbase_cpu_seconds(stack), "kafka_jvm": lambda: cpu_seconds(kafka),
            "bench": lambda: cpu_seconds(me)}
        self.start = {k: read() for k, read in self.readers.items()}
        self.t0 = time.perf_counter()

    def stop(self, extra: dict[str, float] | None = None) -> dict[str, float]:
        out = {k: round(read() - self.start[k], 1) for k, read in self.readers.items()}
        out.update(extra or {})
        out["wall"] = round(time.perf_counter() - self.t0, 1)
        return out
