"""CPU time of the local stack's JVMs and of the benchmark process, read from ``/proc``.

The benchmarks run on the machine that also runs Kafka and HBase, so a figure of wall time means
little without the CPU each side spent: these meters put both in the results.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from connectors.stack import LocalStack

__all__ = ["CpuMeter", "cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuMeter:
    """CPU seconds used by the HBase and Kafka JVMs and by this process between two points
    (the JVMs count 0 when the stack is not the local one)."""

    def __init__(self, stack: LocalStack) -> None:
        self.pids = {"hbase_jvm": stack.hbase.pid(), "kafka_jvm": stack.kafka.pid(), "bench": os.getpid()}
        self.start = {k: cpu_seconds(p) for k, p in self.pids.items()}
        self.t0 = time.perf_counter()

    def stop(self, extra: dict[str, float] | None = None) -> dict[str, float]:
        out = {k: round(cpu_seconds(p) - self.start[k], 1) for k, p in self.pids.items()}
        out.update(extra or {})
        out["wall"] = round(time.perf_counter() - self.t0, 1)
        return out
