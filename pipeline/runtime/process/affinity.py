"""CPU affinity for the long-running pipeline processes (``[runtime] cpu_affinity``, off by default).

A pipeline process does its Python work under one interpreter lock: the event loop (merging,
decoding, batching) and the worker threads that decode Thrift replies take turns. When those turns
happen on different cores, the objects one thread just built are read by another from a different
core's cache, and the lock itself moves between cores. Pinning the process to one CPU removes that
cost. Measured with ``bench/bench_reader.py`` (1M rows, 2 cores shared with HBase, medians of 3;
``bench/results/reader.json`` unpinned, ``reader_cpu1.json`` pinned): a full merged scan took 4.6
instead of 6.2 s and 3.7 instead of 5.1 CPU seconds (HBase keeps the other core); an earlier pinned
run gave 5.1 s and 4.2 CPU seconds. The worker was not measured pinned; measure before enabling it
there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pipeline.errors import ConfigError

__all__ = ["pin_cpus"]


def pin_cpus(cpus: Sequence[int]) -> None:
    """Restrict this process (all its threads) to ``cpus``; an empty sequence leaves it alone.

    Raises :class:`ConfigError` naming the CPUs that this process may not use, or when the platform
    has no ``sched_setaffinity``.
    """
    if not cpus:
        return
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("[runtime] cpu_affinity: this platform cannot set CPU affinity")
    allowed = os.sched_getaffinity(0)
    unknown = sorted(set(cpus) - allowed)
    if unknown:
        raise ConfigError(f"[runtime] cpu_affinity: CPU(s) {unknown} are not available to this process "
                          f"(available: {sorted(allowed)})")
    os.sched_setaffinity(0, set(cpus))
