"""How the worker's own bookkeeping scales, simulated in one process (no servers): 256 partitions and
up to 1,000 regions, with the pure objects the worker runs (RegionMap, RegionBatcher, OffsetTracker).

Figures (bench/results/scale_sim.json), each against the same figure at a small baseline measured in
the same run (16 regions, 8 partitions), so they read as ratios:

- region map: building a map from a region list (what a refresh does after HBase answers), and one
  ``locate`` per mutation, at 16, 256 and 1,000 regions;
- per-region batching at a steady rate (simulated clock, no sleeping): rows per sealed batch, why
  batches were sealed (rows, bytes or age), the peak of bytes held in open batches, and write calls
  per second, for bench_worker's batch settings at 16, 256 and 1,000 regions;
- offsets: registering and acknowledging every record and computing the committable offsets once per
  commit interval, with 8 and 256 partitions.

    python -m bench.bench_scale_sim [--rate 20000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.core.ingest.batcher import BatchBy, RegionBatcher
from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition

RESULTS = Path(__file__).resolve().parent / "results"
# bench_worker's writer settings
MAX_ROWS, MAX_BYTES, MAX_AGE_MS = 2000, 4 * 1024 * 1024, 200
ROW_BYTES = 300  # about bench_worker's events: key + three cells


def regions(n: int, table: str = "t", servers: int = 2) -> list[Region]:
    """``n`` regions splitting the keys of :func:`_keys` (32 hex digits) evenly, round-robin over servers."""
    bounds = [b"", *(b"%032x" % (i * 2**128 // n) for i in range(1, n)), b""]
    return [Region(table, bounds[i], bounds[i + 1], f"rs-{i % servers}:16020", f"{table},{i}", i)
            for i in range(len(bounds) - 1)]


def _keys(count: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    return [b"%032x" % rnd.getrandbits(128) for _ in range(count)]


def region_map_costs(sizes: list[int], lookups: int = 200_000) -> dict[str, Any]:
    keys = _keys(lookups)
    out: dict[str, Any] = {}
    for n in sizes:
        layout = regions(n)
        t0 = time.perf_counter()
        for _ in range(20):
            region_map = RegionMap(layout)
        build_ms = (time.perf_counter() - t0) / 20 * 1000
        t0 = time.perf_counter()
        for k in keys:
            region_map.locate(k)
        locate_us = (time.perf_counter() - t0) / lookups * 1e6
        out[str(n)] = {"regions": len(region_map), "build_ms": round(build_ms, 3), "locate_us": round(locate_us, 3)}
    base = out[str(sizes[0])]
    for entry in out.values():
        entry["build_vs_baseline"] = round(entry["build_ms"] / base["build_ms"], 1)
        entry["locate_vs_baseline"] = round(entry["locate_us"] / base["locate_us"], 2)
    return out


BY: tuple[BatchBy, ...] = ("region", "server")


def batching(n_regions: int, rate: float, seconds: float, by: BatchBy = "server") -> dict[str, Any]:
    """Events at ``rate``/s with uniformly spread keys through one RegionBatcher (batching ``by``
    server or region; the regions go round-robin over 2 servers) and ``due`` ticks every 10 ms of
    simulated time."""
    region_map = RegionMap(regions(n_regions))
    batcher = RegionBatcher(MAX_ROWS, MAX_BYTES, MAX_AGE_MS, by)
    tp = TopicPartition("events", 0)
    total = int(rate * seconds)
    keys = _keys(total, seed=n_regions)
    sealed_rows: list[int] = []
    reasons: Counter[str] = Counter()
    peak_open_bytes = 0
    next_tick = 10.0
    for i, key in enumerate(keys):
        now = i * 1000 / rate
        m = Mutation("t", key, MutationKind.PUT, {b"l:v": b"x"}, 1, Origin(tp, i), 0, ROW_BYTES)
        sealed = batcher.add(m, region_map, int(now))
        if now >= next_tick:
            sealed += batcher.due(int(now))
            next_tick += 10.0
        for b in sealed:
            sealed_rows.append(b.rows)
            reasons[b.reason.value] += 1
        peak_open_bytes = max(peak_open_bytes, batcher.pending_bytes)
    for b in batcher.drain():
        sealed_rows.append(b.rows)
        reasons[b.reason.value] += 1
    return {
        "regions": n_regions, "by": by, "events": total, "batches": len(sealed_rows),
        "mean_rows_per_batch": round(sum(sealed_rows) / len(sealed_rows), 1),
        "write_calls_per_s": round(len(sealed_rows) / seconds),
        "sealed_by": dict(reasons),
        "peak_open_batch_mb": round(peak_open_bytes / 2**20, 2),
        "worst_case_open_batch_mb": round(n_regions * MAX_BYTES / 2**20),
    }


def offsets(partitions: int, records: int, commits: int) -> dict[str, Any]:
    """Register and acknowledge ``records`` over ``partitions``, computing committable offsets
    ``commits`` times along the way (the commit timer)."""
    tracker = OffsetTracker()
    tps = [TopicPartition("events", p) for p in range(partitions)]
    every = max(1, records // commits)
    t0 = time.perf_counter()
    commit_s = 0.0
    for i in range(records):
        origin = Origin(tps[i % partitions], i // partitions)
        tracker.register(origin, 1)
        tracker.ack(origin)
        if i % every == 0:
            c0 = time.perf_counter()
            for tp, off in tracker.committable().items():
                tracker.mark_committed(tp, off)
            commit_s += time.perf_counter() - c0
    total_s = time.perf_counter() - t0
    return {"partitions": partitions, "records": records,
            "us_per_record": round((total_s - commit_s) / records * 1e6, 3),
            "ms_per_commit_tick": round(commit_s / commits * 1000, 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=20_000, help="events per second of simulated time")
    p.add_argument("--seconds", type=float, default=10.0, help="simulated seconds per batching run")
    args = p.parse_args()
    res: dict[str, Any] = {
        "method": "in-process simulation of the worker's pure objects; no servers, simulated clock for batching",
        "settings": {"max_batch_rows": MAX_ROWS, "max_batch_bytes": MAX_BYTES, "max_batch_age_ms": MAX_AGE_MS,
                     "rate_events_per_s": args.rate, "row_bytes": ROW_BYTES},
        "region_map": region_map_costs([16, 256, 1000]),
        "batching": [batching(n, args.rate, args.seconds, by) for by in BY for n in (16, 256, 1000)],
        "offsets": [offsets(n, 400_000, 40) for n in (8, 256)],
    }
    calls = {(b["by"], b["regions"]): b["write_calls_per_s"] for b in res["batching"]}
    res["ratios"] = {
        **{f"write_calls_1000_over_16_regions_by_{by}": round(calls[(by, 1000)] / calls[(by, 16)], 1) for by in BY},
        "commit_tick_256_over_8_partitions": round(res["offsets"][1]["ms_per_commit_tick"]
                                                   / max(res["offsets"][0]["ms_per_commit_tick"], 1e-6), 1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale_sim.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
