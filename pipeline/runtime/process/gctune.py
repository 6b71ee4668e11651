"""Garbage-collector tuning for the long-running pipeline processes.

The ingest path allocates several container objects per event (the decoded event, its mutation and
cell dict) that die young and form no reference cycles. CPython's default generation-0 threshold
(700 allocations) then runs a collection every few events; raising it and freezing the objects that
exist after start-up (modules, compiled rowkey builders, settings) cut the worker's CPU per event by
about a quarter in ``bench/bench_worker.py`` (1M events: 31 -> 23 CPU seconds). Cycles are still
collected, just in larger, rarer passes.
"""

from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc(threshold0: int) -> None:
    """Freeze the current heap and set the generation-0 threshold (0: leave Python's defaults)."""
    if threshold0 <= 0:
        return
    gc.collect()
    gc.freeze()
    _, g1, g2 = gc.get_threshold()
    gc.set_threshold(threshold0, max(g1, 20), max(g2, 50))
