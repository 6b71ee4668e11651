"""The ``[runtime]`` section applied to the current process, in one call for every long-running
command (run, backfill, scan, demo) and the benchmarks that stand in for them."""

from __future__ import annotations

from pipeline.runtime.process.affinity import pin_cpus
from pipeline.runtime.process.gctune import tune_gc
from pipeline.settings import RuntimeSettings

__all__ = ["tune_process"]


def tune_process(runtime: RuntimeSettings) -> None:
    """GC tuning (:func:`~pipeline.runtime.process.gctune.tune_gc`), then CPU affinity
    (:func:`~pipeline.runtime.process.affinity.pin_cpus`, which raises ``ConfigError`` for CPUs this process
    may not use)."""
    tune_gc(runtime.gc_threshold0)
    pin_cpus(runtime.cpu_affinity)
