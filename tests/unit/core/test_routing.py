"""Routing of one record: integers beyond 64 bits stay exact (orjson alone reads them as floats),
and the reasons a record is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.model import Origin, TopicPartition
from pipeline.core.routes.router import Router, decode_value, dumps, loads
from pipeline.errors import EventError
from pipeline.settings import RouteSpec
from tests.unit.core.routing_support import route_all

ORIGIN = Origin(TopicPartition("t", 0), 7)
BIG = 12345678901234567890123


def router() -> Router:
    return Router([RouteSpec(name="r", topic="t", table="tb", rowkey="[id][_][n]",
                             columns={"d:v": "v", "d:j": {"field": "j", "encoding": "json"}})])


def test_big_integers_are_kept_exact() -> None:
    raw = b'{"id": "a", "n": %d, "v": %d, "j": {"x": [%d, 1.5]}}' % (BIG, BIG, BIG)
    assert loads(raw) == {"id": "a", "n": BIG, "v": BIG, "j": {"x": [BIG, 1.5]}}
    (m,) = router().route("t", raw, ORIGIN)
    assert m.row == b"a_%d" % BIG
    assert m.cells[b"d:v"] == b"%d" % BIG
    assert m.cells[b"d:j"] == b'{"x":[%d,1.5]}' % BIG
    assert decode_value("json", m.cells[b"d:j"]) == {"x": [BIG, 1.5]}


@pytest.mark.parametrize("n", [-2**63 - 1, -9999999999999999999, -2**64, 2**64, -(10**30)])
def test_integers_just_outside_what_orjson_keeps_exact_are_kept_exact(n: int) -> None:
    # orjson keeps [-2**63, 2**64 - 1]; -2**63 - 1 has only 19 digits, yet orjson reads it as a float
    raw = b'{"id": "a", "n": %d, "v": [%d]}' % (n, n)
    assert loads(raw) == {"id": "a", "n": n, "v": [n]}
    assert type(loads(raw)["n"]) is int


@given(st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([-2**63, -2**63 - 1, 2**64 - 1, 2**64]))
def test_every_integer_comes_back_exact(n: int) -> None:
    assert loads(b'{"n": %d, "m": [1, %d]}' % (n, n)) == {"n": n, "m": [1, n]}


def test_long_digit_runs_that_are_not_big_integers_parse_as_before() -> None:
    raw = b'{"id": "12345678901234567890123", "n": 0.12345678901234567890, "v": 18446744073709551615}'
    assert loads(raw) == {"id": "12345678901234567890123", "n": 0.12345678901234567890,
                          "v": 18446744073709551615}
    assert dumps({"a": [1, "x"]}) == b'{"a":[1,"x"]}'


def test_a_big_integer_in_a_long_column_is_out_of_range() -> None:
    r = Router([RouteSpec(name="r", topic="t", table="tb", rowkey="[id]",
                          columns={"d:n": {"field": "n", "encoding": "long"}})])
    with pytest.raises(EventError) as info:
        r.route("t", b'{"id": "a", "n": %d}' % BIG, ORIGIN)
    assert info.value.reason == "out_of_range"


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{not json", "undecodable"), (b"[1]", "not_an_object"), (b'{"n": 1, "v": 1}', "missing_field"),
    (b'{"id": "", "n": 1, "v": 1, "j": 2}', None),
])
def test_refused_records_name_their_reason(raw: bytes, reason: str | None) -> None:
    if reason is None:
        assert router().route("t", raw, ORIGIN)[0].row == b"_1"
        return
    with pytest.raises(EventError) as info:
        router().route("t", raw, ORIGIN)
    assert info.value.reason == reason


class _Rec:
    def __init__(self, offset: int, value: bytes | None) -> None:
        self.offset, self.value = offset, value
        self.key: bytes | None = None
        self.timestamp = 0
        self.headers: tuple[tuple[str, bytes], ...] = ()


_VALUES = [b'{"id": "a", "n": 1, "v": "x"}', b'{"id": "b", "n": 2, "v": 3.5, "j": [1]}', b"{not json", b"[1]", None,
           b'{"n": 1, "v": 1}', b'{"id": "c", "n": %d, "v": 1}' % BIG, b'"s"', b'{"id": "d", "n": -1, "v": null}']


@given(st.lists(st.sampled_from(_VALUES), max_size=12), st.integers(min_value=0, max_value=3))
def test_property_runs_and_the_records_they_stop_at_give_the_reference_record_by_record(values: list[bytes | None],
                                                                                       start: int) -> None:
    r, tp = router(), TopicPartition("t", 3)
    records = [_Rec(100 + i, v) for i, v in enumerate(values)]
    start = min(start, len(records))
    mutations, _, refused = route_all(r, tp, records, start)
    expected, refusals = [], []
    for rec in records[start:]:
        got = r.route_record(tp, rec)
        expected += got.mutations
        refusals += [(rec.offset, x.route, x.error.reason, str(x.error)) for x in got.refusals]
    assert mutations == expected
    assert [(off, name, e.reason, str(e)) for off, name, e in refused] == refusals


def test_route_run_gives_every_route_of_the_topic_in_route_order() -> None:
    specs = [RouteSpec(name=n, topic="t", table=n, rowkey="[id]", columns={"d:v": "v"}) for n in ("r1", "r2")]
    r, tp = Router(specs), TopicPartition("t", 0)
    run = r.route_run(tp, [_Rec(5, b'{"id": "a", "v": 1}'), _Rec(6, b'{"id": "b", "v": 2}')], 0, 1)
    assert run.stop == 1
    assert [(m.table, m.row, m.origin.offset) for m in run.mutations] == [("r1", b"a", 5), ("r2", b"a", 5)]


def test_the_encodings_a_column_may_name_are_the_table_s() -> None:
    from typing import get_args

    from pipeline.core.routes.encodings import ENCODINGS
    from pipeline.settings import ColumnSpec

    assert set(get_args(ColumnSpec.model_fields["encoding"].annotation)) == set(ENCODINGS)
