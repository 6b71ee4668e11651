"""Benchmark of the fan-out reader on a 16-bucket salted table.

Design ``[salt(host, 16)][host][_][reverse_ts(ts)]``, pre-split into 16 regions (one per salt
byte), ``--rows`` rows over ``--hosts`` hosts, loaded through ``HBaseClient.write`` in concurrent
batches of 2000. Measured in the same run (ratios matter, not absolute times):

- latency of the newest 100 rows of one host (the salt is computable: one range, one scanner) and
  of the first 100 rows newest-first across all hosts (16 ranges, limit pushed down to each),
  against the 16 buckets' newest 100 fetched one after another, merged and decoded the same way.
  On this design "newest first" orders time within a host (hosts come in key order), so those are
  one host's newest rows; ``newest100_by_time_all_hosts`` loads the same hosts and values into the
  time-led design ``[mod(ts, 16)][long(ts)][host]`` (each host's timestamps offset by its number in
  ms, so that the buckets share the rows) and asks for its newest 100 across every host (16 reverse
  scans merged by time; checked to be exactly the 100 newest rows).
  ``newest100_all_hosts_by_time`` asks the entity-led table itself for its newest 100 by time
  across every host (``by_time=True``: each bucket walked host by host, at most 100 rows read per
  host; checked to be the 100 newest rows, ties in descending key order);
- the oldest 1% and 10% of every host's rows by time range, read with the skip scan
  (``skip_scan=True``: host by host, only each host's rows in the range) and with the plain scan
  (every row of every bucket, filtered by time), alternately (``time_range_*``; same rows checked);
- wall time of a full merged scan (16 concurrent ranges, k-way merge, rows decoded) against the
  same scan done serially (target: merged <= 0.6 x serial), and against one happybase scanner over
  the whole table (no decoding, no merge: the floor of what Thrift can deliver).

Fairness of the serial baseline. It produces exactly the merged scan's output and does exactly its
per-row work; only the fetching differs. It pages the 16 buckets with the same page schedule as the
reader (``first_page`` rows, growing 4x per page up to the reader's page size) through the same
``HBaseClient.scan_cells``, merges them with the same batch merge (``merge_batches``, then
``merge_pieces``) by ``RowKey.sort_key``, and decodes every piece with the reader's own
generated row decoder (``Reader.design``). But it fetches a range's next page only when the merge
asks for it, one page at a time, with nothing fetched while rows are merged and decoded. The merged
scan fetches up to ``concurrency`` pages at once while ``--read-ahead`` pages per range wait for
the merge, and is consumed through ``Scan.batches()``, the same unit (a batch) that the serial loop
consumes; the per-row ``async for row in scan`` is timed as well (``merged_row_iteration_s``). Both
scans' row counts and first/last keys are checked equal. The six full scans of a repetition (the
serial one at both page sizes, below) run in an order that rotates from one repetition to the
next: in a fixed order, the scan that always ran right after the serial one came out up to 10%
slower, with more HBase CPU, than the same scan in other places. One untimed pass over the table
precedes every measurement (just after a load, the first scan otherwise pays for the memstore
flush). The process tunes its garbage collector and CPU affinity as ``hbase-ingest scan`` does
(``[runtime]``; the machine entry of the figures records the CPUs used).

The merged scan is measured twice: with worker threads (the default reader) and with
``Reader(processes=--processes)``, where pages are fetched and decoded in worker processes and this
process only merges (``merged_in_processes_*``; the workers' CPU is counted separately). Both
produce the same rows as the serial baseline. Each reader pages with its mode's default page size
(``PAGE_SIZE``, ``PROCESS_PAGE_SIZE``; ``--page-size``, ``--processes-page-size``), so the serial
baseline runs with both as well (``serial_16_buckets_s``,
``serial_16_buckets_at_processes_page_size_s``) and the process mode's ratio is taken against the
faster of the two.

Figures go to ``bench/results/reader.json``. Run ``python bench/bench_reader.py --rows 200000``
for a quick run; the default is 1,000,000 rows. ``raw_scan_no_decode`` pages the 16 buckets without
decoding, one at a time and eight at a time: when HBase itself (the region server and Thrift
gateway, sharing the cores with this client) bounds a scan, concurrency cannot pay much, and that
figure shows it. ``merged_client_cpu_s`` and ``serial_client_cpu_s`` are this process's CPU time
during a full scan, ``*_hbase_cpu_s`` the local HBase JVM's (region server and Thrift gateway in one
process; 0 when HBase is not the local stack); medians.

``bounds`` turns those into the best ratio any client of this design could reach here, measured in
the same run. ``one_process_client``: the merged scan does all of the serial scan's client work in
one Python process, so it cannot take less wall time than the serial scan's client CPU (the work
holds the GIL); best ratio = serial client CPU / serial wall. ``machine_cpus``: the client and
HBase together cannot use more than the machine's cores; best ratio = (serial client CPU + HBase
CPU) / cores / serial wall. A ratio above the larger bound is overhead of the fan-out itself.
``machine_cpus_in_processes``: the same for the process mode, with the CPU it spent (this process,
its workers and HBase): the process mode escapes the one-process bound but pays for its workers'
extra CPU (pickling, process round trips) on the shared cores.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from bench.cpu import children_cpu_seconds, hbase_cpu_seconds
from connectors.hbase import HBaseClient
from devstack import LocalStack
from devstack.settings import load_profile
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.rowkey import compile_rowkey
from pipeline.rowkey.splits import split_points
from pipeline.runtime.process.proctune import tune_process
from pipeline.runtime.read.merge import Row, merge_batches, merge_pieces
from pipeline.runtime.read.reader import PAGE_SIZE, PROCESS_PAGE_SIZE, Reader, ReadRow
from pipeline.settings import ColumnSpec, FamilySpec, RouteSpec

SPEC = "[salt(host, 16)][host][_][reverse_ts(ts)]"
#: the same rows in a time-led design: newest first is then by time across every host
SPEC_BY_TIME = "[mod(ts, 16)][long(ts)][host]"
T0 = 1_700_000_000_000
ORIGIN = Origin(TopicPartition("bench", 0), 0)
OUT = Path(__file__).parent / "results" / "reader.json"


def route_for(table: str, spec: str = SPEC) -> RouteSpec:
    return RouteSpec(name="bench", topic="bench", table=table, rowkey=spec,
                     columns={"d:v": ColumnSpec(field="v", encoding="long"), "d:h": ColumnSpec(field="host")})


async def load(hb: HBaseClient, table: str, rows: int, hosts: int, batch: int, spec: str = SPEC,
               spread_ms: bool = False) -> float:
    """Row ``i``: host ``i % hosts`` at ``T0 + (i // hosts) s``, plus ``i % hosts`` ms when
    ``spread_ms`` (so that a time bucket such as ``mod(ts, 16)`` spreads the hosts' rows)."""
    rowkey = compile_rowkey(spec)
    limiter = anyio.Semaphore(hb.settings.pool_size)
    t0 = time.perf_counter()

    async def write(start: int) -> None:
        async with limiter:
            muts = []
            for i in range(start, min(start + batch, rows)):
                host, ts = f"host{i % hosts:05d}", T0 + (i // hosts) * 1000 + (i % hosts if spread_ms else 0)
                muts.append(Mutation(table, rowkey.build({"host": host, "ts": ts}),
                                     MutationKind.PUT,
                                     {b"d:v": i.to_bytes(8, "big"), b"d:h": host.encode()},
                                     None, ORIGIN))
            await hb.write(table, muts)

    async with anyio.create_task_group() as tg:
        for start in range(0, rows, batch):
            tg.start_soon(write, start)
    return time.perf_counter() - t0


async def newest(reader: Reader, route: RouteSpec, where: dict[str, Any], reps: int, by_time: bool = False
                 ) -> dict[str, Any]:
    times, stats = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        scan = reader.scan(route, where=where, newest_first=True, limit=100, by_time=by_time)
        rows = await scan.collect()
        times.append(time.perf_counter() - t0)
        assert len(rows) == 100, len(rows)
        stats = scan.stats
    assert stats is not None
    times.sort()
    out = {"median_ms": round(statistics.median(times) * 1000, 2),
           "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1000, 2),
           "ranges": stats.ranges_planned, "scanners_opened": stats.scanners_opened,
           "rows_scanned": stats.rows_scanned}
    if by_time:
        out["entities_walked"] = sum(r.entities for r in stats.ranges)
    return out


async def newest_serial(reader: Reader, route: RouteSpec, reps: int) -> dict[str, Any]:
    """Baseline for the cross-host query: the 16 buckets' newest 100 fetched one after another,
    then merged and decoded (the same rows the reader's 16 concurrent pages return)."""
    hb, table = reader.hbase, route.table
    rowkey, decode_run = reader.design(route)
    sort_key = rowkey.sort_key_fn
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        pages = [await hb.scan_cells(table, start=bytes((s,)), stop=bytes((s + 1,)), limit=100)
                 for s in range(16)]
        best = heapq.nsmallest(100, (r for p in pages for r in p), key=lambda r: sort_key(r[0]))
        rows = decode_run(best, "")
        assert len(rows) == 100
        times.append(time.perf_counter() - t0)
    return {"median_ms": round(statistics.median(times) * 1000, 2)}


async def time_range_scans(reader: Reader, route: RouteSpec, span: tuple[int, int], reps: int
                           ) -> dict[str, Any]:
    """One time range across every host, read with the skip scan and with the plain scan (every
    row of every bucket, filtered by time), alternately: medians, and the same rows checked."""
    times: dict[bool, list[float]] = {True: [], False: []}
    stats: dict[bool, Any] = {}
    keys: dict[bool, list[bytes]] = {}
    for rep in range(reps):
        for skip in ((True, False) if rep % 2 == 0 else (False, True)):
            t0 = time.perf_counter()
            scan = reader.scan(route, time_range=span, skip_scan=skip)
            rows = await scan.collect()
            times[skip].append(time.perf_counter() - t0)
            stats[skip], keys[skip] = scan.stats, [r.key for r in rows]
    assert keys[True] == keys[False], "skip scan: not the plain scan's rows"
    out: dict[str, Any] = {"rows": len(keys[True])}
    for skip, name in ((True, "skip_scan"), (False, "filtered_scan")):
        out[name] = {"median_s": round(statistics.median(times[skip]), 3),
                     "scanners_opened": stats[skip].scanners_opened, "rows_scanned": stats[skip].rows_scanned}
    out["skip_over_filtered"] = round(out["skip_scan"]["median_s"] / out["filtered_scan"]["median_s"], 3)
    return out


async def raw_scans(hb: HBaseClient, table: str, page_size: int, concurrency: int) -> float:
    """The 16 buckets paged without decoding or merging, ``concurrency`` at a time: shows whether
    the client (Thrift decoding under the GIL) or the server bounds a scan on this machine."""
    limiter = anyio.Semaphore(concurrency)

    async def bucket(salt: int) -> None:
        start, stop = bytes((salt,)), bytes((salt + 1,))
        async with limiter:
            while True:
                page = await hb.scan_cells(table, start=start, stop=stop, limit=page_size)
                if len(page) < page_size:
                    return
                start = page[-1][0] + b"\x00"

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for salt in range(16):
            tg.start_soon(bucket, salt)
    return time.perf_counter() - t0


class FullScan:
    """One full scan's figures: wall, client CPU and HBase JVM CPU seconds, rows, pages, first and
    last key."""

    stack: LocalStack | None = None  # the local stack (its HBase-side JVMs' CPU), set by main()

    def __init__(self) -> None:
        self.n = self.pages = 0
        self.first = self.last = b""
        self.h0, self.w0 = self._hbase_cpu(), children_cpu_seconds()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.wall = self.cpu = self.hbase_cpu = self.workers_cpu = 0.0

    def _hbase_cpu(self) -> float:
        return 0.0 if self.stack is None else hbase_cpu_seconds(self.stack)

    def row(self, row: ReadRow) -> None:
        if not self.n:
            self.first = row.key
        self.last = row.key
        self.n += 1

    def stop(self) -> FullScan:
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.c0
        self.hbase_cpu = self._hbase_cpu() - self.h0
        self.workers_cpu = children_cpu_seconds() - self.w0
        return self


async def merged_scan(reader: Reader, route: RouteSpec, per_row: bool = False) -> FullScan:
    out = FullScan()
    scan = reader.scan(route)
    async with scan:
        if per_row:
            async for row in scan:
                out.row(row)
        else:
            async for batch in scan.batches():
                for row in batch:
                    out.row(row)
    out.pages = scan.stats.scanners_opened
    return out.stop()


async def serial_scan(reader: Reader, route: RouteSpec) -> FullScan:
    """The merged scan's output and per-row work with one page fetched at a time, on demand (the
    module docstring says why this is the fair baseline)."""
    hb, table = reader.hbase, route.table
    rowkey, decode_run = reader.design(route)
    out = FullScan()
    cursors = [bytes((s,)) for s in range(16)]
    stops = [bytes((s + 1,)) for s in range(16)]
    sizes = [reader.first_page] * 16
    ended = [False] * 16

    async def receive(i: int) -> list[Row] | None:
        if ended[i]:
            return None
        want = min(sizes[i], reader.page_size)
        page = await hb.scan_cells(table, start=cursors[i], stop=stops[i], limit=want)
        out.pages += 1
        sizes[i] *= 4
        if len(page) < want:
            ended[i] = True
        elif page:
            cursors[i] = page[-1][0] + b"\x00"
        return page or None

    sort_key = rowkey.sort_key_fn
    async for pieces in merge_batches(16, receive, sort_key, False):
        decoded = [decode_run(rows, f"salt={i}") for i, rows in pieces]
        for row in merge_pieces(decoded, lambda r: sort_key(r.key)):
            out.row(row)
    return out.stop()


async def single_scanner(hb: HBaseClient, table: str) -> tuple[float, int]:
    name = hb.settings.table_prefix + table
    t0 = time.perf_counter()
    n = await hb.call(lambda conn: sum(1 for _ in conn.table(name).scan(batch_size=5000)))
    return time.perf_counter() - t0, n


async def main(args: argparse.Namespace) -> dict[str, Any]:
    settings = load_profile(args.config)  # the worker's settings, [stack] validated
    tune_process(settings.runtime)  # as `hbase-ingest scan` does; HBASE_INGEST_RUNTIME__CPU_AFFINITY='[1]' pins
    FullScan.stack = LocalStack.recorded(settings.stack)
    table = f"bench_reader_{args.rows}"
    route = route_for(table)
    out: dict[str, Any] = {
        "design": SPEC, "rows": args.rows, "hosts": args.hosts, "buckets": 16,
        "read_ahead": args.read_ahead,
        "concurrency": args.concurrency or settings.hbase.pool_size,
        "machine": {"cpus": os.cpu_count(), "cpu_affinity": sorted(os.sched_getaffinity(0)),
                    "python": platform.python_version(),
                    "note": "HBase (JVM) and this client share the same cores"},
    }
    by_time = f"bench_reader_time_{args.rows}"
    route_t = route_for(by_time, SPEC_BY_TIME)
    async def ensure_loaded(hb: HBaseClient, name: str, spec: str, key: str) -> None:
        exists = name in await hb.tables()
        if exists and not args.reuse:
            await hb.delete_table(name)
            exists = False
        if not exists:
            await hb.create_table(name, {"d": FamilySpec()}, split_points(compile_rowkey(spec), 16))
            load_s = await load(hb, name, args.rows, args.hosts, 2000, spec, spread_ms=name == by_time)
            out[key] = {"seconds": round(load_s, 2), "rows_per_s": round(args.rows / load_s)}
            print(f"loaded {args.rows} rows of {spec} in {load_s:.1f} s")

    async with HBaseClient(settings.hbase) as hb:
        await ensure_loaded(hb, table, SPEC, "load")
        try:
            # one untimed pass first: the scans that follow all find the data equally warm
            async with Reader(hb, page_size=args.page_size, read_ahead=args.read_ahead,
                              concurrency=args.concurrency) as reader, \
                    Reader(hb, page_size=args.processes_page_size, read_ahead=args.read_ahead,
                           concurrency=args.concurrency, processes=args.processes) as in_procs:
                out["page_size"], out["processes_page_size"] = reader.page_size, in_procs.page_size
                await raw_scans(hb, table, reader.page_size, 8)
                await merged_scan(in_procs, route)  # untimed: starts the workers, builds their decoders
                out["newest100_one_host"] = await newest(reader, route, {"host": "host00007"},
                                                         args.reps)
                out["newest100_all_hosts"] = await newest(reader, route, {}, args.reps)
                out["newest100_all_hosts"]["order"] = (
                    "logical (host, then newest first): the first 100 rows are one host's newest; "
                    "newest100_all_hosts_by_time asks for the newest across hosts")
                out["newest100_all_hosts_serial_baseline"] = await newest_serial(reader, route,
                                                                                 args.reps)
                out["newest100_all_hosts_processes"] = await newest(in_procs, route, {}, args.reps)
                out["newest100_all_hosts_by_time"] = await newest(reader, route, {}, args.by_time_reps,
                                                                  by_time=True)
                got = await reader.scan(route, newest_first=True, limit=100, by_time=True).collect()
                # row i is loaded at T0 + (i // hosts) s for host i % hosts: the last 100 rows
                # loaded, last first, are the newest, ties (one second, several hosts) in
                # descending host order, which is the logical order here
                want = [(f"host{i % args.hosts:05d}", T0 + (i // args.hosts) * 1000)
                        for i in range(args.rows - 1, args.rows - 101, -1)]
                assert [(r.fields["host"], r.fields["ts"]) for r in got] == want, \
                    "by time: not the newest rows (ties in descending key order)"
                out["newest100_all_hosts_by_time"]["order"] = (
                    "by time across every host, ties in descending key order: the reader walks each "
                    "bucket host by host and reads at most 100 rows of each")
                per_host = args.rows // args.hosts  # one row a second per host from T0
                for name, frac in (("time_range_1pct_all_hosts", 0.01), ("time_range_10pct_all_hosts", 0.1)):
                    span = (T0, T0 + int(per_host * frac) * 1000)
                    out[name] = await time_range_scans(reader, route, span, args.time_range_reps)
                    out[name]["time_range"] = f"the oldest {frac:.0%} of every host's rows"
                    print(name, out[name])
                out["newest100_all_hosts"]["over_serial"] = round(
                    out["newest100_all_hosts"]["median_ms"]
                    / out["newest100_all_hosts_serial_baseline"]["median_ms"], 3)
                print("newest 100:", out["newest100_one_host"], out["newest100_all_hosts"],
                      out["newest100_all_hosts_serial_baseline"])
                raw1 = [await raw_scans(hb, table, reader.page_size, 1) for _ in range(2)]
                raw8 = [await raw_scans(hb, table, reader.page_size, 8) for _ in range(2)]
                out["raw_scan_no_decode"] = {
                    "one_bucket_at_a_time_s": round(min(raw1), 3),
                    "eight_buckets_at_a_time_s": round(min(raw8), 3),
                    "ratio": round(min(raw8) / min(raw1), 3)}
                print("raw scans:", out["raw_scan_no_decode"])
                merged: list[FullScan] = []
                merged_p: list[FullScan] = []
                per_row: list[FullScan] = []
                serial: list[FullScan] = []
                serial_p: list[FullScan] = []
                single: list[float] = []
                runs: dict[str, Callable[[], Awaitable[Any]]] = {
                    "merged": lambda: merged_scan(reader, route),
                    "procs": lambda: merged_scan(in_procs, route),
                    "per_row": lambda: merged_scan(reader, route, per_row=True),
                    "serial": lambda: serial_scan(reader, route),
                    "serial_p": lambda: serial_scan(in_procs, route),  # the process mode's page size
                    "single": lambda: single_scanner(hb, table),
                }
                kinds = list(runs)
                for rep in range(args.full_reps):
                    # the six scans in a rotating order: none always runs first or after another
                    scans: dict[str, Any] = {}
                    for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
                        scans[kind] = await runs[kind]()
                    ms, mp, ss, sp = scans["merged"], scans["procs"], scans["serial"], scans["serial_p"]
                    per_row.append(scans["per_row"])
                    h_s, h_n = scans["single"]
                    assert ms.n == mp.n == ss.n == sp.n == h_n, (ms.n, mp.n, ss.n, sp.n, h_n)
                    assert (ms.first, ms.last) == (mp.first, mp.last) == (ss.first, ss.last) == (sp.first, sp.last), \
                        "outputs differ"
                    merged.append(ms)
                    merged_p.append(mp)
                    serial.append(ss)
                    serial_p.append(sp)
                    single.append(h_s)
                    print(f"full scan of {ms.n} rows: merged {ms.wall:.2f} s ({ms.pages} pages, "
                          f"cpu {ms.cpu:.2f} s, hbase {ms.hbase_cpu:.2f} s), in {args.processes} "
                          f"processes {mp.wall:.2f} s (cpu {mp.cpu:.2f} + workers {mp.workers_cpu:.2f} s, "
                          f"hbase {mp.hbase_cpu:.2f} s), serial {ss.wall:.2f} s "
                          f"({ss.pages} pages, cpu {ss.cpu:.2f} s, hbase {ss.hbase_cpu:.2f} s), serial with "
                          f"the processes' page size {sp.wall:.2f} s ({sp.pages} pages), "
                          f"one happybase scanner {h_s:.2f} s")
                # the time-led table is loaded last: its flushes and compactions stay out of the scans above
                await ensure_loaded(hb, by_time, SPEC_BY_TIME, "load_by_time")
                await raw_scans(hb, by_time, reader.page_size, 8)  # untimed, as for the main table
                out["newest100_by_time_all_hosts"] = await newest(reader, route_t, {}, args.reps)
                out["newest100_by_time_all_hosts"]["design"] = SPEC_BY_TIME
                got = await reader.scan(route_t, newest_first=True, limit=100).collect()
                last = T0 + (args.rows // args.hosts - 1) * 1000 + args.hosts - 1  # the newest row's ts
                assert [r.fields["ts"] for r in got] == [last - j for j in range(100)], "not the newest rows"
                print("newest 100 by time:", out["newest100_by_time_all_hosts"])
            m, mp_s, s, sp_s = (statistics.median(x.wall for x in runs)
                                for runs in (merged, merged_p, serial, serial_p))
            s_best = min(s, sp_s)  # the process mode is compared with the faster serial scan
            h = statistics.median(single)
            rows = merged[0].n

            def med(runs: list[FullScan], attr: str) -> float:
                return float(statistics.median(getattr(x, attr) for x in runs))

            one_process = med(serial, "cpu") / s
            machine = (med(serial, "cpu") + med(serial, "hbase_cpu")) / (os.cpu_count() or 1) / s
            in_procs_machine = (med(merged_p, "cpu") + med(merged_p, "workers_cpu") + med(merged_p, "hbase_cpu")
                                ) / (os.cpu_count() or 1) / s_best
            out["full_scan"] = {
                "rows": rows, "merged_s": round(m, 3), "serial_16_buckets_s": round(s, 3),
                "single_happybase_scanner_s": round(h, 3),
                "merged_over_serial": round(m / s, 3), "target_merged_over_serial": 0.6,
                "merged_in_processes_s": round(mp_s, 3),
                "serial_16_buckets_at_processes_page_size_s": round(sp_s, 3),
                "merged_in_processes_over_serial": round(mp_s / s_best, 3),
                "merged_in_processes_over_serial_note": (
                    "against the faster of the two serial scans (pages of page_size and of "
                    "processes_page_size rows)"),
                "processes": args.processes,
                "merged_in_processes_client_cpu_s": round(med(merged_p, "cpu"), 3),
                "merged_in_processes_workers_cpu_s": round(med(merged_p, "workers_cpu"), 3),
                "merged_in_processes_hbase_cpu_s": round(med(merged_p, "hbase_cpu"), 3),
                "merged_over_single_scanner": round(m / h, 3),
                "merged_row_iteration_s": round(statistics.median(x.wall for x in per_row), 3),
                "merged_rows_per_s": round(rows / m),
                "merged_client_cpu_s": round(med(merged, "cpu"), 3),
                "serial_client_cpu_s": round(med(serial, "cpu"), 3),
                "merged_hbase_cpu_s": round(med(merged, "hbase_cpu"), 3),
                "serial_hbase_cpu_s": round(med(serial, "hbase_cpu"), 3),
                "bounds": {"one_process_client": round(one_process, 3),
                           "machine_cpus": round(machine, 3),
                           "machine_cpus_in_processes": round(in_procs_machine, 3),
                           "merged_over_best_bound": round(m / s / max(one_process, machine), 3)},
                "merged_pages": merged[0].pages, "serial_pages": serial[0].pages,
                "all_runs_s": {"merged": [round(x.wall, 3) for x in merged],
                               "merged_in_processes": [round(x.wall, 3) for x in merged_p],
                               "merged_row_iteration": [round(x.wall, 3) for x in per_row],
                               "serial": [round(x.wall, 3) for x in serial],
                               "serial_at_processes_page_size": [round(x.wall, 3) for x in serial_p],
                               "single": [round(x, 3) for x in single]},
                "runs": args.full_reps,
            }
        finally:
            if not args.keep:
                await hb.delete_table(table)
                if by_time in await hb.tables():  # absent when a failure came before its load
                    await hb.delete_table(by_time)
    return out


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--page-size", type=int, default=None,
                        help=f"rows per page of the thread-mode reader and the serial scan (default {PAGE_SIZE})")
    parser.add_argument("--processes-page-size", type=int, default=None,
                        help=f"rows per page of the process-mode reader (default {PROCESS_PAGE_SIZE})")
    parser.add_argument("--read-ahead", type=int, default=1, help="pages buffered per range")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="pages fetched at once per query (default: the HBase pool size)")
    parser.add_argument("--processes", type=int, default=4,
                        help="worker processes of the process-mode merged scan (Reader(processes=N))")
    parser.add_argument("--reps", type=int, default=20, help="repetitions of each newest-100 query")
    parser.add_argument("--full-reps", type=int, default=5,
                        help="repetitions of each full scan (the order of the six scans rotates)")
    parser.add_argument("--by-time-reps", type=int, default=5,
                        help="repetitions of the newest 100 by time across every host")
    parser.add_argument("--time-range-reps", type=int, default=3,
                        help="repetitions of each time-range query (skip scan and plain scan alternate)")
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
