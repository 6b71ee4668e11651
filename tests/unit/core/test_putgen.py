"""The generated put builder of a route (its fast form) against the route's reference: for any event,
None (the reference decides) or the reference's one mutation (row, cells in the same order,
timestamp, size); the events a route is for are taken by the fast form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.model import Origin, TopicPartition
from pipeline.core.routes.router import CompiledRoute, Router
from pipeline.errors import EventError
from pipeline.settings import RouteSpec
from tests.unit.core.routing_support import fast_form_agrees

ORIGIN = Origin(TopicPartition("t", 0), 3)
COLUMNS: dict[str, Any] = {
    "d:t": "t",
    "d:n": {"field": "n", "encoding": "long"},
    "d:j": {"field": "j", "encoding": "json"},
    "d:o": {"field": "o", "required": False},
    "d:deep": {"field": "a.b", "required": False},
    "d:need": {"field": "a.c", "encoding": "long"},
}
MIXED = CompiledRoute(RouteSpec(name="mixed", topic="t", table="tb", rowkey="[salt(id, 4)][id][_][reverse_ts(ts)]",
                                timestamp_field="ts", columns=COLUMNS), max_key_bytes=24, max_cell_bytes=12)
REQUIRED = CompiledRoute(RouteSpec(name="req", topic="t", table="tb", rowkey="[id]",
                                   columns={"d:t": "t", "d:n": {"field": "n", "encoding": "long"}}),
                         max_key_bytes=24, max_cell_bytes=12)

_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=14))
_value = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                       st.dictionaries(st.sampled_from("bcx"), inner, max_size=3)),
                      max_leaves=4)
_event = st.dictionaries(st.sampled_from(["id", "ts", "t", "n", "j", "o", "a"]),
                         st.one_of(_value, st.integers(min_value=0, max_value=2**40)), max_size=7)


@settings(max_examples=400, deadline=None)
@given(event=_event)
def test_generated_and_reference_agree_on_any_event(event: dict[str, Any]) -> None:
    for route in (MIXED, REQUIRED):
        fast_form_agrees(route, event, ORIGIN)


@pytest.mark.parametrize(("event", "taken"), [
    ({"id": "k", "ts": 5, "t": "x", "n": 7, "j": [1], "a": {"b": True, "c": 2}, "o": 1.5}, True),
    ({"id": "k", "ts": 5, "t": 3, "n": -(2**63), "j": None, "a": {"c": 2}}, False),  # a required column null
    ({"id": "k", "ts": 5, "t": 3, "n": -(2**63), "j": "", "a": {"c": 2}}, True),
    ({"id": "k", "ts": 2**63 - 1, "t": 3, "n": 1, "j": 0, "a": {"c": 2}}, True),  # the last timestamp
    ({"id": "k", "ts": 2**63, "t": "x", "n": 1, "j": 1, "a": {"c": 2}}, False),  # beyond a cell's timestamp
    ({"id": "k", "ts": -1, "t": "x", "n": 1, "j": 1, "a": {"c": 2}}, False),
    ({"id": "k", "ts": 5, "t": "x", "n": 2**63, "j": 1, "a": {"c": 2}}, False),  # out of range
    ({"id": "k", "ts": True, "t": "x", "n": 1, "j": 1, "a": {"c": 2}}, False),  # a bool is no timestamp
    ({"id": "k" * 30, "ts": 5, "t": "x", "n": 1, "j": 1, "a": {"c": 2}}, False),  # key too long
    ({"id": "k", "ts": 5, "t": "x" * 13, "n": 1, "j": 1, "a": {"c": 2}}, False),  # cell too large
    ({"id": "k", "ts": 5, "t": "x", "n": 1, "j": 1, "a": [1]}, False),  # a non-object parent
    ({"id": None, "ts": 5, "t": "x", "n": 1, "j": 1, "a": {"c": 2}}, False),  # a NULL key: the reference decides
])
def test_the_edges_agree(event: dict[str, Any], taken: bool) -> None:
    assert fast_form_agrees(MIXED, event, ORIGIN) is taken


def test_a_put_with_no_cell_is_no_mutation() -> None:
    optional = CompiledRoute(RouteSpec(name="opt", topic="t", table="tb", rowkey="[id]",
                                       columns={"d:o": {"field": "o", "required": False}}), 100, 100)
    assert optional.mutation({"id": "a"}, ORIGIN) is None
    assert optional.reference.apply({"id": "a"}, ORIGIN) == []
    assert fast_form_agrees(optional, {"id": "a", "o": 1}, ORIGIN)


def test_puts_and_refusals_through_the_router() -> None:
    router = Router([RouteSpec(name="r", topic="t", table="tb", rowkey="[id]", timestamp_field="ts",
                               columns={"d:v": "v", "d:n": {"field": "n", "encoding": "long"}})])
    (m,) = router.route("t", b'{"id": "a", "ts": 9, "v": "x", "n": 1}', ORIGIN)
    assert (m.row, m.cells, m.timestamp, m.size) == (b"a", {b"d:v": b"x", b"d:n": b"\x00" * 7 + b"\x01"}, 9,
                                                     1 + 16 + 3 + 1 + 8 + 3 + 8 + 8)
    with pytest.raises(EventError, match=r"route 'r': field 'v' \(column d:v\) is missing") as info:
        router.route("t", b'{"id": "a", "ts": 9, "n": 1}', ORIGIN)
    assert info.value.reason == "missing_field"
    with pytest.raises(EventError, match="expected an integer for a long column, got str") as info:
        router.route("t", b'{"id": "a", "ts": 9, "v": "x", "n": "1"}', ORIGIN)
    assert info.value.reason == "bad_type"


def test_the_generated_source_is_its_docstring() -> None:
    doc = REQUIRED.mutation.__doc__ or ""
    assert "def mutation(event, origin):" in doc and "return None" in doc
