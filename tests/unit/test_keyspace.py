"""pipeline.core.keyspace: figures checked against direct counts, and the guides' designs over a
uniform sample (salted and bucketed ones spread, time-first ones hotspot)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.keyspace import (
    analyze_keys,
    count_per_region,
    length_stats,
    percentile,
    recent_writes,
    recommend_buckets,
    region_index,
    sample_events,
)
from pipeline.errors import ConfigError
from pipeline.rowkey import compile_rowkey
from pipeline.runtime.admin.tables import build_sample_keys, default_regions, plan_splits

EVENTS = sample_events(4000, seed=11)

SALTED = [
    "[salt(host, 8)][long(ts)][host]",
    "[salt(host, metric, 16)][host][_][metric][long(ts)]",
    "[salt(32)][long(ts)][host]",
    "[salt(host, 4, phoenix)][host][long(ts)]",
    "[ts % 16][long(ts)][host]",
    "[mod(ts, 8)][long(ts)][host][_][metric]",
    "[md5(user_id, 1)][user_id][long(ts)]",
    "[md5(user_id, 2)][user_id][long(ts)]",
]
TIME_FIRST = [
    "[long(ts)][host][_][metric]",
    "[dec(ts, 13)][host]",
    "[olong(ts)][host]",
]
NEWEST_FIRST = "[Long.MAX_VALUE - ts][host]"


def direct_region(splits: list[bytes], key: bytes) -> int:
    """The region of ``key`` by a linear walk over the split keys (no bisect)."""
    i = 0
    while i < len(splits) and splits[i] <= key:
        i += 1
    return i


keys_st = st.lists(st.binary(min_size=0, max_size=6), max_size=200)
splits_st = st.lists(st.binary(min_size=1, max_size=4), max_size=12, unique=True).map(sorted)


@given(keys_st, splits_st)
def test_counts_match_a_direct_count(keys: list[bytes], splits: list[bytes]) -> None:
    counts = count_per_region(keys, splits)
    expected = Counter(direct_region(splits, k) for k in keys)
    assert counts == [expected.get(i, 0) for i in range(len(splits) + 1)]
    assert all(region_index(splits, k) == direct_region(splits, k) for k in keys)


@given(keys_st.filter(bool), splits_st, st.floats(0.01, 1.0))
def test_recent_writes_match_a_direct_count(keys: list[bytes], splits: list[bytes],
                                            fraction: float) -> None:
    times = [float((i * 7919) % 97) for i in range(len(keys))]  # times out of sample order
    rec = recent_writes(keys, splits, times, fraction)
    assert rec is not None
    order = sorted(range(len(keys)), key=lambda i: (times[i], i))
    window = max(1, math.ceil(fraction * len(keys)))
    recent, older = order[-window:], order[:-window]
    assert rec.window == window
    hot = direct_region(splits, max(keys))
    assert rec.max_key_region == hot
    assert rec.counts[hot] == sum(1 for i in recent if direct_region(splits, keys[i]) == hot)
    assert rec.share == rec.counts[hot] / window
    assert sum(rec.counts) == window
    if older:
        high = max(keys[i] for i in older)
        low = min(keys[i] for i in older)
        assert rec.beyond_share == sum(1 for i in recent if keys[i] > high) / window
        assert rec.before_share == sum(1 for i in recent if keys[i] < low) / window
    assert rec.busiest_share == max(rec.counts) / window == rec.counts[rec.busiest] / window


def test_report_figures() -> None:
    keys = [b"a", b"c", b"b", b"b", b"x" * 20, b"zz"]
    report = analyze_keys(keys, [b"b", b"y"], times=None, fraction=0.5)
    assert report.counts == (1, 4, 1)
    assert report.total == 6 and report.regions == 3
    assert report.mean == 2.0 and report.skew == 2.0
    assert report.busiest == 1 and report.busiest_share == 4 / 6
    assert report.empty_regions == 0
    assert report.bounds(0) == (b"", b"b") and report.bounds(2) == (b"y", b"")
    assert report.lengths.min == 1 and report.lengths.max == 20 and report.lengths.over_advice == 1
    rec = report.recent
    assert rec is not None and rec.window == 3  # the last three in sample order: b, x*20, zz
    assert rec.max_key_region == 2 and rec.counts == (0, 2, 1)
    assert rec.share == pytest.approx(1 / 3) and rec.busiest == 1
    assert rec.beyond_share == pytest.approx(2 / 3)  # x*20 and zz sort after a, c, b
    assert rec.before_share == 0.0


def test_empty_sample() -> None:
    report = analyze_keys([], [b"m"])
    assert report.counts == (0, 0) and report.skew == 0.0 and report.recent is None
    assert report.lengths.max == 0


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 21))
    assert percentile(values, 50) == 10
    assert percentile(values, 95) == 19
    assert percentile(values, 100) == 20
    assert percentile(values, 0) == 1
    stats = length_stats([b"x" * n for n in values])
    assert (stats.min, stats.p50, stats.p95, stats.max) == (1, 10, 19, 20)
    assert stats.over_advice == 4  # 17..20 bytes


@pytest.mark.parametrize(("regions", "servers", "cap", "expected"), [
    (1, 1, 64, 4), (5, 1, 64, 8), (8, 3, 64, 8), (8, 20, 64, 32), (300, 1, 64, 64),
    (300, 1, 100, 64), (300, 1, 256, 256), (16, 1, 8, 8), (3, 1, 1, 1)])
def test_recommend_buckets(regions: int, servers: int, cap: int, expected: int) -> None:
    assert recommend_buckets(regions, servers, cap) == expected


def test_sample_events_are_deterministic_and_time_ordered() -> None:
    a, b = sample_events(500, seed=3), sample_events(500, seed=3)
    assert a == b and a != sample_events(500, seed=4)
    assert all(x["ts"] <= y["ts"] for x, y in itertools.pairwise(a))
    assert {"ts", "host", "metric", "user_id", "value"} <= set(a[0])


@pytest.mark.parametrize("spec", SALTED)
def test_salted_designs_fill_every_region(spec: str) -> None:
    rowkey = compile_rowkey(spec)
    sample = build_sample_keys(rowkey, EVENTS)
    assert len(sample.keys) == len(EVENTS) and not sample.skipped
    n = default_regions(rowkey)
    assert n == min(rowkey.fanout_size, 256) > 1
    splits, method = plan_splits(rowkey, n)
    assert method == "design" and len(splits) == n - 1
    report = analyze_keys(sample.keys, splits, sample.times)
    assert report.empty_regions == 0, report.counts
    # hashing a few hundred series (or ~16 keys per region for md5 2-char) leaves some variance
    assert report.skew < (2.0 if report.mean >= 100 else 3.0)
    rec = report.recent
    assert rec is not None and rec.beyond_share < 0.5
    assert rec.busiest_share < 0.5


@pytest.mark.parametrize("spec", TIME_FIRST)
def test_time_first_designs_show_the_hotspot(spec: str) -> None:
    rowkey = compile_rowkey(spec)
    sample = build_sample_keys(rowkey, EVENTS, "ts")
    assert default_regions(rowkey) == 1
    splits, method = plan_splits(rowkey, 8, sample.keys)
    assert method == "sample"
    report = analyze_keys(sample.keys, splits, sample.times)
    # quantile splits spread the *past* evenly...
    assert report.skew < 1.5
    # ...but the newest writes all go to the region holding the largest key
    rec = report.recent
    assert rec is not None
    assert rec.share == 1.0 and rec.regions_touched == 1
    assert rec.beyond_share > 0.9


def test_newest_first_design_hotspots_the_first_region() -> None:
    rowkey = compile_rowkey(NEWEST_FIRST)
    sample = build_sample_keys(rowkey, EVENTS, "ts")
    splits, _ = plan_splits(rowkey, 8, sample.keys)
    rec = analyze_keys(sample.keys, splits, sample.times).recent
    assert rec is not None
    assert rec.busiest == 0 and rec.busiest_share == 1.0 and rec.before_share > 0.9
    assert rec.share == 0.0  # the largest key is the oldest event's


def test_unsalted_design_without_sample_cannot_split() -> None:
    from pipeline.rowkey import PlanError

    rowkey = compile_rowkey("[long(ts)][host]")
    with pytest.raises(PlanError):
        plan_splits(rowkey, 4)
    assert plan_splits(rowkey, 1) == ([], "none")


def test_analyze_command_prints_the_figures_and_plots(tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from pipeline.cli.analyze import register_analyze, run_analysis

    sample = tmp_path / "events.jsonl"
    sample.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in EVENTS) + b"\n{}\n")
    app = typer.Typer()
    app.callback()(lambda: None)
    register_analyze(app)
    args = ["analyze", "--rowkey", "[long(ts)][host]", "--sample", str(sample), "--regions", "4"]
    plot = tmp_path / "out.png"  # matplotlib is part of the dev extras, so the plot is always tested
    args += ["--plot", str(plot)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "events skipped (missing_field 1)" in result.output
    assert "100.0% of the most recent writes land in one region" in result.output
    assert "HOTSPOT" in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    salted = run_analysis("[ts % 4][long(ts)][host]", EVENTS, servers=6)
    assert salted.report.regions == 4 and salted.recommended == 8
    assert salted.report.counts == tuple(
        sum(1 for e in EVENTS if e["ts"] % 4 == i) for i in range(4))  # a direct count
    with pytest.raises(ConfigError, match="missing_field"):
        run_analysis("[nope][long(ts)]", EVENTS)
