"""bench.bench_regions' pure parts: the per-region-count summary and its Markdown table."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_regions import label, regions_table, summarize_regions


def run(system: str, regions: int, rows: int, span_s: float) -> dict[str, Any]:
    return {"system": system, "regions": regions, "rows": rows, "first_rows": 0, "first_write_s": 1.0,
            "all_written_s": 1.0 + span_s, "process_cpu_s": 2.0, "hbase_cpu_s": 1.0, "peak_rss_mb": 100,
            "process_cpu_writing_s": 1.0}


def test_summary_per_region_count_with_the_two_ratios() -> None:
    runs = [run("flink", 16, 1000, 1.0), run("flink", 16, 1000, 2.0), run(label("server"), 16, 1000, 0.5),
            run(label("region"), 16, 1000, 0.5), run("flink", 1000, 1000, 2.0), run(label("server"), 1000, 1000, 0.5),
            run(label("region"), 1000, 1000, 2.0)]
    summary = summarize_regions(runs)
    assert list(summary) == ["16", "1000"]
    flink16 = summary["16"]["flink"]["events_per_s_first_to_last"]
    assert (flink16["median"], flink16["min"], flink16["max"]) == (750.0, 500.0, 1000.0)
    assert summary["16"]["by_server_over_flink"]["events_per_s_first_to_last"] == pytest.approx(2000 / 750)
    assert summary["1000"]["by_server_over_by_region"]["events_per_s_first_to_last"] == pytest.approx(4.0)
    table = regions_table(summary, 1000, 2)
    assert "| 16 regions | 750 (500-1,000) | 2,000 (2,000-2,000) | 2,000 (2,000-2,000) | 2.67 | 1.00 |" in table
    assert "| 1,000 regions | 500 (500-500) | 2,000 (2,000-2,000) | 500 (500-500) | 4.00 | 4.00 |" in table


def test_a_region_count_without_a_system_shows_a_dash() -> None:
    summary = summarize_regions([run(label("server"), 16, 1000, 1.0)])
    assert "by_server_over_flink" not in summary["16"]
    assert "| 16 regions | - | 1,000 (1,000-1,000) | - | - | - |" in regions_table(summary, 1000, 1)
