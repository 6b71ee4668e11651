"""One measured worker run in a child process, shared by the A/B benchmarks (``bench_cdc``,
``bench_registry``, ``bench_security``): the parent starts ``python -m <module> --child ...`` and reads the
last line of its output; the child runs :func:`measure_worker` and prints its figures as JSON.

A run consumes its topic from the earliest offset up to the end offsets it sees at start, in a fresh
consumer group, until every record is written and committed. Figures: ``events`` (records consumed),
``rows``, ``dead_lettered``, ``events_per_s`` (wall time of the run) and ``run_cpu_s`` (the child's user +
system CPU seconds from after its imports, the HBase client's set-up included, to its end).
:func:`alternate` runs the kinds of an A/B benchmark in turn and sums up their runs.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, end_offsets
from pipeline.core.model import TopicPartition
from pipeline.ports import SchemaRegistry
from pipeline.runtime.process.proctune import tune_process
from pipeline.settings import Settings

__all__ = ["FIGURES", "alternate", "measure_worker", "run_child"]

#: the figures of a run that :func:`alternate` sums up and compares
FIGURES = ("worker_us_per_event", "hbase_jvm_us_per_event", "events_per_s")


def alternate(kinds: Sequence[str], rounds: int, run: Callable[[str], dict[str, Any]], baseline: str,
              cleanup: Callable[[], None]) -> dict[str, Any]:
    """``run(kind)`` for every kind, ``rounds`` times, every other round in reverse order (neither end
    always meets a fresher stack), each run's figures printed as it ends; ``cleanup()`` afterwards, also
    when a run fails. Returns ``runs``, ``medians`` (kind -> figure -> median, min, max, samples) and
    ``over_baseline`` (kind -> figure -> median over ``baseline``'s median) for every other kind."""
    runs: list[dict[str, Any]] = []
    try:
        for kind in [k for i in range(rounds) for k in (kinds if i % 2 == 0 else kinds[::-1])]:
            runs.append({"kind": kind, **run(kind)})
            print(json.dumps(runs[-1]), flush=True)
    finally:
        cleanup()
    medians = {kind: {f: _summary([r[f] for r in runs if r["kind"] == kind]) for f in FIGURES} for kind in kinds}
    ratios = {kind: {f: round(medians[kind][f]["median"] / medians[baseline][f]["median"], 2) for f in FIGURES}
              for kind in kinds if kind != baseline}
    return {"runs": runs, "medians": medians, "over_baseline": ratios}


def _summary(samples: Sequence[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(samples), 3), "min": round(min(samples), 3),
            "max": round(max(samples), 3), "samples": [round(s, 3) for s in samples]}


def run_child(module: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``python -m <module> --child <args>``; its last output line as a dict. Raises RuntimeError naming the
    exit status and the end of its errors when it fails."""
    out = subprocess.run([sys.executable, "-m", module, "--child", *args], capture_output=True, text=True, env=env,
                         check=False)
    if out.returncode:
        raise RuntimeError(f"the worker child {' '.join(args)} failed with exit {out.returncode}: {out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


async def measure_worker(settings: Settings, topic: str, registry: SchemaRegistry | None = None) -> dict[str, Any]:
    """Run the worker on ``topic`` as the module docstring says; returns its figures."""
    from pipeline.runtime.ingest.worker import Worker

    tune_process(settings.runtime)
    stop_at = {TopicPartition(topic, p): e for p, e in (await end_offsets(settings.kafka, topic)).items()}
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    async with HBaseClient(settings.hbase) as hb:
        worker = Worker(settings, hb, KafkaBroker(settings.kafka), group_id=f"bench-{time.time_ns()}",
                        stop_at=stop_at, registry=registry)
        t0 = time.perf_counter()
        summary = await worker.run()
        wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"events": summary.consumed, "rows": summary.rows_written, "dead_lettered": summary.dead_lettered,
            "events_per_s": summary.consumed / wall,
            "run_cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3)}
