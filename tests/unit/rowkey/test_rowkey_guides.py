"""The worked examples of the HBase rowkey design guides, one test each."""

from __future__ import annotations

import hashlib
import random
import struct

import pytest

from pipeline.rowkey import PlanError, compile_rowkey, format_key
from pipeline.rowkey.explain import design_warnings
from pipeline.rowkey.splits import split_points

JAVA_LONG_MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    ("user", "prefix"), [("abc001", b"9bf0"), ("abc002", b"7006"), ("abc003", b"95e6")]
)
@pytest.mark.parametrize(
    "spec",
    ["[md5(user_id, 4)][user_id][order_id]", "[md5(user_id).subStr(0, 4)][user_id][order_id]"],
)
def test_md5_hex_prefix_matches_the_guide(spec: str, user: str, prefix: bytes) -> None:
    key = compile_rowkey(spec).build({"user_id": user, "order_id": "o1"})
    assert key == prefix + user.encode() + b"o1"


def test_md5_full_digest_of_abc001() -> None:
    rk = compile_rowkey("[md5(user_id)][-][user_id]")
    assert rk.build({"user_id": "abc001"}) == b"9bf049097142c168c38a94c626eddf3d-abc001"


def test_four_char_md5_prefixes_spread_the_guide_rows_over_three_regions() -> None:
    rk = compile_rowkey("[md5(user_id, 4)][-][user_id]")
    keys = [rk.build({"user_id": u}) for u in ("abc001", "abc002", "abc003")]
    assert [format_key(k) for k in keys] == ["9bf0-abc001", "7006-abc002", "95e6-abc003"]


def test_reverse_phone_number() -> None:
    rk = compile_rowkey("[reverse(phone)][_][order_id]")
    assert rk.build({"phone": "13712345678", "order_id": "1"}) == b"87654321731_1"
    assert rk.decode(b"87654321731_1") == {"phone": "13712345678", "order_id": "1"}


def test_random_suffix_uses_the_injected_rng() -> None:
    rk = compile_rowkey("[user_id][_][order_id][_][random(100)]")
    a = rk.build({"user_id": "u", "order_id": "o"}, rng=random.Random(3))
    b = rk.build({"user_id": "u", "order_id": "o"}, rng=random.Random(3))
    assert a == b and a[:4] == b"u_o_" and a[4] < 100 and len(a) == 5
    assert not rk.point_readable


def test_random_text_rendering_and_compile_time_rng() -> None:
    rk = compile_rowkey("[user_id][_][random(100, text)]", rng=random.Random(5))
    expected = b"u_%02d" % random.Random(5).randrange(100)
    assert rk.build({"user_id": "u"}) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "[mod(timestamp, 16)][long(timestamp)][hostname][_][log_event]",
        "[timestamp % 16][long(timestamp)][hostname][_][log_event]",
    ],
)
def test_mod_bucket_design(spec: str) -> None:
    rk = compile_rowkey(spec)
    ts = 1_700_000_000_003
    key = rk.build({"timestamp": ts, "hostname": "h1", "log_event": "login"})
    assert key[0] == ts % 16
    assert key[1:9] == struct.pack(">q", ts)
    assert key[9:] == b"h1_login"
    assert rk.fanout_size == 16
    plan = rk.plan(time_range=(ts, ts + 1000))
    assert len(plan.ranges) == 16 and plan.fans_out and plan.exact


@pytest.mark.parametrize(
    "spec",
    [
        "[hostname][_][log_event][_][reverse_ts(timestamp)]",
        "[hostname][_][log_event][_][Long.MAX_VALUE - timestamp]",
    ],
)
def test_reverse_timestamp_gives_newest_first(spec: str) -> None:
    rk = compile_rowkey(spec)
    keys = [rk.build({"hostname": "h", "log_event": "e", "timestamp": t}) for t in (10, 30, 20)]
    assert [rk.decode(k)["timestamp"] for k in sorted(keys)] == [30, 20, 10]


def test_reverse_timestamp_is_java_bytes_to_bytes_of_max_minus_ts() -> None:
    rk = compile_rowkey("[reverse_ts(ts)]")
    key = rk.build({"ts": 1000})
    # Bytes.toBytes(Long.MAX_VALUE - 1000) == {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfc, 0x17}
    assert key == bytes([0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFC, 0x17])
    assert key == struct.pack(">q", JAVA_LONG_MAX - 1000)


def test_reverse_timestamp_text_form() -> None:
    rk = compile_rowkey("[reverse_ts(ts, text)]")
    assert rk.build({"ts": 1000}) == b"9223372036854774807"
    assert len(rk.build({"ts": 0})) == 19


def test_guide_host1_host12_scan_problem_is_refused_and_fixed_by_padding_or_delimiter() -> None:
    bare = compile_rowkey("[column1][column2][column3]")
    with pytest.raises(PlanError, match="host12"):
        bare.plan({"column1": "host1"})
    for spec in ("[rpad(column1, 'x', 20)][column2]", "[column1][_][column2]"):
        rk = compile_rowkey(spec)
        plan = rk.plan({"column1": "host1"})
        assert len(plan.ranges) == 1 and plan.exact
        host1 = rk.build({"column1": "host1", "column2": "a"})
        host12 = rk.build({"column1": "host12", "column2": "a"})
        assert plan.matches(host1) and host1 in plan.ranges[0]
        assert not plan.matches(host12) and host12 not in plan.ranges[0]


def test_rpad_layout_of_the_guide() -> None:
    rk = compile_rowkey("[rpad(column1, 'x', 20)][column2]")
    assert rk.build({"column1": "host1", "column2": "c"}) == b"host1" + b"x" * 15 + b"c"


def test_metric_row_key_of_the_guide() -> None:
    # metricRowKey: combine(hash(host), host, String.format("%010d", ts / (15*60*1000)), metric)
    rk = compile_rowkey("[md5(host, 8)][_][host][_][time_bucket(timestamp, 15m)][_][metric]")
    ts = 1_710_000_000_000
    bucket = ts // (15 * 60 * 1000)
    md5 = hashlib.md5(b"web01").hexdigest()[:8]
    expected = f"{md5}_web01_{bucket:010d}_cpu".encode()
    assert rk.build({"host": "web01", "timestamp": ts, "metric": "cpu"}) == expected
    assert expected[15:25] == b"0001900000"


def test_fifteen_minute_bucket_design() -> None:
    rk = compile_rowkey("[time_bucket(timestamp, 15m)][host][_][metric]")
    key = rk.build({"timestamp": 900_000 * 7 + 5, "host": "h", "metric": "m"})
    assert key == b"0000000007h_m"
    assert any("hotspot" in w for w in design_warnings(rk))


def test_inbox_row_key_long_max_minus_ts_as_text() -> None:
    rk = compile_rowkey("[receiver][_][reverse_ts(ts, text)][_][sender]")
    key = rk.build({"receiver": "r", "ts": 5, "sender": "s"})
    assert key == b"r_%019d_s" % (JAVA_LONG_MAX - 5)


def test_code_taobao_to_tb() -> None:
    rk = compile_rowkey("[code(platform, {Taobao: tb})][user_id]")
    assert rk.build({"platform": "Taobao", "user_id": "u1"}) == b"tbu1"
    assert rk.decode(b"tbu1") == {"platform": "Taobao", "user_id": "u1"}


def test_long_instead_of_string_saves_bytes() -> None:
    as_text = compile_rowkey("[x]").build({"x": 2015122410})
    as_long = compile_rowkey("[long(x)]").build({"x": 2015122410})
    assert as_text == b"2015122410" and len(as_long) == 8
    assert as_long == struct.pack(">q", 2015122410)


def test_transaction_tables_of_the_guide() -> None:
    seller = compile_rowkey("[seller_id][_][long(timestamp)][order_number]")
    key = seller.build({"seller_id": "s1", "timestamp": 7, "order_number": "n9"})
    assert seller.decode(key) == {"seller_id": "s1", "timestamp": 7, "order_number": "n9"}
    plan = seller.plan({"seller_id": "s1"}, time_range=(5, 10))
    assert len(plan.ranges) == 1 and plan.exact and plan.matches(key)
    index = compile_rowkey("[order number]")
    assert index.fields == ("order number",)
    assert index.build({"order number": "n9"}) == b"n9"


def test_guide_spellings_with_hyphens_and_spaces_parse() -> None:
    rk = compile_rowkey("[hostname][log-event][Long.MAX_VALUE - timestamp]")
    assert rk.fields == ("hostname", "log-event", "timestamp")
    rk2 = compile_rowkey("[seller id][timestamp][order number]")
    assert rk2.fields == ("seller id", "timestamp", "order number")
    rk3 = compile_rowkey("[userId][orderid][random( 100)]")
    assert rk3.fields == ("userId", "orderid")


def test_hex_prefix_split_points_cover_only_the_hex_alphabet() -> None:
    rk = compile_rowkey("[md5(user_id, 4)][user_id]")
    points = split_points(rk, 10)
    assert points == [b"1999", b"3333", b"4ccc", b"6666", b"8", b"9999", b"b333", b"cccc", b"e666"]
    assert all(set(p) <= set(b"0123456789abcdef") for p in points)
