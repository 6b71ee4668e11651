"""Scan planning, fan-out, sort keys, split points, explain and warnings."""

from __future__ import annotations

import pytest

from pipeline.rowkey import KeyRange, PlanError, compile_rowkey
from pipeline.rowkey.explain import design_warnings, explain
from pipeline.rowkey.splits import split_points

SALTED = "[salt(user_id, 16)][user_id][_][long(ts)]"


def test_salted_full_scan_fans_out_one_range_per_bucket() -> None:
    plan = compile_rowkey(SALTED).plan()
    assert [r.label for r in plan.ranges] == [f"salt={i}" for i in range(16)]
    assert plan.ranges[0] == KeyRange(b"\x00", b"\x01", "salt=0")
    assert plan.ranges[-1] == KeyRange(b"\x0f", b"\x10", "salt=15")
    assert plan.fans_out and plan.exact and not plan.per_region
    assert "sort_key" in plan.order


def test_salt_computable_from_the_query_gives_one_range() -> None:
    rk = compile_rowkey(SALTED)
    plan = rk.plan({"user_id": "u1"})
    key = rk.build({"user_id": "u1", "ts": 3})
    assert len(plan.ranges) == 1 and not plan.fans_out and plan.exact
    assert plan.ranges[0].start == key[:4] and plan.matches(key)
    assert not plan.matches(rk.build({"user_id": "u2", "ts": 3}))


def test_point_read() -> None:
    rk = compile_rowkey(SALTED)
    key = rk.build({"user_id": "u1", "ts": 3})
    plan = rk.plan({"user_id": "u1", "ts": 3})
    assert plan.ranges == [KeyRange(key, key + b"\x00", "point")] and plan.exact


def test_time_range_inside_a_prefix_is_exact() -> None:
    rk = compile_rowkey(SALTED)
    plan = rk.plan({"user_id": "u"}, time_range=(100, 200))
    inside = [rk.build({"user_id": "u", "ts": t}) for t in (100, 150, 199)]
    outside = [rk.build({"user_id": "u", "ts": t}) for t in (99, 200, -5)]
    assert plan.exact and len(plan.ranges) == 1
    assert all(k in plan.ranges[0] and plan.matches(k) for k in inside)
    assert not any(k in plan.ranges[0] or plan.matches(k) for k in outside)


def test_time_range_over_salt_fans_out_and_filters() -> None:
    rk = compile_rowkey(SALTED)
    plan = rk.plan(time_range=(100, 200))
    assert len(plan.ranges) == 16 and not plan.exact
    assert plan.matches(rk.build({"user_id": "z", "ts": 150}))
    assert not plan.matches(rk.build({"user_id": "z", "ts": 250}))


def test_newest_first_time_range_with_reverse_ts() -> None:
    rk = compile_rowkey("[host][_][reverse_ts(ts)]")
    plan = rk.plan({"host": "h"}, time_range=(10, 20))
    (r,) = plan.ranges
    assert r.start == rk.build({"host": "h", "ts": 19})
    assert r.stop == rk.build({"host": "h", "ts": 9})
    assert plan.exact and "newest first" in plan.order


def test_time_range_with_where_on_time_field() -> None:
    rk = compile_rowkey(SALTED)
    assert rk.plan({"user_id": "u", "ts": 5}, time_range=(0, 4)).ranges == []
    assert len(rk.plan({"user_id": "u", "ts": 5}, time_range=(0, 9)).ranges) == 1
    assert rk.plan(time_range=(9, 9)).ranges == []


def test_md5_prefix_fan_out_is_not_enumerated() -> None:
    rk = compile_rowkey("[md5(user_id, 4)][user_id][_][long(ts)]")
    assert rk.fanout_size == 65536 and rk.fanout is not None and len(rk.fanout) == 65536
    plan = rk.plan(time_range=(0, 10))
    assert plan.per_region and plan.too_many and not plan.exact and len(plan.ranges) <= 1
    assert plan.matches(rk.build({"user_id": "a", "ts": 5}))
    assert not plan.matches(rk.build({"user_id": "a", "ts": 50}))
    small = rk.plan(time_range=(0, 10), max_ranges=1 << 17)
    assert len(small.ranges) == 65536 and not small.per_region


def test_md5_prefix_computable_gives_one_range() -> None:
    rk = compile_rowkey("[md5(user_id, 4)][user_id][_][order_id]")
    plan = rk.plan({"user_id": "abc001"})
    assert plan.ranges == [KeyRange(b"9bf0abc001_", b"9bf0abc001`", "prefix")]


def test_non_leading_field_is_filtered() -> None:
    rk = compile_rowkey("[a][_][b]")
    plan = rk.plan({"b": "y"})
    assert not plan.exact and plan.ranges == [KeyRange(b"", b"", "all")]
    assert plan.matches(b"x_y") and not plan.matches(b"x_z")


def test_hashed_only_field_cannot_be_filtered() -> None:
    rk = compile_rowkey("[salt(host, 8)][metric][_][reverse_ts(ts)]")
    with pytest.raises(PlanError, match="cannot filter"):
        rk.plan({"host": "h"})


def test_unknown_field_and_missing_time_field() -> None:
    rk = compile_rowkey("[a][_][long(n)]")
    with pytest.raises(PlanError, match="unknown field"):
        rk.plan({"zz": 1})
    with pytest.raises(PlanError, match="time_field"):
        rk.plan(time_range=(0, 1))
    plan = rk.plan(time_range=(0, 1), time_field="n")
    assert plan.matches(rk.build({"a": "q", "n": 0}))


def test_time_bucket_design_fans_out_over_buckets() -> None:
    rk = compile_rowkey("[time_bucket(ts, 15m)][host][_][metric]")
    plan = rk.plan({"host": "h1"}, time_range=(0, 3_600_000))
    assert [r.label for r in plan.ranges] == [f"bucket={i}" for i in range(4)]
    assert plan.exact
    unaligned = rk.plan({"host": "h1"}, time_range=(1, 3_600_000))
    assert not unaligned.exact


def test_mod_of_time_with_short_range_only_scans_needed_buckets() -> None:
    rk = compile_rowkey("[mod(ts, 16)][long(ts)][host]")
    plan = rk.plan(time_range=(32, 35))
    assert [r.label for r in plan.ranges] == ["mod=0", "mod=1", "mod=2"] and plan.exact


def test_random_prefix_fans_out() -> None:
    rk = compile_rowkey("[random(4)][user][_][long(ts)]")
    plan = rk.plan({"user": "u"})
    assert len(plan.ranges) == 4 and plan.exact
    assert rk.fanout == [b"\x00", b"\x01", b"\x02", b"\x03"]


def test_value_with_delimiter_cannot_be_planned() -> None:
    with pytest.raises(PlanError, match="delimiter"):
        compile_rowkey("[a][_][b]").plan({"a": "x_y"})


def test_sort_key_drops_leading_distribution() -> None:
    rk = compile_rowkey("[salt(u, 16)][-][u][_][long(ts)]")
    key = rk.build({"u": "a", "ts": 1})
    assert rk.sort_key(key) == key[1:]
    assert compile_rowkey("[u]").sort_key(b"abc") == b"abc"
    assert compile_rowkey("[u]").fanout is None and compile_rowkey("[u]").fanout_size == 1


def test_fanout_values() -> None:
    assert compile_rowkey(SALTED).fanout == [bytes([i]) for i in range(16)]
    assert compile_rowkey("[mod(n, 3, text)][_][x]").fanout == [b"0", b"1", b"2"]


@pytest.mark.parametrize(
    ("spec", "n", "expected"),
    [
        (SALTED, 16, [bytes([i]) for i in range(1, 16)]),
        (SALTED, 4, [b"\x04", b"\x08", b"\x0c"]),
        ("[salt(u, 10)][u]", 3, [b"\x03", b"\x07"]),
        ("[mod(ts, 256)][long(ts)]", 2, [b"\x80"]),
        ("[mod(ts, 100, text)][long(ts)]", 4, [b"25", b"50", b"75"]),
        ("[md5(u, 2)][u]", 4, [b"4", b"8", b"c"]),
        ("[md5(u, 4)][u]", 1, []),
    ],
)
def test_split_points(spec: str, n: int, expected: list[bytes]) -> None:
    assert split_points(compile_rowkey(spec), n) == expected


def test_split_points_need_a_sample_without_leading_distribution() -> None:
    rk = compile_rowkey("[host][_][long(ts)]")
    with pytest.raises(PlanError, match="a sample"):
        split_points(rk, 4)
    sample = [rk.build({"host": f"h{i:02d}", "ts": 1}) for i in range(100)]
    points = split_points(rk, 4, sample_keys=sample)
    assert [p[:3] for p in points] == [b"h25", b"h50", b"h75"]
    with pytest.raises(PlanError):
        split_points(compile_rowkey(SALTED), 32)
    assert len(split_points(compile_rowkey(SALTED), 32, sample_keys=sample)) == 31


def test_explain_and_warnings() -> None:
    rk = compile_rowkey("[long(ts)][host][metric]")
    text = explain(rk)
    assert "long(ts)" in text and "var" in text and "warnings:" in text
    warnings = design_warnings(rk)
    assert any(w.startswith("hotspot") for w in warnings)
    assert any(w.startswith("ambiguous") and "rpad" in w for w in warnings)
    assert any("no point reads" in w for w in design_warnings(compile_rowkey("[a][_][random(9)]")))
    assert any("100 bytes" in w for w in design_warnings(compile_rowkey("[rpad(a, 'x', 120)]")))
    assert any("16 bytes" in w for w in design_warnings(compile_rowkey("[rpad(a, 'x', 20)]")))
    assert design_warnings(compile_rowkey("[salt(h, 8)][h][_][reverse_ts(ts)]")) == []
    assert design_warnings(compile_rowkey("[salt(h, 100)][h]")) == [
        "salt(h, 100): 100 buckets mean 100 scans per range read; 4 to 64 buckets is the usual range"]
    assert design_warnings(compile_rowkey("[md5(h, 4)][h]"))[-1] == (
        "md5(h, 4): 65536 possible prefixes; reads that cannot compute the hash scan region by region "
        "with a filter")
    assert not any("possible prefixes" in w for w in design_warnings(compile_rowkey("[md5(h, 2)][h]")))
    good = explain(compile_rowkey(SALTED))
    assert "fan-out over 16 ranges" in good and "single prefix scan" in good
    assert "point get" in good
