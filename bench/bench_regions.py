"""Throughput at 16, 256 and 1,000 regions: hbase-ingest batching per region server and per region,
against Apache Flink, in one run on one stack.

The peer benchmark's setup (:mod:`bench.bench_peer`): one topic of ``logs`` events, produced once;
per region count and run, in turn, Flink 1.19.3 (parallelism 2, flush 2,000 rows / 4 MB / 200 ms,
checkpoints every 5 s), hbase-ingest with ``batch_by = "server"`` (the default) and hbase-ingest
with ``batch_by = "region"``, each under a fresh consumer group into a fresh table pre-split into
that many regions: hbase-ingest's by ``tables create`` (the design's 16 salt buckets at 16 regions,
quantiles of sample events above), Flink's at quantiles of its own keys. Every table's rows are
counted afterwards; a run missing a row fails the benchmark.

Per region count: the medians (and ranges) of events/s from the first write to the last and from
process start, CPU-us per event of the process after its first write, and HBase CPU-us per row;
the ratios hbase-ingest (by server) / Flink and by server / by region. Results go to
bench/results/regions.json (``--out`` elsewhere, ``--no-save`` nowhere).

    python -m bench.bench_regions [--events 1000000] [--runs 2] [--regions 16,256,1000]
                                  [--batch-by server,region] [--out FILE | --no-save]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from devstack import HBASE_VERSION, KAFKA_VERSION
from pipeline.core.examples import generate
from pipeline.core.ingest.batcher import BatchBy

from .bench_peer import RESULTS, SPLIT_SAMPLE, PeerBench, arguments, machine, positive_ints, save
from .peer_flink import FLINK_VERSION
from .peer_flink import row_key as flink_row_key
from .peer_flume import split_keys
from .peer_procs import load_average
from .peer_provision import ensure_flink
from .peer_summary import figures, spread, spread_text

__all__ = ["label", "regions_table", "summarize_regions"]

#: the figures compared per region count
METRICS = ("events_per_s_first_to_last", "events_per_s_from_start",
           "process_cpu_us_per_event_after_first_write", "hbase_cpu_us_per_row")


def label(batch_by: BatchBy) -> str:
    """The system name of an hbase-ingest run batching ``batch_by``."""
    return f"hbase-ingest-by-{batch_by}"


def summarize_regions(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per region count (as a string) and system: median, min and max of :data:`METRICS`, and the
    ratios ``by_server_over_flink`` and ``by_server_over_by_region`` (median over median) where both
    ran. Raises ValueError for a run :func:`bench.peer_summary.figures` refuses."""
    grouped: dict[int, dict[str, list[dict[str, float]]]] = {}
    for run in runs:
        grouped.setdefault(int(run["regions"]), {}).setdefault(run["system"], []).append(figures(run))
    out: dict[str, Any] = {}
    for regions in sorted(grouped):
        systems = grouped[regions]
        entry: dict[str, Any] = {
            system: {k: spread([f[k] for f in figs]) for k in METRICS if all(k in f for f in figs)}
            | {"runs": len(figs)}
            for system, figs in systems.items()}
        server = entry.get(label("server"))
        for other, name in (("flink", "by_server_over_flink"), (label("region"), "by_server_over_by_region")):
            if server is not None and other in entry:
                entry[name] = {k: server[k]["median"] / entry[other][k]["median"]
                               for k in METRICS if k in server and k in entry[other] and entry[other][k]["median"]}
        out[str(regions)] = entry
    return out


def regions_table(summary: Mapping[str, Any], events: int, runs: int) -> str:
    """The Markdown table of ``docs/performance.md``: a row per region count, events/s (first write
    to last) of each system as median (min-max), and the two ratios."""
    def cell(entry: Mapping[str, Any], system: str) -> str:
        s = entry.get(system, {}).get("events_per_s_first_to_last")
        return "-" if s is None else spread_text(s, 0)

    def ratio(entry: Mapping[str, Any], name: str) -> str:
        r = entry.get(name, {}).get("events_per_s_first_to_last")
        return "-" if r is None else f"{r:.2f}"

    head = [f"{events:,} events, {runs} runs each: events/s first write to last", "Flink",
            "hbase-ingest, batch per server", "hbase-ingest, batch per region", "per server / Flink",
            "per server / per region"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for regions, entry in summary.items():
        lines.append("| " + " | ".join([f"{int(regions):,} regions", cell(entry, "flink"),
                                         cell(entry, label("server")), cell(entry, label("region")),
                                         ratio(entry, "by_server_over_flink"),
                                         ratio(entry, "by_server_over_by_region")]) + " |")
    return "\n".join(lines) + "\n"


def _modes(text: str) -> list[BatchBy]:
    modes = [v.strip() for v in text.split(",") if v.strip()]
    bad = [m for m in modes if m not in ("server", "region")]
    if not modes or bad:
        raise argparse.ArgumentTypeError(f"expected server and/or region separated by commas, got {text!r}")
    return modes  # type: ignore[return-value]


def main(args: argparse.Namespace) -> dict[str, Any]:
    bench = PeerBench(args)
    bench.check_stack()
    load_start = load_average()
    sample = [e for _, e in generate("logs", min(args.events, SPLIT_SAMPLE))]
    flink_keys = [flink_row_key(e) for e in sample]
    flink_cp = ensure_flink(bench.stack.layout)
    runs: list[dict[str, Any]] = []
    ok = False
    number = 0
    try:
        produced = bench.produce()
        print(f"produced {produced['events']:,} events of {produced['mean_event_bytes']} bytes "
              f"in {produced['produce_s']} s", flush=True)
        for regions in args.regions:
            flink_splits = split_keys(flink_keys, regions)
            for _ in range(args.runs):  # alternating, so that a stack slowing down weighs on every system
                steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                    ("flink", partial(bench.run_flink, number, flink_cp, flink_splits))]
                for i, by in enumerate(args.batch_by, start=1):
                    steps.append((label(by), partial(bench.run_ingest, number + i, regions, sample, by)))
                number += len(steps)
                for system, step in steps:
                    bench.record(step, f"{regions} regions", runs, system=system, regions=regions)
        ok = True
    finally:
        bench.finish(ok)
    summary = summarize_regions(runs)
    return {
        "events": produced["events"], "runs_each": args.runs, "partitions": args.partitions,
        "mean_event_bytes": produced["mean_event_bytes"], "regions": args.regions, "batch_by": args.batch_by,
        "versions": {"flink": FLINK_VERSION, "hbase": HBASE_VERSION, "kafka": KAFKA_VERSION,
                     "python": platform.python_version()},
        "machine": machine(load_start),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summary,
        "runs": runs,
        "table_markdown": regions_table(summary, produced["events"], args.runs),
    }


if __name__ == "__main__":
    p = arguments(__doc__ or "", 2, RESULTS / "regions.json")
    p.add_argument("--regions", type=positive_ints, default=[16, 256, 1000], help="region counts (default 16,256,1000)")
    p.add_argument("--batch-by", type=_modes, default=["server", "region"],
                   help="hbase-ingest's batch groups to run (default server,region)")
    ns = p.parse_args()
    if ns.events < max(ns.regions) or ns.runs < 1:
        p.error("--events must be at least the largest region count and --runs at least 1")
    save(main(ns), ns)
