"""Byte layouts of every segment kind and the errors of bad events."""

from __future__ import annotations

import hashlib
import random
import struct
from typing import Any

import mmh3
import pytest

from pipeline.errors import HBaseIngestError
from pipeline.rowkey import EventFieldError, RowKeyError, compile_rowkey

LMAX = (1 << 63) - 1


def java_phoenix_salt(data: bytes, n: int) -> int:
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    java_rem = abs(signed) % n * (1 if signed >= 0 else -1)  # Java's truncating remainder
    return abs(java_rem)


def both(spec: str, event: dict[str, Any], **kw: Any) -> bytes:
    """Build with the generated and the reference path; they must agree."""
    rk = compile_rowkey(spec)
    fast = rk.build(event, **kw)
    assert fast == rk.build_reference(event, **kw)
    return fast


@pytest.mark.parametrize(
    ("spec", "event", "expected"),
    [
        ("[a]", {"a": "héllo"}, "héllo".encode()),
        ("[a]", {"a": 42}, b"42"),
        ("[a][_][b]", {"a": "x", "b": "y"}, b"x_y"),
        ("[a]['#'][b]", {"a": "x", "b": "y"}, b"x#y"),
        ("[a]['\\x00'][b]", {"a": "x", "b": "y"}, b"x\x00y"),
        ("[a][::][b]", {"a": "x", "b": "y"}, b"x::y"),
        ("[lit('k:')][a]", {"a": "x"}, b"k:x"),
        ("[lpad(a, '0', 5)]", {"a": "42"}, b"00042"),
        ("[rpad(a, ' ', 4)]", {"a": "ab"}, b"ab  "),
        ("[dec(n, 10)]", {"n": 42}, b"0000000042"),
        ("[long(n)]", {"n": -1}, b"\xff" * 8),
        ("[long(n)]", {"n": 1}, b"\x00" * 7 + b"\x01"),
        ("[int(n)]", {"n": -2}, struct.pack(">i", -2)),
        ("[long(n, ordered)]", {"n": -1}, b"\x7f" + b"\xff" * 7),
        ("[olong(n)]", {"n": 0}, b"\x80" + b"\x00" * 7),
        ("[int(n, ordered)]", {"n": 0}, b"\x80\x00\x00\x00"),
        ("[long(n, desc)]", {"n": 0}, b"\x7f" + b"\xff" * 7),
        ("[long(n, desc)]", {"n": -(1 << 63)}, b"\xff" * 8),
        ("[reverse_ts(ts)]", {"ts": 0}, struct.pack(">q", LMAX)),
        ("[mod(n, 16)]", {"n": 35}, b"\x03"),
        ("[mod(n, 1000)]", {"n": 1999}, (999).to_bytes(2, "big")),
        ("[mod(n, 1000, text)]", {"n": 1007}, b"007"),
        ("[mod(n, 16)]", {"n": -1}, b"\x0f"),
        ("[time_bucket(t, 1h, long)]", {"t": 7_200_001}, struct.pack(">q", 2)),
        ("[time_bucket(t, 30s, int)]", {"t": 61_000}, struct.pack(">i", 2)),
        ("[time_bucket(t, 1d)]", {"t": 86_400_000 * 3}, b"0000000003"),
        ("[code(p, {Taobao: tb, 'Tmall Global': tg}, default=ot)]", {"p": "Tmall Global"}, b"tg"),
        ("[code(p, {Taobao: tb}, default=ot)]", {"p": "JD"}, b"ot"),
        ("[code(p, {Taobao: tb}, ot)]", {"p": "JD"}, b"ot"),
        ("[user.id][_][user.name]", {"user": {"id": "u1", "name": "n"}}, b"u1_n"),
    ],
)
def test_layouts(spec: str, event: dict[str, Any], expected: bytes) -> None:
    assert both(spec, event) == expected


def test_long_matches_java_bytes_to_bytes() -> None:
    for v in (0, 1, -1, 255, 256, LMAX - 1000, -(1 << 63), LMAX):
        assert both("[long(x)]", {"x": v}) == struct.pack(">q", v)
        assert both("[long(x, desc)]", {"x": v}) == bytes(
            b ^ 0xFF for b in both("[long(x, ordered)]", {"x": v})
        )


def test_desc_long_equals_reverse_ts_for_non_negative_values() -> None:
    for v in (0, 1, 1_700_000_000_000, LMAX):
        assert both("[long(x, desc)]", {"x": v}) == both("[reverse_ts(x)]", {"x": v})


@pytest.mark.parametrize("hash_name", ["murmur3", "md5", "phoenix"])
def test_salt_hashes(hash_name: str) -> None:
    spec = f"[salt(user_id, 16, {hash_name})][user_id]"
    key = both(spec, {"user_id": "abc001"})
    data = b"abc001"
    expected = {
        "murmur3": mmh3.hash(data, 0, False) % 16,
        "md5": int.from_bytes(hashlib.md5(data).digest()[:4], "big") % 16,
        "phoenix": java_phoenix_salt(data, 16),
    }[hash_name]
    assert key == bytes([expected]) + data


def test_salt_keyword_syntax_and_multi_field_input() -> None:
    a = both("[salt(host, metric, buckets=8, hash=md5)][host]", {"host": "h", "metric": "m"})
    expected = int.from_bytes(hashlib.md5(b"h\x00m").digest()[:4], "big") % 8
    assert a[0] == expected


def test_phoenix_whole_key_salt_hashes_the_rest_of_the_key() -> None:
    rk = compile_rowkey("[salt(4, phoenix)][a][_][b]")
    key = rk.build({"a": "x", "b": "y"})
    assert key[1:] == b"x_y" and key[0] == java_phoenix_salt(b"x_y", 4)
    assert rk.build_reference({"a": "x", "b": "y"}) == key


def test_phoenix_hash_handles_high_bytes_and_overflow() -> None:
    data = "ü" * 40  # bytes > 127 and int32 overflow
    key = both("[salt(a, 7, phoenix)][_]", {"a": data})
    assert key[0] == java_phoenix_salt(data.encode(), 7)


def test_rng_default_comes_from_compile_and_call_overrides_it() -> None:
    rk = compile_rowkey("[random(1000)][a]", rng=random.Random(1))
    first = rk.build({"a": "x"}, rng=random.Random(9))
    assert first == rk.build_reference({"a": "x"}, rng=random.Random(9))
    assert len(first) == 3


@pytest.mark.parametrize(
    ("spec", "event", "field", "reason"),
    [
        ("[a]", {}, "a", "missing_field"),
        ("[a]", {"a": None}, "a", "missing_field"),
        ("[user.id]", {"user": "flat"}, "user.id", "missing_field"),
        ("[a]", {"a": 1.5}, "a", "bad_type"),
        ("[a]", {"a": True}, "a", "bad_type"),
        ("[a]", {"a": "\ud800"}, "a", "bad_type"),
        ("[long(ts)]", {"ts": "123"}, "ts", "bad_type"),
        ("[long(ts)]", {"ts": True}, "ts", "bad_type"),
        ("[long(ts)]", {"ts": 1 << 63}, "ts", "out_of_range"),
        ("[int(ts)]", {"ts": 1 << 31}, "ts", "out_of_range"),
        ("[dec(n, 3)]", {"n": 1000}, "n", "too_long"),
        ("[dec(n, 3)]", {"n": -1}, "n", "out_of_range"),
        ("[dec(n, 3)]", {"n": False}, "n", "bad_type"),
        ("[rpad(a, 'x', 3)]", {"a": "abcd"}, "a", "too_long"),
        ("[lpad(a, '0', 2)]", {"a": 123}, "a", "too_long"),
        ("[reverse_ts(ts)]", {"ts": -1}, "ts", "out_of_range"),
        ("[time_bucket(ts, 1ms)]", {"ts": 10**10}, "ts", "too_long"),
        ("[time_bucket(ts, 1ms, int)]", {"ts": 1 << 31}, "ts", "out_of_range"),
        ("[code(p, {Taobao: tb})]", {"p": "JD"}, "p", "unmapped_code"),
        ("[code(p, {Taobao: tb})]", {"p": ["x"]}, "p", "bad_type"),
        ("[a][_][b]", {"a": "x_y", "b": "z"}, "a", "contains_delimiter"),
        ("[reverse(a)][_][b]", {"a": "x_y", "b": "z"}, "a", "contains_delimiter"),
        ("[mod(n, 4)]", {"n": "7"}, "n", "bad_type"),
        ("[salt(a, 4)][a]", {"b": 1}, "a", "missing_field"),
    ],
)
def test_bad_events_raise_typed_errors(
    spec: str, event: dict[str, Any], field: str, reason: str
) -> None:
    rk = compile_rowkey(spec)
    for build in (rk.build, rk.build_reference):
        with pytest.raises(EventFieldError) as info:
            build(event)
        err = info.value
        assert (err.field, err.reason) == (field, reason)
        assert isinstance(err, RowKeyError) and isinstance(err, HBaseIngestError)
        assert repr(field) in str(err)
        if reason != "missing_field":
            assert err.value == event.get(field, err.value)


def test_error_message_names_value() -> None:
    with pytest.raises(EventFieldError, match=r"'abcd'.*too_long"):
        compile_rowkey("[rpad(a, 'x', 3)]").build({"a": "abcd"})


def test_int_subclass_values_and_mapping_types() -> None:
    class MyInt(int):
        pass

    from types import MappingProxyType

    rk = compile_rowkey("[long(a)][b]")
    assert rk.build(MappingProxyType({"a": MyInt(5), "b": "x"})) == struct.pack(">q", 5) + b"x"


def test_generated_source_is_attached_for_inspection() -> None:
    rk = compile_rowkey("[salt(user_id, 16)][user_id][long(ts)][order_id]")
    doc = rk.builder.__doc__ or ""
    assert "def build(event, rng=None)" in doc and "kind" not in doc


@pytest.mark.parametrize("spec", ["[user_id]", "[reverse(user_id)]", "[a][b]"])
def test_an_empty_row_key_is_refused(spec: str) -> None:
    rk = compile_rowkey(spec)
    event = {"user_id": "", "a": "", "b": ""}
    for build in (rk.build, rk.build_reference):
        with pytest.raises(EventFieldError) as info:
            build(event)
        assert info.value.reason == "empty_key" and "empty row key" in str(info.value)
    assert rk.build({"user_id": "u", "a": "", "b": "x"}) != b""


def test_a_key_with_a_fixed_part_may_have_empty_text() -> None:
    assert compile_rowkey("[user_id][_]").build({"user_id": ""}) == b"_"
