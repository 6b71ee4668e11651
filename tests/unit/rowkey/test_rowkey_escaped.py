"""``text(f, escaped)``: the escaped, self-delimiting, order-preserving text segment.

Layout: the UTF-8 text with every 0x00 written as 0x00 0xFF, then the terminator 0x00 0x01.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.cli.keys import keys_app
from pipeline.rowkey import (
    EventFieldError,
    KeyDecodeError,
    KeyRange,
    PlanError,
    RowKey,
    SpecSyntaxError,
    compile_rowkey,
)
from pipeline.rowkey.codecs import escape_bytes, escaped_end
from pipeline.rowkey.explain import design_warnings, explain
from pipeline.rowkey.segments_text import EscapedText, Text
from pipeline.rowkey.splits import split_points

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LMIN, LMAX = -(1 << 63), (1 << 63) - 1
I64 = st.integers(LMIN, LMAX)
# text rich in the bytes that matter: 0x00, 0x01, the delimiter, and multi-byte characters
CHARS = st.one_of(
    st.sampled_from(["\x00", "\x01", "_", "a", "b", "\x7f", "é", "\uffff"]),
    st.characters(exclude_categories=["Cs"]),
)
TEXT = st.text(CHARS, max_size=10)
# any bytes, biased to 0x00, 0x01 and 0xFF
BYTES = st.lists(
    st.one_of(st.sampled_from([0x00, 0x01, 0xFF]), st.integers(0, 255)), max_size=10
).map(bytes)

ESC = "[text(a, escaped)]"
_CACHE: dict[str, RowKey] = {}


def rk_of(spec: str) -> RowKey:
    if spec not in _CACHE:
        _CACHE[spec] = compile_rowkey(spec)
    return _CACHE[spec]


def _cmp(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


# --- notation ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        "[text(a, escaped)]",
        "[TEXT(a, Escaped)]",
        "[str(a, escaped)]",
        "[string( a ,escaped )]",
        "[text(a, form=escaped)]",
    ],
)
def test_escaped_spellings_give_a_distinct_segment_class(spec: str) -> None:
    (seg,) = compile_rowkey(spec).segments
    assert type(seg) is EscapedText and not isinstance(seg, Text)
    assert seg.source == "text(a, escaped)" and seg.kind == "escaped_text" and seg.fields == ("a",)
    assert seg.width is None and seg.self_delimiting and seg.min_width == 2


@pytest.mark.parametrize("spec", ["[a]", "[text(a)]", "[str(a)]", "[string(a)]"])
def test_plain_text_spellings_are_unchanged(spec: str) -> None:
    (seg,) = compile_rowkey(spec).segments
    assert type(seg) is Text and seg.source == "a" and not seg.self_delimiting


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("[text(a, bogus)]", "unknown option 'bogus'"),
        ("[text(a, form=plain)]", "unknown option 'plain'"),
        ("[text(a, mode=escaped)]", "unknown keyword mode="),
        ("[text(a, 3)]", "takes a field and an option"),
        ("[text(a, 'escaped')]", "takes a field and an option"),
        ("[text(a, escaped, b)]", "too many arguments"),
        ("[text(a, escaped, form=escaped)]", "given twice"),
    ],
)
def test_bad_options_are_refused_naming_them(spec: str, message: str) -> None:
    with pytest.raises(SpecSyntaxError, match=message) as info:
        compile_rowkey(spec)
    assert "^" in str(info.value)


# --- byte layout ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("ab", b"ab\x00\x01"),
        ("", b"\x00\x01"),
        ("a\x00b", b"a\x00\xffb\x00\x01"),
        ("\x00\x00", b"\x00\xff\x00\xff\x00\x01"),
        ("x_y", b"x_y\x00\x01"),
        ("é", "é".encode() + b"\x00\x01"),
        (42, b"42\x00\x01"),
        (b"\xff\x00", b"\xff\x00\xff\x00\x01"),
    ],
)
def test_byte_layout(value: Any, key: bytes) -> None:
    rk = rk_of(ESC)
    assert rk.build({"a": value}) == key == rk.build_reference({"a": value})


# --- order and self-delimitation (properties) ----------------------------------------------------
@FAST
@given(BYTES, BYTES, BYTES, BYTES, BYTES)
# a single 0x00 terminator (FoundationDB's) fails here: b"" + 0xFF... would sort after b"\x00"
@example(b"", b"", b"\x00", b"\xff\xff", b"")
def test_escaping_preserves_byte_order_whatever_follows(
    common: bytes, tail_a: bytes, tail_b: bytes, x: bytes, y: bytes
) -> None:
    a, b = common + tail_a, common + tail_b  # shared prefixes, a prefix of b, equal values
    ea, eb = escape_bytes(a), escape_bytes(b)
    assert _cmp(ea, eb) == _cmp(a, b)
    if a != b:  # a proper prefix included: the order is decided inside the encoded bytes
        assert _cmp(ea + x, eb + y) == _cmp(a, b)
        assert not eb.startswith(ea) and not ea.startswith(eb)


@FAST
@given(BYTES, BYTES, BYTES)
def test_escaped_bytes_find_their_own_end(prefix: bytes, a: bytes, tail: bytes) -> None:
    key = prefix + escape_bytes(a) + tail
    assert escaped_end(key, len(prefix)) == len(prefix) + len(escape_bytes(a))


@FAST
@given(TEXT, TEXT, I64, I64)
@example("", "\x00", -1, 0)
def test_segment_order_with_a_segment_after_it(a: str, b: str, m: int, n: int) -> None:
    """long(n) may start with 0xFF (negatives): the order is still the text's, then the number's."""
    rk = rk_of("[text(a, escaped)][long(n)]")
    ka, kb = rk.build({"a": a, "n": m}), rk.build({"a": b, "n": n})
    expected = _cmp(a.encode(), b.encode()) or _cmp(m & (2**64 - 1), n & (2**64 - 1))
    assert _cmp(ka, kb) == expected


@FAST
@given(TEXT, TEXT, TEXT, TEXT)
def test_two_escaped_texts_round_trip_and_sort_as_a_tuple(a: str, b: str, c: str, d: str) -> None:
    rk = rk_of("[text(a, escaped)][text(b, escaped)]")
    k1, k2 = rk.build({"a": a, "b": b}), rk.build({"a": c, "b": d})
    assert rk.decode(k1) == {"a": a, "b": b} == rk.decode(k1, verify=False)
    assert _cmp(k1, k2) == _cmp((a.encode(), b.encode()), (c.encode(), d.encode()))


ROUND_TRIP: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "[text(a, escaped)]": {"a": TEXT},
    "[text(a, escaped)][_][b]": {"a": TEXT, "b": TEXT},
    "[salt(a, 8)][text(a, escaped)][long(n, desc)][text(b, escaped)]": {
        "a": TEXT,
        "n": I64,
        "b": TEXT,
    },
    "[b][_][text(a, escaped)][int(n)]": {
        "b": TEXT.filter(lambda s: "_" not in s),
        "a": TEXT,
        "n": st.integers(-(1 << 31), (1 << 31) - 1),
    },
    "[salt(4)][md5(a, 2)][text(a, escaped)][rpad(b, 'x', 12)]": {
        "a": TEXT,
        "b": TEXT.filter(lambda s: len(s.encode()) <= 12 and not s.endswith("x")),
    },
}


@pytest.mark.parametrize("spec", sorted(ROUND_TRIP))
def test_decode_build_round_trip_verified_and_fast(spec: str) -> None:
    rk = rk_of(spec)

    @settings(max_examples=60, deadline=None)
    @given(st.fixed_dictionaries(ROUND_TRIP[spec]))
    def check(event: dict[str, Any]) -> None:
        key = rk.build(event)
        assert key == rk.build_reference(event)
        verified = rk.decode(key)
        assert verified == event
        assert list(rk.decode(key, verify=False).items()) == list(verified.items())

    check()


# --- build: errors, fast == reference ------------------------------------------------------------
@pytest.mark.parametrize(
    ("event", "reason"),
    [
        ({}, "missing_field"),
        ({"a": None}, "missing_field"),
        ({"a": True}, "bad_type"),
        ({"a": 1.5}, "bad_type"),
        ({"a": ["x"]}, "bad_type"),
        ({"a": "\udc80"}, "bad_type"),
    ],
)
def test_build_errors_match_plain_text(event: dict[str, Any], reason: str) -> None:
    for spec in ("[text(a, escaped)][_][b]", "[a][_][b]"):
        rk = rk_of(spec)
        for build in (rk.build, rk.build_reference):
            with pytest.raises(EventFieldError) as info:
                build({**event, "b": "z"})
            assert (info.value.field, info.value.reason) == ("a", reason)


def test_the_delimiter_is_allowed_but_not_needed() -> None:
    rk = rk_of("[text(a, escaped)][_][b]")
    assert rk.layout.terminator[0] is None and rk.layout.ambiguous == [] and rk.decodable
    key = rk.build({"a": "x_y\x00", "b": "z"})
    assert key == b"x_y\x00\xff\x00\x01_z" and rk.decode(key) == {"a": "x_y\x00", "b": "z"}
    bare = rk_of("[text(a, escaped)][b]")
    assert bare.layout.ambiguous == [] and bare.decodable
    assert bare.decode(bare.build({"a": "h1", "b": "2"})) == {"a": "h1", "b": "2"}
    plain = rk_of("[a][_][b]")
    with pytest.raises(EventFieldError, match="contains_delimiter"):
        plain.build({"a": "x_y", "b": "z"})


ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 65), 1 << 65),
    TEXT,
    st.binary(max_size=4),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
    st.just("\udc80"),
)
EQUIV_SPECS = [
    "[text(a, escaped)]",
    "[salt(a, 16)][text(a, escaped)][_][long(b)][c]",
    "[c][_][text(a, escaped)][text(b, escaped)]",
    "[salt(3, phoenix)][text(c, escaped)][olong(a)][lpad(b, '0', 3)]",
]


@FAST
@given(st.sampled_from(EQUIV_SPECS), st.dictionaries(st.sampled_from(["a", "b", "c"]), ANY, max_size=3))
def test_generated_build_equals_reference(spec: str, event: dict[str, Any]) -> None:
    rk = rk_of(spec)
    outcomes: list[tuple[str, object]] = []
    for build in (rk.build, rk.build_reference):
        try:
            outcomes.append(("ok", build(event)))
        except EventFieldError as exc:
            outcomes.append(("error", (exc.field, exc.reason)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "ok" or outcomes[0][1] != ("a", "contains_delimiter")


# --- decode: malformed keys ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "key", "message"),
    [
        (ESC, b"ab", "no 0x00 0x01 terminator"),
        (ESC, b"ab\x00", "no 0x00 0x01 terminator"),
        (ESC, b"a\x00\xff", "no 0x00 0x01 terminator"),
        (ESC, b"a\x00\x02\x00\x01", "0x00 at byte 1 is followed by 0x02"),
        (ESC, b"a\x00\x00\x00\x01", "followed by 0x00"),
        (ESC, b"a\x00\x01b", "trailing"),
        (ESC, b"\xff\x00\x01", "UTF-8"),
        ("[text(a, escaped)][long(n)]", b"a\x00\x01\x00", "too short"),
        ("[text(a, escaped)][_][b]", b"a\x00\x01-b", "expected literal"),
        ("[text(a, escaped)][long(n)]", b"a" * 9, "no 0x00 0x01 terminator"),
    ],
)
def test_malformed_keys_raise(spec: str, key: bytes, message: str) -> None:
    rk = rk_of(spec)
    with pytest.raises(KeyDecodeError, match=message):
        rk.decode(key)
    if "literal" not in message:  # the unverified decoder skips literal checks by contract
        with pytest.raises(KeyDecodeError, match=message):
            rk.decode(key, verify=False)


def test_segment_decode_checks_the_whole_chunk() -> None:
    (seg,) = rk_of(ESC).segments
    assert seg.decode(b"a\x00\xffb\x00\x01") == {"a": "a\x00b"}
    with pytest.raises(KeyDecodeError, match="before the segment's end"):
        seg.decode(b"a\x00\x01b\x00\x01")
    with pytest.raises(KeyDecodeError, match="followed by 0x41"):
        seg.decode(b"a\x00A\x00\x01")
    with pytest.raises(KeyDecodeError, match="terminator"):
        seg.end_in(b"xyz", 1)
    assert seg.end_in(b"x\x00\xff\x00\x01zz", 0) == 5


def _outcome(fn: Any, key: bytes) -> tuple[str, Any]:
    try:
        return "ok", list(fn(key).items())
    except KeyDecodeError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("spec", ["[text(a, escaped)][long(n)]", "[salt(a, 4)][text(a, escaped)][_][b]"])
def test_fast_decoder_agrees_with_verified_decode_on_any_bytes(spec: str) -> None:
    rk = rk_of(spec)

    @FAST
    @given(TEXT, I64, BYTES, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 255)), max_size=3),
           st.booleans())
    def check(a: str, n: int, junk: bytes, flips: list[tuple[int, int]], random_key: bool) -> None:
        data = bytearray(junk if random_key else rk.build({"a": a, "n": n, "b": a}))
        for pos, byte in flips:
            if data:
                data[pos % len(data)] = byte
        key = bytes(data)
        verified, fast = _outcome(rk.decode, key), _outcome(rk.fast_decoder, key)
        if verified[0] == "ok" or fast[0] == "error":
            assert fast == verified

    check()


# --- scan planning -------------------------------------------------------------------------------
def test_equality_plans_the_prefix_of_the_whole_encoding() -> None:
    rk = rk_of("[text(buyer_id, escaped)][long(order_id)]")
    plan = rk.plan({"buyer_id": "ab"})
    assert plan.ranges == [KeyRange(b"ab\x00\x01", b"ab\x00\x02", "prefix")] and plan.exact
    assert plan.matches(rk.build({"buyer_id": "ab", "order_id": -1}))
    for other in ("abc", "ab\x00", "a", "", "ab_"):
        key = rk.build({"buyer_id": other, "order_id": 5})
        assert key not in plan.ranges[0] and not plan.matches(key)
    key = rk.build({"buyer_id": "a\x00b", "order_id": 1})
    assert rk.plan({"buyer_id": "a\x00b", "order_id": 1}).ranges == [
        KeyRange(key, key + b"\x00", "point")
    ]


def test_planning_never_refuses_a_value_for_holding_the_delimiter() -> None:
    rk = rk_of("[text(a, escaped)][_][b]")
    plan = rk.plan({"a": "x_y"})
    assert plan.ranges[0].start == b"x_y\x00\x01_" and plan.exact
    with pytest.raises(PlanError, match="delimiter"):
        rk_of("[a][_][b]").plan({"a": "x_y"})


VALS = st.sampled_from(["h", "h1", "h12", "h\x00", "h\x001", "", "_", "\x01"])
PLAN_DESIGNS = {
    "lead": ("[text(user, escaped)][text(metric, escaped)][long(ts)]", ["user", "metric", "ts"]),
    "salted": ("[salt(user, 4)][text(user, escaped)][_][reverse_ts(ts)][metric]", ["user", "ts", "metric"]),
    "after_plain": ("[metric][_][text(user, escaped)][long(ts, desc)]", ["metric", "user", "ts"]),
}
PEVENT = st.fixed_dictionaries(
    {"user": VALS, "metric": VALS.filter(lambda s: "_" not in s), "ts": st.integers(0, 40)}
)


@pytest.mark.parametrize("design", sorted(PLAN_DESIGNS))
def test_plan_ranges_hold_exactly_the_matching_keys(design: str) -> None:
    spec, order = PLAN_DESIGNS[design]
    rk = rk_of(spec)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(PEVENT, min_size=1, max_size=6), PEVENT, st.integers(0, 3), st.booleans(),
           st.integers(0, 40), st.integers(0, 20))
    def check(events: list[dict[str, Any]], query: dict[str, Any], k: int, use_time: bool, a: int,
              b: int) -> None:
        where = {f: query[f] for f in order[:k]}
        trange = (a, a + b) if use_time else None
        plan = rk.plan(where, trange)
        for event in events:
            key = rk.build(event)
            inside = [r for r in plan.ranges if key in r]
            assert len(inside) <= 1
            want = all(event[f] == v for f, v in where.items()) and (
                trange is None or trange[0] <= event["ts"] < trange[1]
            )
            assert plan.matches(key) == want, (event, where, trange)
            if want:
                assert inside
            elif plan.exact:
                assert not inside

    check()


def test_a_digit_string_serves_a_time_filter() -> None:
    rk = compile_rowkey("[text(host, escaped)][text(ts, escaped)]", time_field="ts")
    plan = rk.plan({"host": "h"}, time_range=(10, 20))
    assert not plan.exact
    assert plan.matches(rk.build({"host": "h", "ts": 15}))
    assert not plan.matches(rk.build({"host": "h", "ts": 25}))
    assert not plan.matches(rk.build({"host": "h", "ts": "x"}))


# --- explain, warnings, splits -------------------------------------------------------------------
def test_explain_describes_the_layout_without_boundary_warnings() -> None:
    rk = rk_of("[text(buyer_id, escaped)][long(order_id)]")
    text = explain(rk)
    assert "text(buyer_id, escaped)  var" in text
    assert "each 0x00 as 0x00 0xFF, ended by 0x00 0x01" in text
    assert "ascending, UTF-8 byte order (self-delimiting)" in text
    assert "key length: variable, at least 10 bytes" in text
    assert "buyer_id=?: single prefix scan" in text and "buyer_id=?, order_id=?: point get" in text
    assert "warnings: none" in text and "ambiguous" not in text
    assert design_warnings(rk_of("[text(a, escaped)][b]")) == []


def test_explain_warns_of_a_time_led_key() -> None:
    rk = compile_rowkey("[text(ts, escaped)][host]", time_field="ts")
    assert any(w.startswith("hotspot") for w in design_warnings(rk))


def test_cli_explain_build_decode_and_plan() -> None:
    runner = CliRunner()
    spec = "[text(buyer_id, escaped)][long(order_id)]"
    res = runner.invoke(keys_app, ["explain", "--rowkey", spec])
    assert res.exit_code == 0, res.output
    assert "text(buyer_id, escaped)" in res.stdout and "warnings: none" in res.stdout
    res = runner.invoke(keys_app, ["build", "-r", spec, "-e", '{"buyer_id": "b_1\\u0000", "order_id": 7}'])
    assert res.exit_code == 0 and res.stdout.strip() == "b_1\\x00\\xFF\\x00\\x01" + "\\x00" * 7 + "\\x07"
    res = runner.invoke(keys_app, ["decode", "-r", spec, "-k", res.stdout.strip()])
    assert res.exit_code == 0 and res.stdout.strip() == '{"buyer_id": "b_1\\u0000", "order_id": 7}'
    res = runner.invoke(keys_app, ["explain", "-r", "[text(buyer_id, bogus)]"])
    assert res.exit_code == 2 and "unknown option 'bogus'" in res.stderr


def test_split_points_behave_as_plain_text() -> None:
    sample = [rk_of(ESC).build({"a": f"u{i:03d}"}) for i in range(100)]
    with pytest.raises(PlanError, match="sample"):
        split_points(rk_of(ESC), 4)
    points = split_points(rk_of(ESC), 4, sample)
    assert points == [b"u025\x00\x01", b"u050\x00\x01", b"u075\x00\x01"]
    salted = rk_of("[salt(a, 16)][text(a, escaped)]")
    assert split_points(salted, 4) == [b"\x04", b"\x08", b"\x0c"]
    assert split_points(rk_of("['k'][text(a, escaped)]"), 2, [b"ka\x00\x01", b"kb\x00\x01"]) == [b"kb\x00\x01"]
