"""decode(), format_key/parse_key and the package surface."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import pipeline.rowkey as rowkey_pkg
from pipeline.rowkey import KeyDecodeError, compile_rowkey, format_key, parse_key


@pytest.mark.parametrize(
    ("spec", "event"),
    [
        (
            "[salt(user_id, 16)][user_id][_][long(ts)][order_id]",
            {"user_id": "u1", "ts": 5, "order_id": "o"},
        ),
        ("[md5(h, 4)][h][_][reverse_ts(ts)][_][m]", {"h": "x", "ts": 9, "m": "cpu"}),
        (
            "[rpad(a, '\\x00', 8)][lpad(b, '0', 4)][dec(n, 5)][olong(x)][int(y, desc)]",
            {"a": "ab", "b": "7", "n": 12, "x": -5, "y": 3},
        ),
        ("[code(p, {Taobao: tb, JD: jd})][u]", {"p": "JD", "u": "z"}),
        ("[salt(8, phoenix)][a][_][b]", {"a": "1", "b": "2"}),
        ("[a][_][reverse(b)][_][mod(n, 7)][random(3)]", {"a": "q", "b": "123", "n": 10}),
        ("[host][long(ts)]", {"host": "h", "ts": 1}),
    ],
)
def test_decode_round_trip(spec: str, event: dict[str, object]) -> None:
    rk = compile_rowkey(spec)
    assert rk.decodable
    stored = {f for seg in rk.segments if seg.invertible for f in seg.fields}
    assert rk.decode(rk.build(event)) == {k: v for k, v in event.items() if k in stored}


def test_decode_skips_hashes_and_buckets_but_verifies_them() -> None:
    rk = compile_rowkey("[salt(u, 16)][u][_][time_bucket(ts, 1h)]")
    key = rk.build({"u": "a", "ts": 7_200_000})
    assert rk.decode(key) == {"u": "a"}
    bad = bytes([(key[0] + 1) % 16]) + key[1:]
    with pytest.raises(KeyDecodeError, match="salt"):
        rk.decode(bad)


@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        ("[a][_][long(ts)]", b"abc", "delimiter"),
        ("[a][_][long(ts)]", b"a_\x00", "too short"),
        ("[long(ts)]", b"\x00" * 9, "trailing"),
        ("[salt(a, 4)][a]", b"\x09a", "salt byte"),
        ("[md5(a, 2)][_][a]", b"zz_a", "hex"),
        ("[dec(n, 3)]", b"1a3", "digits"),
        ("[a][b]", b"ab", "cannot decode"),
        ("[code(p, {Taobao: tb})]", b"xx", "unknown code"),
        ("[a]", b"\xff", "UTF-8"),
        ("[reverse_ts(t)]", b"\xff" * 8, "reverse timestamp"),
    ],
)
def test_decode_errors(spec: str, key: bytes, message: str) -> None:
    with pytest.raises(KeyDecodeError, match=message):
        compile_rowkey(spec).decode(key)


def test_decodable_property() -> None:
    assert not compile_rowkey("[a][b]").decodable
    assert compile_rowkey("[a][long(b)]").decodable
    assert not compile_rowkey("[a][b][long(c)]").decodable


def test_code_with_default_does_not_invent_a_value() -> None:
    rk = compile_rowkey("[code(p, {Taobao: tb}, default=ot)][_][u]")
    assert rk.decode(rk.build({"p": "Amazon", "u": "1"})) == {"u": "1"}


def test_format_key_is_hbase_to_string_binary() -> None:
    assert format_key(b"\x00\x01abc") == "\\x00\\x01abc"
    assert format_key(b"a\\b\x7f ~") == "a\\x5Cb\\x7F ~"
    assert format_key(bytes([0xAB])) == "\\xAB"
    for raw in (b"", bytes(range(256)), b"\\x41"):
        assert parse_key(format_key(raw)) == raw
    assert parse_key("\\xab\\x00z") == b"\xab\x00z"
    with pytest.raises(ValueError, match="is not a byte"):
        parse_key("€")


def test_every_module_declares_all_and_exports_exist() -> None:
    for info in pkgutil.iter_modules(rowkey_pkg.__path__):
        module = importlib.import_module(f"pipeline.rowkey.{info.name}")
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), (info.name, name)
    for name in (
        "compile_rowkey",
        "RowKey",
        "ScanPlan",
        "KeyRange",
        "format_key",
        "RowKeyError",
        "SpecSyntaxError",
        "EventFieldError",
        "KeyDecodeError",
        "PlanError",
    ):
        assert name in rowkey_pkg.__all__
