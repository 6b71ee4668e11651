"""Figures of the peer benchmark from its runs (pure): per-run rates and CPU per event, medians with
their ranges per system, the hbase-ingest/Flume ratios, and the Markdown table of
``docs/performance.md``.

A run is a dict as :mod:`bench.bench_peer` records it: ``system`` ("flume" or "hbase-ingest"),
``rows``, ``first_rows`` (rows already acknowledged when the first write was seen),
``first_write_s``, ``all_written_s`` (from process start), ``process_cpu_s``, ``hbase_cpu_s``,
``peak_rss_mb``; a loader run has ``system`` "loader", ``rows``, ``seconds`` and ``hbase_cpu_s``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PIPELINES", "figures", "markdown_table", "summarize"]

PIPELINES = ("flume", "hbase-ingest")
#: metric -> (label in the table, unit formatting)
_METRICS = {
    "events_per_s_first_to_last": "events/s, first write to last",
    "events_per_s_from_start": "events/s, process start to all written",
    "process_cpu_us_per_event": "process CPU-us per event",
    "hbase_cpu_us_per_row": "HBase JVM CPU-us per row",
    "peak_rss_mb": "peak RSS, MB",
}


def figures(run: Mapping[str, Any]) -> dict[str, float]:
    """The figures of one pipeline or loader run. Raises ValueError on a run whose times do not
    allow a rate (last write not after the first, or no rows)."""
    rows = int(run["rows"])
    if rows <= 0:
        raise ValueError(f"a {run['system']} run with {rows} rows has no figures")
    hbase_us = run["hbase_cpu_s"] * 1e6 / rows
    if run["system"] == "loader":
        return {"rows_per_s": rows / run["seconds"], "hbase_cpu_us_per_row": hbase_us}
    span = run["all_written_s"] - run["first_write_s"]
    if span <= 0:
        raise ValueError(f"a {run['system']} run whose last write is not after its first ({span:.3f} s)")
    return {
        "events_per_s_first_to_last": (rows - run["first_rows"]) / span,
        "events_per_s_from_start": rows / run["all_written_s"],
        "process_cpu_us_per_event": run["process_cpu_s"] * 1e6 / rows,
        "hbase_cpu_us_per_row": hbase_us,
        "peak_rss_mb": float(run["peak_rss_mb"]),
    }


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per system and figure: median, min and max over its runs; and ``ratio_hbase_ingest_over_flume``
    (median over median) for each pipeline figure. Raises ValueError when a pipeline has no run."""
    by_system: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        by_system.setdefault(run["system"], []).append(figures(run))
    missing = [s for s in PIPELINES if s not in by_system]
    if missing:
        raise ValueError(f"no runs of {', '.join(missing)}: the comparison needs both pipelines")
    out: dict[str, Any] = {}
    for system, figs in by_system.items():
        out[system] = {k: _stats([f[k] for f in figs]) for k in figs[0]} | {"runs": len(figs)}
    out["ratio_hbase_ingest_over_flume"] = {
        k: out["hbase-ingest"][k]["median"] / out["flume"][k]["median"] for k in _METRICS}
    return out


def _range(s: Mapping[str, float], digits: int) -> str:
    def fmt(v: float) -> str:
        return f"{v:,.{digits}f}"
    return f"{fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})"


def markdown_table(summary: Mapping[str, Any], events: int, runs: int) -> str:
    """The comparison as a Markdown table: median (min-max) per system, the ratio column, and the
    loader's rows/s and HBase CPU per row (its column is empty when it did not run)."""
    loader = summary.get("loader", {})
    loader_cell = {"events_per_s_first_to_last": "rows_per_s", "hbase_cpu_us_per_row": "hbase_cpu_us_per_row"}
    lines = [f"| {events:,} events, {runs} runs each | Flume | hbase-ingest | hbase-ingest / Flume "
             "| BufferedMutator loader |",
             "| --- | --- | --- | --- | --- |"]
    for key, label in _METRICS.items():
        digits = 0 if summary["flume"][key]["median"] >= 100 else 1
        lo = loader.get(loader_cell.get(key, ""))
        lines.append(f"| {label} | {_range(summary['flume'][key], digits)} | "
                     f"{_range(summary['hbase-ingest'][key], digits)} | "
                     f"{summary['ratio_hbase_ingest_over_flume'][key]:.2f} | "
                     f"{_range(lo, digits) if lo else '-'} |")
    return "\n".join(lines) + "\n"
