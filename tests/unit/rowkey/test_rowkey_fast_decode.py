"""The read path's unverified decoder: ``decode(key, verify=False)`` / ``fast_decoder`` and
``sort_key_fn``.

Contract: on every key the verified ``decode`` accepts, the fast decoder returns the same dict (same
values, same field order); a key that does not fit the layout raises the same KeyDecodeError; only
the checks of bytes that hold no field (salt, md5, mod, random, time bucket, literals) and of a
field stored twice are skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.rowkey import KeyDecodeError, RowKey, compile_rowkey

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LMIN, LMAX = -(1 << 63), (1 << 63) - 1
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(LMIN, LMAX)
NONNEG = st.integers(0, LMAX)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)


def no(*chars: str) -> st.SearchStrategy[str]:
    return TEXT.filter(lambda s: not any(c in s for c in chars))


# every segment kind, fixed and variable layouts, delimiters, tails, a field stored twice
DESIGNS: list[tuple[str, dict[str, st.SearchStrategy[Any]]]] = [
    ("[salt(host, 16)][host][_][reverse_ts(ts)]", {"host": no("_"), "ts": NONNEG}),
    ("[salt(user, 16)][user][_][olong(n)][order]", {"user": no("_"), "n": I64, "order": TEXT}),
    (
        "[md5(h, 3)][h]['|'][reverse_ts(ts)][int(k, desc)][reverse(r)]",
        {"h": no("|"), "ts": NONNEG, "k": I32, "r": TEXT},
    ),
    (
        "[salt(8, phoenix)][lpad(d, '0', 6)][dec(n, 9)][code(p, {Taobao: tb, JD: jd})][long(x)]",
        {
            "d": st.integers(1, 99999).map(str),
            "n": st.integers(0, 10**9 - 1),
            "p": st.sampled_from(["Taobao", "JD"]),
            "x": I64,
        },
    ),
    (
        "[mod(ts, 300)][time_bucket(ts, 1h)][code(c, {x: y}, default=z)][reverse(a)][_]"
        "[int(b, desc)]",
        {"ts": NONNEG.filter(lambda v: v < 10**16), "c": st.sampled_from(["x", "q"]),
         "a": no("_"), "b": I32},
    ),
    (
        "[a][_][reverse(b)][_][mod(n, 7)][random(3)]",
        {"a": no("_"), "b": no("_"), "n": I64},
    ),
    (
        "[rpad(a, '\\x00', 8)][long(x, ordered)][int(y)][reverse_ts(t, text)][_][a]",
        {"a": no("\x00").filter(lambda s: len(s.encode()) <= 8 and not s.endswith("\x00")),
         "x": I64, "y": I32, "t": NONNEG},
    ),
    ("[time_bucket(ts, 15m, long)][host]['\\x00'][dec(ts, 16)]",
     {"ts": st.integers(0, 10**16 - 1), "host": no("\x00")}),
    ("[host][long(ts)]", {"host": TEXT, "ts": I64}),
    ("[text(a, escaped)][_][reverse_ts(ts)][text(b, escaped)]", {"a": TEXT, "ts": NONNEG, "b": TEXT}),
]
IDS = [spec for spec, _ in DESIGNS]
_CACHE: dict[str, RowKey] = {}


def rk_of(spec: str) -> RowKey:
    if spec not in _CACHE:
        _CACHE[spec] = compile_rowkey(spec)
    return _CACHE[spec]


def outcome(fn: Any, key: bytes) -> tuple[str, Any]:
    try:
        return "ok", list(fn(key).items())  # items(): the field order counts too
    except KeyDecodeError as exc:
        return "error", str(exc)


@pytest.mark.parametrize(("spec", "fields"), DESIGNS, ids=IDS)
def test_fast_decode_equals_verified_decode_on_built_keys(
    spec: str, fields: dict[str, st.SearchStrategy[Any]]
) -> None:
    rk = rk_of(spec)

    @FAST
    @given(st.fixed_dictionaries(fields))
    def check(event: dict[str, Any]) -> None:
        key = rk.build(event)
        verified = rk.decode(key)
        assert list(rk.decode(key, verify=False).items()) == list(verified.items())
        assert list(rk.fast_decoder(key).items()) == list(verified.items())

    check()


@pytest.mark.parametrize(("spec", "fields"), DESIGNS, ids=IDS)
def test_fast_decode_agrees_on_arbitrary_bytes(
    spec: str, fields: dict[str, st.SearchStrategy[Any]]
) -> None:
    """Mutated and random keys: wherever the verified decoder accepts a key the fast one returns
    the same; wherever the fast one raises, the verified one raises the same error."""
    rk = rk_of(spec)

    @FAST
    @given(
        st.fixed_dictionaries(fields),
        st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=3),
        st.integers(-3, 3),
        st.binary(max_size=40),
        st.booleans(),
    )
    def check(event: dict[str, Any], flips: list[tuple[int, int]], cut: int, junk: bytes,
              random_key: bool) -> None:
        if random_key:
            key = junk
        else:
            data = bytearray(rk.build(event))
            for pos, byte in flips:
                if data:
                    data[pos % len(data)] = byte
            key = bytes(data[:cut] if cut < 0 else data + junk[:cut])
        verified = outcome(rk.decode, key)
        fast = outcome(rk.fast_decoder, key)
        if verified[0] == "ok" or fast[0] == "error":
            assert fast == verified

    check()


@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        ("[a][_][long(ts)]", b"abc", "delimiter"),
        ("[a][_][long(ts)]", b"a_\x00", "too short"),
        ("[long(ts)]", b"\x00" * 9, "trailing"),
        ("[dec(n, 3)]", b"1a3", "digits"),
        ("[a][b]", b"ab", "cannot decode"),
        ("[code(p, {Taobao: tb})]", b"xx", "unknown code"),
        ("[a]", b"\xff", "UTF-8"),
        ("[text(a, escaped)][long(ts)]", b"a\x00\x02" + b"\x00" * 8, "followed by 0x02"),
        ("[reverse_ts(t)]", b"\xff" * 8, "reverse timestamp"),
        ("[salt(h, 4)][h][_][reverse_ts(t, text)]", b"\x01h_" + b"1" * 18, "too short"),
        ("[salt(h, 4)][h][_][reverse_ts(t, text)]", b"\x01h_" + b"1" * 20, "trailing"),
        ("[salt(h, 4)][h][_][reverse_ts(t, text)]", b"\x01h_" + b"9" * 19, "reverse timestamp"),
    ],
)
def test_keys_that_do_not_fit_the_layout_still_raise(spec: str, key: bytes, message: str) -> None:
    rk = compile_rowkey(spec)
    with pytest.raises(KeyDecodeError, match=message):
        rk.decode(key, verify=False)
    with pytest.raises(KeyDecodeError, match=message):
        rk.decode(key)


def test_fast_decode_skips_the_salt_hash_and_literal_checks() -> None:
    rk = compile_rowkey("[salt(u, 16)][u][_][time_bucket(ts, 1h)]")
    key = rk.build({"u": "a", "ts": 7_200_000})
    bad_salt = bytes([(key[0] + 1) % 16]) + key[1:]
    with pytest.raises(KeyDecodeError, match="salt"):
        rk.decode(bad_salt)
    assert rk.decode(bad_salt, verify=False) == {"u": "a"}
    md5 = compile_rowkey("[md5(a, 2)]['#'][a]")
    with pytest.raises(KeyDecodeError):
        md5.decode(b"zz#a")
    assert md5.decode(b"zz#a", verify=False) == {"a": "a"}


def test_generated_decoder_is_straight_line_for_the_benchmark_design() -> None:
    rk = compile_rowkey("[salt(host, 16)][host][_][reverse_ts(ts)]")
    source = rk.fast_decoder.__doc__ or ""
    assert "def decode(key):" in source
    assert "key.find(" in source and "murmur" not in source and "_slow(key)" in source


@pytest.mark.parametrize("spec", [spec for spec, _ in DESIGNS] + ["[md5(a, 4)][salt(b, 4)][_][b]"])
def test_sort_key_fn_equals_sort_key(spec: str) -> None:
    rk = rk_of(spec)

    @settings(max_examples=50, deadline=None)
    @given(st.binary(max_size=30))
    def check(key: bytes) -> None:
        assert rk.sort_key_fn(key) == rk.sort_key(key)

    check()
