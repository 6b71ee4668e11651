"""Figures of the peer benchmark from its runs (pure): per-run rates and CPU per event, medians with
their ranges per system, the hbase-ingest/peer ratios, and the Markdown table of
``docs/performance.md``.

A run is a dict as :mod:`bench.bench_peer` records it: ``system`` ("flink", "flume" or
"hbase-ingest"), ``rows``, ``first_rows`` (rows already acknowledged when the first write was seen),
``first_write_s``, ``all_written_s`` (from process start), ``process_cpu_s``, ``hbase_cpu_s``,
``peak_rss_mb``; optionally ``process_cpu_writing_s`` (the process's CPU from its first write to all
written: gives the CPU per event after the first write and the seconds to the first write) and
``offsets_committed_s`` (from process start until the group's committed offsets reached the
topic's end). A loader run has ``system`` "loader", ``rows``, ``seconds`` and ``hbase_cpu_s``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PEERS", "PIPELINES", "figures", "main_peer", "markdown_table", "spread", "spread_text", "summarize"]

#: the peers hbase-ingest is compared with, the main one (the table's first column) first
PEERS = ("flink", "flume")
PIPELINES = (*PEERS, "hbase-ingest")
_NAMES = {"flink": "Flink", "flume": "Flume"}
#: metric -> label in the table; the last three only for runs that record their inputs
_METRICS = {
    "events_per_s_first_to_last": "events/s, first write to last",
    "events_per_s_from_start": "events/s, process start to all written",
    "process_cpu_us_per_event": "process CPU-us per event",
    "process_cpu_us_per_event_after_first_write": "process CPU-us per event after the first write",
    "hbase_cpu_us_per_row": "HBase JVM CPU-us per row",
    "peak_rss_mb": "peak RSS, MB",
    "seconds_to_first_write": "seconds to first write",
    "seconds_to_offsets_committed": "seconds until offsets committed to the end",
}


def figures(run: Mapping[str, Any]) -> dict[str, float]:
    """The figures of one pipeline or loader run (the optional ones when the run records their
    inputs, see the module docstring). Raises ValueError on a run whose times do not allow a rate
    (last write not after the first, or no rows)."""
    rows = int(run["rows"])
    if rows <= 0:
        raise ValueError(f"a {run['system']} run with {rows} rows has no figures")
    hbase_us = run["hbase_cpu_s"] * 1e6 / rows
    if run["system"] == "loader":
        return {"rows_per_s": rows / run["seconds"], "hbase_cpu_us_per_row": hbase_us}
    span = run["all_written_s"] - run["first_write_s"]
    if span <= 0:
        raise ValueError(f"a {run['system']} run whose last write is not after its first ({span:.3f} s)")
    out = {
        "events_per_s_first_to_last": (rows - run["first_rows"]) / span,
        "events_per_s_from_start": rows / run["all_written_s"],
        "process_cpu_us_per_event": run["process_cpu_s"] * 1e6 / rows,
        "hbase_cpu_us_per_row": hbase_us,
        "peak_rss_mb": float(run["peak_rss_mb"]),
    }
    if "process_cpu_writing_s" in run:
        # the rows written after the first sighting, as for the first-to-last rate
        after = rows - run["first_rows"]
        out["process_cpu_us_per_event_after_first_write"] = run["process_cpu_writing_s"] * 1e6 / after
        out["seconds_to_first_write"] = float(run["first_write_s"])
    if "offsets_committed_s" in run:
        out["seconds_to_offsets_committed"] = float(run["offsets_committed_s"])
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    """The median, min and max of ``values`` (not empty)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per system and figure: median, min and max over its runs (the figures every run of that
    system has); and ``ratio_hbase_ingest_over_<peer>`` (median over median) for each peer of
    :data:`PEERS` that ran and each figure both have (left out where the peer's median is 0).
    Raises ValueError when hbase-ingest or every peer has no run."""
    by_system: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        by_system.setdefault(run["system"], []).append(figures(run))
    if "hbase-ingest" not in by_system:
        raise ValueError("no runs of hbase-ingest: the comparison needs it and a peer")
    if not any(p in by_system for p in PEERS):
        raise ValueError(f"no runs of {' or '.join(PEERS)}: the comparison needs hbase-ingest and a peer")
    out: dict[str, Any] = {}
    for system, figs in by_system.items():
        keys = [k for k in figs[0] if all(k in f for f in figs)]
        out[system] = {k: spread([f[k] for f in figs]) for k in keys} | {"runs": len(figs)}
    ours = out["hbase-ingest"]
    for peer in (p for p in PEERS if p in out):
        theirs = out[peer]
        out[f"ratio_hbase_ingest_over_{peer.replace('-', '_')}"] = {
            k: ours[k]["median"] / theirs[k]["median"] for k in _METRICS
            if k in ours and k in theirs and theirs[k]["median"] != 0}
    return out


def main_peer(summary: Mapping[str, Any]) -> str:
    """The peer the table compares against: the first of :data:`PEERS` in ``summary``. Raises
    ValueError when none is."""
    for peer in PEERS:
        if peer in summary:
            return peer
    raise ValueError(f"the summary has none of {', '.join(PEERS)}")


def spread_text(s: Mapping[str, float], digits: int) -> str:
    """A :func:`spread` as "median (min-max)", with ``digits`` decimals and thousands separators."""
    def fmt(v: float) -> str:
        return f"{v:,.{digits}f}"
    return f"{fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})"


def markdown_table(summary: Mapping[str, Any], events: int, runs: int) -> str:
    """The comparison as a Markdown table: median (min-max) of the main peer (:func:`main_peer`),
    of hbase-ingest, their ratio, then a column per other peer that ran, and the loader's rows/s
    and HBase CPU per row (its column is empty when it did not run). A row per figure the main
    peer and hbase-ingest both have."""
    main = main_peer(summary)
    others = [p for p in PEERS if p != main and p in summary]
    ratio = summary[f"ratio_hbase_ingest_over_{main}"]
    loader = summary.get("loader", {})
    loader_cell = {"events_per_s_first_to_last": "rows_per_s", "hbase_cpu_us_per_row": "hbase_cpu_us_per_row"}
    name = _NAMES[main]
    head = [f"{events:,} events, {runs} runs each", name, "hbase-ingest", f"hbase-ingest / {name}",
            *(_NAMES[p] for p in others), "BufferedMutator loader"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, label in _METRICS.items():
        if key not in summary[main] or key not in summary["hbase-ingest"]:
            continue
        digits = 0 if summary[main][key]["median"] >= 100 else 1
        lo = loader.get(loader_cell.get(key, ""))
        cells = [label, spread_text(summary[main][key], digits), spread_text(summary["hbase-ingest"][key], digits),
                 f"{ratio[key]:.2f}" if key in ratio else "-",
                 *(spread_text(summary[p][key], digits) if key in summary[p] else "-" for p in others),
                 spread_text(lo, digits) if lo else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
