"""The ``bytes`` and ``decimal`` column encodings, and ``text``/``json`` of the values registry formats
bring (``bytes``, ``Decimal``): layouts fixed against Java's ``Bytes.toBytes(BigDecimal)``, round trips,
and the generated put builder agreeing with the reference path on any value."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.model import Origin, TopicPartition
from pipeline.core.records.decode import dumps
from pipeline.core.routes.encodings import ENCODINGS, decode_decimal, encode_decimal, text
from pipeline.core.routes.router import CompiledRoute
from pipeline.errors import EventError
from pipeline.settings import RouteSpec
from tests.unit.core.routing_support import fast_form_agrees

ORIGIN = Origin(TopicPartition("t", 0), 3)
ROUTE = CompiledRoute(RouteSpec(name="bin", topic="t", table="tb", rowkey="[id]", columns={
    "d:b": {"field": "b", "encoding": "bytes"}, "d:m": {"field": "m", "encoding": "decimal"},
    "d:t": {"field": "t", "required": False}, "d:j": {"field": "j", "encoding": "json", "required": False}}),
    max_key_bytes=64, max_cell_bytes=40)


@pytest.mark.parametrize(("value", "layout"), [
    # scale (int32 big-endian), then BigInteger.toByteArray of the unscaled value
    ("12.50", "00000002" "04e2"), ("0", "00000000" "00"), ("-1", "00000000" "ff"), ("127", "00000000" "7f"),
    ("128", "00000000" "0080"), ("-128", "00000000" "80"), ("-129", "00000000" "ff7f"), ("1E+3", "fffffffd" "01"),
    ("-0.001", "00000003" "ff"),
])
def test_decimal_layout_is_javas(value: str, layout: str) -> None:
    assert encode_decimal(Decimal(value)).hex() == layout
    back = decode_decimal(bytes.fromhex(layout))
    assert back == Decimal(value) and str(back) == value  # the scale survives


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_decimal_round_trips_exactly(value: Decimal) -> None:
    back = ENCODINGS["decimal"].decode(ENCODINGS["decimal"].encoder("f")(value))
    assert back == value and back.as_tuple().exponent == value.as_tuple().exponent


def test_decimal_column_takes_decimals_integers_and_decimal_text_only() -> None:
    enc = ENCODINGS["decimal"].encoder("amount")
    assert enc("12.50") == enc(Decimal("12.50")) and enc(7) == enc(Decimal(7))
    with pytest.raises(EventError, match=r"'amount': expected a decimal .* got float 1.5") as info:
        enc(1.5)
    assert info.value.reason == "bad_type"
    with pytest.raises(EventError, match="'twelve' is not a decimal number"):
        enc("twelve")
    with pytest.raises(EventError, match="not a finite decimal") as info:
        enc(Decimal("NaN"))
    assert info.value.reason == "out_of_range"


def test_text_and_json_of_bytes_and_decimals() -> None:
    assert text(b"\x00\xff") == b"\x00\xff" and text(Decimal("1E+3")) == b"1000" and text(Decimal("12.50")) == b"12.50"
    assert dumps({"m": Decimal("12.50"), "b": b"\x00\xff"}) == b'{"m":12.50,"b":"AP8="}'
    assert dumps([2**64 + 1, b"\x01"]) == b'[18446744073709551617,"AQ=="]'
    assert ENCODINGS["bytes"].decode(b"\x00") == b"\x00"


_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                    st.text(max_size=8), st.binary(max_size=8), st.decimals(places=None),
                    st.sampled_from(["12.50", "x", "1e3", " 7 "]))


@settings(max_examples=500, deadline=None)
@given(b=_values, m=_values, t=_values, j=_values)
def test_generated_and_reference_agree(b: Any, m: Any, t: Any, j: Any) -> None:
    fast_form_agrees(ROUTE, {"id": "k", "b": b, "m": m, "t": t, "j": j}, ORIGIN)


KEYED = CompiledRoute(RouteSpec(name="k", topic="t", table="t", rowkey="[salt(b, 8)][b][_][m]",
                                columns={"d:v": {"field": "b", "encoding": "bytes"}}),
                      max_key_bytes=64, max_cell_bytes=40)


def test_bytes_and_decimals_feed_rowkey_segments_as_the_columns_take_them() -> None:
    event = {"b": b"\x01\xffab", "m": Decimal("12.50")}
    got = KEYED.mutation(event, ORIGIN)
    assert got is not None and got.row[1:] == b"\x01\xffab_12.50"  # bytes as they are, a decimal as plain text
    assert [got] == KEYED.reference.apply(event, ORIGIN)
    assert KEYED.reference.apply({"b": "x", "m": Decimal("1E+3")}, ORIGIN)[0].row[1:] == b"x_1000"
    assert KEYED.mutation({"b": "x", "m": Decimal("NaN")}, ORIGIN) is None
    with pytest.raises(EventError, match=r"bad_type|must be text"):
        KEYED.reference.apply({"b": "x", "m": Decimal("NaN")}, ORIGIN)


@settings(max_examples=300, deadline=None)
@given(b=_values, m=_values)
def test_generated_and_reference_keys_agree(b: Any, m: Any) -> None:
    fast_form_agrees(KEYED, {"b": b, "m": m}, ORIGIN)
