"""bench.bench_gateway's pure parts: the gateways' commands and client settings, the summary without
the warm-up round, and its Markdown table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.bench_gateway import CONFIGS, gateway_table, summarize_gateway
from devstack.launch import gateway_argv
from devstack.layout import StackLayout


def ingest(config: str, rs_cpu_s: float, gateway_cpu_s: float, warmup: bool = False) -> dict[str, Any]:
    return {"system": "hbase-ingest", "config": config, "warmup": warmup, "rows": 1000, "first_rows": 0,
            "first_write_s": 1.0, "all_written_s": 2.0, "process_cpu_s": 2.0, "hbase_cpu_s": rs_cpu_s,
            "peak_rss_mb": 100, "process_cpu_writing_s": 0.01, "gateway_cpu_s": gateway_cpu_s}


def loader(rs_cpu_s: float, warmup: bool = False) -> dict[str, Any]:
    return {"system": "loader", "warmup": warmup, "rows": 1000, "seconds": 1.0, "hbase_cpu_s": rs_cpu_s}


def test_options_go_to_the_gateway_and_the_matching_settings_to_the_worker(tmp_path: Path) -> None:
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", tmp_path / "infra")
    argv = gateway_argv(layout, 512, 9300, 9301, CONFIGS["compact"].options, tmp_path / "launcher")
    assert argv[-6:] == ["HBaseStack", "gateway", "9300", "9301", "-c", "-f"] and "-Xmx512m" in argv
    plain = gateway_argv(layout, 512, 9300, 9301)
    assert plain[-3:] == ["gateway", "9300", "9301"] and plain[-4].endswith("HBaseStack.java")
    env = CONFIGS["hsha"].env(9300, 9301)
    assert env == {"HBASE_INGEST_HBASE__PORT": "9300", "HBASE_INGEST_HBASE__THRIFT2_PORT": "9301",
                   "HBASE_INGEST_HBASE__TRANSPORT": "framed", "HBASE_INGEST_HBASE__PROTOCOL": "binary"}
    assert CONFIGS["buffered"].options == () and CONFIGS["buffered"].transport == "buffered"
    assert CONFIGS["buffered"].env(1, 2, 500)["HBASE_INGEST_WRITER__MAX_BATCH_ROWS"] == "500"


def test_the_summary_leaves_out_the_warm_up_and_compares_with_the_loader() -> None:
    runs = [ingest("buffered", 0.05, 0.05, warmup=True), loader(0.05, warmup=True),
            ingest("buffered", 0.010, 0.005), ingest("framed", 0.010, 0.004), loader(0.010),
            ingest("buffered", 0.012, 0.007), ingest("framed", 0.010, 0.004), loader(0.012)]
    summary = summarize_gateway(runs)
    gateway = summary["buffered"]["gateway_cpu_us_per_row"]
    assert (gateway["median"], gateway["min"], gateway["max"]) == pytest.approx((6.0, 5.0, 7.0))
    assert summary["buffered"]["hbase_side_cpu_us_per_row"]["median"] == pytest.approx(17.0)
    assert summary["loader"]["region_server_cpu_us_per_row"]["median"] == pytest.approx(11.0)
    assert summary["buffered"]["over_loader"] == pytest.approx(17 / 11)
    assert summary["framed"]["over_loader"] == pytest.approx(14 / 11)
    assert summary["framed"]["worker_cpu_us_per_event"]["median"] == pytest.approx(10.0)
    table = gateway_table(summary, 1000, 2)
    assert table.splitlines()[0] == "| 1,000 events, 2 measured rounds | buffered | framed |"
    assert "| gateway JVM CPU-us per row | 6.0 (5.0-7.0) | 4.0 (4.0-4.0) |" in table
    assert "| loader's region server CPU-us per row: 11.0 (10.0-12.0) | 1.55 x | 1.27 x |" in table


def test_a_summary_needs_a_measured_loader_run_and_a_measured_ingest_run() -> None:
    with pytest.raises(ValueError, match="loader"):
        summarize_gateway([ingest("buffered", 0.01, 0.01), loader(0.01, warmup=True)])
    with pytest.raises(ValueError, match="hbase-ingest"):
        summarize_gateway([ingest("buffered", 0.01, 0.01, warmup=True), loader(0.01)])
