"""Does ``backfill --rate`` hold its cap? Measured against the unthrottled backfill in the same run.

(a) Unthrottled: the same slice design replayed as fast as the stack allows (the baseline).
(b) Throttled: a slice of ``rate x seconds`` events replayed with ``rate`` (token bucket, chunks of
    about rate/10 events). The rate is sampled every 100 ms; the steady rate is taken between the
    first event and the last one (group join excluded), the overall rate over the whole run.

Targets: steady rate within 10% of ``rate``; ``rate`` well below (a), so the cap, not the stack, is
what limits (b). Figures go to bench/results/backfill_rate.json.

    python -m bench.bench_backfill_rate [--rate 2000] [--seconds 20] [--partitions 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, delete_topics, end_offsets
from devstack import LocalStack
from devstack.settings import load_stack_settings
from pipeline.cli.logsetup import configure_logging
from pipeline.core.examples import generate
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.backfill.run import Backfill, SliceArgs
from pipeline.runtime.produce import produce_events
from pipeline.settings import Settings, load_settings

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "bench-backfill-events"
TABLE = "bench_backfill"


def bench_settings() -> Settings:
    return load_settings(
        None,
        tables=[{"name": TABLE, "families": {"l": {}}, "regions": 8}],
        routes=[{"name": "logs", "topic": TOPIC, "table": TABLE,
                 "rowkey": "[salt(hostname, log_event, 8)][hostname][_][log_event][reverse_ts(timestamp)]",
                 "timestamp_field": "timestamp", "columns": {"l:v": "value", "l:lv": "level", "l:m": "message"}}],
        writer={"max_batch_rows": 1000, "max_batch_age_ms": 100, "concurrency": 8, "commit_interval_ms": 500},
        kafka={"group_id": "bench-backfill", "dead_letter_topic": "bench-backfill-dlq", "max_poll_records": 5000},
    )


async def _run(settings: Settings, hbase: HBaseClient, args: SliceArgs, rate: float | None,
               state: Path) -> dict[str, Any]:
    backfill = Backfill(settings, hbase, KafkaBroker(settings.kafka), args, rate=rate, state_dir=state, restart=True,
                        group=f"bench-backfill-{'free' if rate is None else int(rate)}-{time.time_ns()}")
    samples: list[tuple[float, int]] = []
    async with anyio.create_task_group() as tg:
        async def sample() -> None:
            while True:
                worker = backfill.worker
                if worker is not None:
                    samples.append((time.monotonic(), worker.stats.consumed))
                await anyio.sleep(0.1)

        tg.start_soon(sample)
        t0 = time.monotonic()
        summary = await backfill.run()
        elapsed = time.monotonic() - t0
        tg.cancel_scope.cancel()
    moving = [(t, n) for t, n in samples if n > 0]
    first_t, first_n = moving[0]
    last_t, last_n = next((t, n) for t, n in moving if n >= summary.events)
    steady = (last_n - first_n) / (last_t - first_t) if last_t > first_t else 0.0
    # the steadiest stretch: the middle 80% of the run, away from start-up and the drain
    lo, hi = first_t + 0.1 * (last_t - first_t), first_t + 0.9 * (last_t - first_t)
    mid = [(t, n) for t, n in moving if lo <= t <= hi]
    mid_rate = (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0]) if len(mid) > 1 else 0.0
    return {"events": summary.events, "rows": summary.rows_written, "complete": summary.complete,
            "elapsed_s": round(elapsed, 3), "overall_rate": round(summary.events / elapsed, 1),
            "steady_rate": round(steady, 1), "middle_80pct_rate": round(mid_rate, 1),
            "throttle_waited_s": round(backfill.throttle.waited_s, 3) if backfill.throttle else 0.0}


async def main(ns: argparse.Namespace) -> dict[str, Any]:
    LocalStack.recorded(load_stack_settings(None)).up()  # the running shape: one JVM or a cluster
    settings = bench_settings()
    await delete_topics(settings.kafka, [TOPIC])
    await anyio.sleep(1)
    throttled_n = int(ns.rate * ns.seconds)
    free_n = max(50_000, throttled_n)
    await produce_events(KafkaBroker(settings.kafka), TOPIC, generate("logs", free_n, seed=11),
                         partitions=ns.partitions)
    async with HBaseClient(settings.hbase) as hbase:
        await create_tables(hbase, settings, recreate=True)
        with tempfile.TemporaryDirectory() as state:
            free = await _run(settings, hbase, SliceArgs(TOPIC), None, Path(state))
            # the first rate x seconds events of the topic, the same share of every partition
            ends = await end_offsets(settings.kafka, TOPIC)
            to = {p: round(e * throttled_n / sum(ends.values())) for p, e in ends.items()}
            capped = await _run(settings, hbase, SliceArgs(TOPIC, to_offsets=to), ns.rate, Path(state))
        await hbase.delete_table(TABLE)
    await delete_topics(settings.kafka, [TOPIC, settings.kafka.dead_letter_topic])
    error = capped["steady_rate"] / ns.rate - 1
    return {
        "target_rate": ns.rate, "seconds": ns.seconds, "partitions": ns.partitions,
        "unthrottled": free, "throttled": capped,
        "steady_rate_vs_target": round(capped["steady_rate"] / ns.rate, 4),
        "overall_rate_vs_target": round(capped["overall_rate"] / ns.rate, 4),
        "target_vs_unthrottled": round(ns.rate / free["steady_rate"], 4) if free["steady_rate"] else None,
        "within_10pct": abs(error) <= 0.10,
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--rate", type=float, default=2000.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--partitions", type=int, default=4)
    configure_logging("WARNING")
    result = asyncio.run(main(p.parse_args()))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "backfill_rate.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
