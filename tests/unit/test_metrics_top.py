"""``hbase-ingest top``: parsing the exposition text and drawing a frame (no server needed)."""

from __future__ import annotations

from rich.console import Console

from pipeline.cli.top import _metrics_url, parse_snapshot, render

TEXT = """\
# TYPE hbase_ingest_events_consumed counter
hbase_ingest_events_consumed_total{topic="orders",partition="0"} 600.0
hbase_ingest_events_consumed_total{topic="orders",partition="1"} 400.0
# TYPE hbase_ingest_rows_written counter
hbase_ingest_rows_written_total{table="ts_first"} 1000.0
# TYPE hbase_ingest_dead_lettered counter
hbase_ingest_dead_lettered_total{reason="undecodable"} 3.0
# TYPE hbase_ingest_committed_offset gauge
hbase_ingest_committed_offset{topic="orders",partition="0"} 600.0
hbase_ingest_committed_offset{topic="orders",partition="1"} 380.0
# TYPE hbase_ingest_log_end_offset gauge
hbase_ingest_log_end_offset{topic="orders",partition="0"} 600.0
hbase_ingest_log_end_offset{topic="orders",partition="1"} 400.0
# TYPE hbase_ingest_consumer_lag gauge
hbase_ingest_consumer_lag{topic="orders",partition="0"} 0.0
hbase_ingest_consumer_lag{topic="orders",partition="1"} 20.0
# TYPE hbase_ingest_region_window_rows gauge
hbase_ingest_region_window_rows{table="ts_first",region="r1",start_key=""} 0.0
hbase_ingest_region_window_rows{table="ts_first",region="r2",start_key="\\\\x00\\\\x00\\\\x01"} 0.0
hbase_ingest_region_window_rows{table="ts_first",region="r3",start_key="\\\\x00\\\\x00\\\\x02"} 1000.0
# TYPE hbase_ingest_region_skew gauge
hbase_ingest_region_skew{table="ts_first"} 3.0
# TYPE hbase_ingest_flush_seconds histogram
hbase_ingest_flush_seconds_count{table="ts_first",server="rs:1"} 10.0
hbase_ingest_flush_seconds_sum{table="ts_first",server="rs:1"} 0.05
# TYPE hbase_ingest_ready gauge
hbase_ingest_ready 1.0
"""


def test_parse_snapshot_reads_the_exporters_series() -> None:
    snap = parse_snapshot(TEXT, at_s=10.0)
    assert snap.consumed == 1000 and snap.rows == 1000 and snap.dead == {"undecodable": 3}
    assert snap.lag == {("orders", "0"): 0, ("orders", "1"): 20}
    assert snap.skew == {"ts_first": 3.0} and snap.ready == 1
    bars = snap.regions["ts_first"]
    assert [b.rows for b in bars] == [0, 0, 1000]
    assert bars[2].start_key == "\\x00\\x00\\x02"
    assert snap.flush_count == 10


def test_frame_shows_rates_lag_and_a_hot_region() -> None:
    prev = parse_snapshot(TEXT.replace("600.0\nhbase_ingest_events_consumed_total", "100.0\nx"), at_s=8.0)
    prev.consumed = 500
    cur = parse_snapshot(TEXT, at_s=10.0)
    console = Console(record=True, width=140, color_system=None)
    console.print(render(prev, cur, "http://h:1/metrics"))
    out = console.export_text()
    assert "events 1,000 (250/s)" in out
    assert "skew 3.00" in out and "100%" in out
    assert "█" * 40 in out  # the hot region's full bar
    assert "total" in out and "20" in out
    assert "mean flush 5.0 ms" in out


def test_first_frame_has_no_rates_and_urls_default_to_metrics() -> None:
    console = Console(record=True, width=140, color_system=None)
    console.print(render(None, parse_snapshot("", at_s=0.0)))
    assert "events 0 (-)" in console.export_text()
    assert _metrics_url("localhost:9108") == "http://localhost:9108/metrics"
    assert _metrics_url("http://h:1/") == "http://h:1/metrics"
    assert _metrics_url("http://h:1/custom") == "http://h:1/custom"


def test_a_backfill_frame_says_its_lag_is_to_the_log_end() -> None:
    text = TEXT + (
        '# TYPE hbase_ingest_backfill_remaining gauge\n'
        'hbase_ingest_backfill_remaining{topic="orders",partition="0"} 0.0\n'
        'hbase_ingest_backfill_remaining{topic="orders",partition="1"} 7.0\n'
    )
    console = Console(record=True, width=160, color_system=None)
    console.print(render(None, parse_snapshot(text, at_s=0.0)))
    out = console.export_text()
    assert "lag to log end" in out and "backfill left" in out
    console = Console(record=True, width=160, color_system=None)
    console.print(render(None, parse_snapshot(TEXT, at_s=0.0)))
    assert "lag to log end" not in console.export_text()
