"""Benchmark of the fan-out reader on a 16-bucket salted table.

Design ``[salt(host, 16)][host][_][reverse_ts(ts)]``, pre-split into 16 regions (one per salt
byte), ``--rows`` rows over ``--hosts`` hosts, loaded through ``HBaseClient.write`` in concurrent
batches of 2000. Measured in the same run (ratios matter, not absolute times):

- latency of the newest 100 rows of one host (the salt is computable: one range, one scanner) and
  of the first 100 rows newest-first across all hosts (16 ranges, limit pushed down to each);
- wall time of a full merged scan (16 concurrent ranges, k-way merge, rows decoded) against the
  16 buckets scanned one after another with the same page size and the same decoding (target:
  merged <= 0.6 x serial), and against one happybase scanner over the whole table (no decoding, no
  merge: the floor of what Thrift can deliver).

Figures go to ``bench/results/reader.json``. Run ``python bench/bench_reader.py --rows 200000``
for a quick run; the default is 1,000,000 rows. ``raw_scan_no_decode`` pages the 16 buckets without
decoding, one at a time and eight at a time: on a small machine where the client's CPU (Thrift
decoding under the GIL) is the bottleneck, concurrency cannot pay, and that figure shows it.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from connectors.hbase import HBaseClient
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.rowkey import compile_rowkey
from pipeline.runtime.reader import Reader
from pipeline.runtime.reader_columns import compile_columns
from pipeline.settings import FamilySpec, RouteSpec, load_settings

SPEC = "[salt(host, 16)][host][_][reverse_ts(ts)]"
T0 = 1_700_000_000_000
ORIGIN = Origin(TopicPartition("bench", 0), 0)
OUT = Path(__file__).parent / "results" / "reader.json"


def route_for(table: str) -> RouteSpec:
    return RouteSpec(name="bench", topic="bench", table=table, rowkey=SPEC,
                     columns={"d:v": {"field": "v", "encoding": "long"}, "d:h": "host"})


async def load(hb: HBaseClient, table: str, rows: int, hosts: int, batch: int) -> float:
    rowkey = compile_rowkey(SPEC)
    limiter = anyio.Semaphore(hb.settings.pool_size)
    t0 = time.perf_counter()

    async def write(start: int) -> None:
        async with limiter:
            muts = []
            for i in range(start, min(start + batch, rows)):
                host, ts = f"host{i % hosts:05d}", T0 + (i // hosts) * 1000
                muts.append(Mutation(table, rowkey.build({"host": host, "ts": ts}),
                                     MutationKind.PUT,
                                     {b"d:v": i.to_bytes(8, "big"), b"d:h": host.encode()},
                                     None, ORIGIN))
            await hb.write(table, muts)

    async with anyio.create_task_group() as tg:
        for start in range(0, rows, batch):
            tg.start_soon(write, start)
    return time.perf_counter() - t0


async def newest(reader: Reader, route: RouteSpec, where: dict[str, Any], reps: int
                 ) -> dict[str, Any]:
    times, stats = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        scan = reader.scan(route, where=where, newest_first=True, limit=100)
        rows = await scan.collect()
        times.append(time.perf_counter() - t0)
        assert len(rows) == 100, len(rows)
        stats = scan.stats
    assert stats is not None
    times.sort()
    return {"median_ms": round(statistics.median(times) * 1000, 2),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1000, 2),
            "ranges": stats.ranges_planned, "scanners_opened": stats.scanners_opened,
            "rows_scanned": stats.rows_scanned}


async def newest_serial(hb: HBaseClient, table: str, reps: int) -> dict[str, Any]:
    """Baseline for the cross-host query: the 16 buckets' newest 100 fetched one after another,
    then merged (the same rows the reader's 16 concurrent pages return)."""
    rowkey = compile_rowkey(SPEC)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        pages = [await hb.scan_page(table, start=bytes((s,)), stop=bytes((s + 1,)), limit=100)
                 for s in range(16)]
        rows = heapq.nsmallest(100, (r for p in pages for r in p),
                               key=lambda r: rowkey.sort_key(r[0]))
        assert len(rows) == 100
        times.append(time.perf_counter() - t0)
    return {"median_ms": round(statistics.median(times) * 1000, 2)}


async def raw_scans(hb: HBaseClient, table: str, page_size: int, concurrency: int) -> float:
    """The 16 buckets paged without decoding or merging, ``concurrency`` at a time: shows whether
    the client (Thrift decoding under the GIL) or the server bounds a scan on this machine."""
    limiter = anyio.Semaphore(concurrency)

    async def bucket(salt: int) -> None:
        start, stop = bytes((salt,)), bytes((salt + 1,))
        async with limiter:
            while True:
                page = await hb.scan_page(table, start=start, stop=stop, limit=page_size)
                if len(page) < page_size:
                    return
                start = page[-1][0] + b"\x00"

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for salt in range(16):
            tg.start_soon(bucket, salt)
    return time.perf_counter() - t0


async def merged_scan(reader: Reader, route: RouteSpec) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    n = 0
    scan = reader.scan(route)
    async with scan:
        async for _ in scan:
            n += 1
    return time.perf_counter() - t0, n, scan.stats.scanners_opened


async def serial_scan(hb: HBaseClient, table: str, page_size: int) -> tuple[float, int]:
    """The 16 buckets one after another, paging like the reader and decoding the same way."""
    rowkey = compile_rowkey(SPEC)
    decode_cells = compile_columns(route_for(table))
    t0 = time.perf_counter()
    n = 0
    for salt in range(16):
        start, stop = bytes((salt,)), bytes((salt + 1,)) if salt < 15 else b"\x10"
        while True:
            page = await hb.scan_page(table, start=start, stop=stop, limit=page_size)
            for key, cells in page:
                rowkey.decode(key)
                decode_cells(cells)
            n += len(page)
            if len(page) < page_size:
                break
            start = page[-1][0] + b"\x00"
    return time.perf_counter() - t0, n


async def single_scanner(hb: HBaseClient, table: str) -> tuple[float, int]:
    name = hb.settings.table_prefix + table
    t0 = time.perf_counter()
    n = await hb.call(lambda conn: sum(1 for _ in conn.table(name).scan(batch_size=5000)))
    return time.perf_counter() - t0, n


async def main(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings(args.config)
    table = f"bench_reader_{args.rows}"
    route = route_for(table)
    rowkey = compile_rowkey(SPEC)
    out: dict[str, Any] = {
        "design": SPEC, "rows": args.rows, "hosts": args.hosts, "buckets": 16,
        "page_size": args.page_size, "concurrency": settings.hbase.pool_size,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "HBase (JVM) and this client share the same cores"},
    }
    async with HBaseClient(settings.hbase) as hb:
        exists = table in await hb.tables()
        if exists and not args.reuse:
            await hb.delete_table(table)
            exists = False
        if not exists:
            await hb.create_table(table, {"d": FamilySpec()}, rowkey.split_points(16))
            load_s = await load(hb, table, args.rows, args.hosts, 2000)
            out["load"] = {"seconds": round(load_s, 2), "rows_per_s": round(args.rows / load_s)}
            print(f"loaded {args.rows} rows in {load_s:.1f} s")
        try:
            async with Reader(hb, page_size=args.page_size) as reader:
                out["newest100_one_host"] = await newest(reader, route, {"host": "host00007"},
                                                         args.reps)
                out["newest100_all_hosts"] = await newest(reader, route, {}, args.reps)
                out["newest100_all_hosts_serial_baseline"] = await newest_serial(hb, table,
                                                                                 args.reps)
                out["newest100_all_hosts"]["over_serial"] = round(
                    out["newest100_all_hosts"]["median_ms"]
                    / out["newest100_all_hosts_serial_baseline"]["median_ms"], 3)
                print("newest 100:", out["newest100_one_host"], out["newest100_all_hosts"],
                      out["newest100_all_hosts_serial_baseline"])
                raw1 = [await raw_scans(hb, table, args.page_size, 1) for _ in range(2)]
                raw8 = [await raw_scans(hb, table, args.page_size, 8) for _ in range(2)]
                out["raw_scan_no_decode"] = {
                    "one_bucket_at_a_time_s": round(min(raw1), 3),
                    "eight_buckets_at_a_time_s": round(min(raw8), 3),
                    "ratio": round(min(raw8) / min(raw1), 3)}
                print("raw scans:", out["raw_scan_no_decode"])
                merged, serial, single = [], [], []
                for _ in range(args.full_reps):
                    m_s, m_n, scanners = await merged_scan(reader, route)
                    s_s, s_n = await serial_scan(hb, table, args.page_size)
                    h_s, h_n = await single_scanner(hb, table)
                    assert m_n == s_n == h_n, (m_n, s_n, h_n)
                    merged.append(m_s)
                    serial.append(s_s)
                    single.append(h_s)
                    print(f"full scan of {m_n} rows: merged {m_s:.2f} s ({scanners} pages), "
                          f"serial {s_s:.2f} s, one happybase scanner {h_s:.2f} s")
            m, s, h = (statistics.median(x) for x in (merged, serial, single))
            out["full_scan"] = {
                "rows": m_n, "merged_s": round(m, 3), "serial_16_buckets_s": round(s, 3),
                "single_happybase_scanner_s": round(h, 3),
                "merged_over_serial": round(m / s, 3), "target_merged_over_serial": 0.6,
                "merged_over_single_scanner": round(m / h, 3),
                "merged_rows_per_s": round(m_n / m), "runs": args.full_reps,
            }
        finally:
            if not args.keep:
                await hb.delete_table(table)
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--page-size", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=20, help="repetitions of each newest-100 query")
    parser.add_argument("--full-reps", type=int, default=3, help="repetitions of each full scan")
    parser.add_argument("--config", default=None, help="TOML settings ([hbase] section)")
    parser.add_argument("--keep", action="store_true", help="keep the table for --reuse")
    parser.add_argument("--reuse", action="store_true", help="reuse a table kept by --keep")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result = anyio.run(main, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    cli()
