"""Every form of every route kind against the one reference (``Router.route_record``, i.e.
``TopicReference.outcome``), on records of any shape.

The route kinds: plain routes whose columns are text (the compiled loop's plans, with and without a
key plan), plain routes with binary and JSON columns (generated put builders), several routes on one
topic, counters (increment and tally), a registry topic (JSON Schema, decoded, then the fast forms),
Debezium routes (main and index tables, NULL keys, the escaped segment) and routes that read record
metadata. The records: any JSON, any bytes, integers at every 64-bit boundary, floats, Connect
envelopes, tombstones, nulls in every position, values holding the delimiter.

For each run the worker's way of routing (the fast forms' runs, each record they stop at by the
reference: :func:`~tests.unit.core.routing_support.route_all`), with the compiled loop and without
it, must give exactly the reference's outcome record by record: the same mutations in the same
order, the same counts, the same refusals (route, reason, message). It must never raise, and the
Thrift wire encoder must take every put it gives.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.hbase.putwire import encode_put_multiple, encode_python
from pipeline.core.model import MutationKind, TopicPartition
from pipeline.core.records.schemas import RegisteredSchema
from pipeline.core.records.wire import frame
from pipeline.core.routes import router as routing
from pipeline.core.routes.router import Router
from pipeline.settings import RouteSpec, TopicSpec
from tests.budget import examples
from tests.unit.core.routing_support import route_all, shown

LONG = {"encoding": "long"}


def _r(name: str, topic: str, rowkey: str, columns: dict[str, Any], **kw: Any) -> RouteSpec:
    return RouteSpec(name=name, topic=topic, table=f"t_{name}", rowkey=rowkey, columns=columns, **kw)


ROUTES = [
    # plain, text columns: a plan with a key plan (the sparse event), and one with the route's key builder
    _r("planned", "plain", "[salt(id, 8)][id][_][k][reverse_ts(ts)]",
       {"d:v": "v", "d:o": {"field": "o", "required": False}, "d:deep": {"field": "a.b", "required": False}},
       timestamp_field="ts"),
    _r("built", "plain", "[md5(id, 4)][id][_][dec(n, 20)]", {"d:v": "v"}, timestamp_field="ts"),
    # plain, binary and JSON columns: generated put builders only
    _r("coded", "coded", "[id][_][long(n)]",
       {"d:n": {"field": "n", **LONG}, "d:j": {"field": "j", "encoding": "json"},
        "d:o": {"field": "o", "encoding": "long", "required": False}}),
    _r("escaped", "coded", "[text(k, escaped)][reverse(id)]", {"d:v": "v"}, timestamp_field="ts"),
    # counters beside a put route
    _r("hits", "count", "[k]", {}, counter={"column": "c:n", "amount_field": "n"}),
    _r("tally", "count", "[k]", {}, counter={"column": "c:x", "mode": "tally", "id_field": "id"},
       timestamp_field="ts"),
    _r("last", "count", "[k][_][id]", {"d:v": {"field": "v", "required": False}}),
    # a registry topic whose routes are plain: decoded, then the fast forms
    _r("reg", "reg", "[id][_][k]", {"d:v": "v", "d:n": {"field": "n", **LONG}}, timestamp_field="ts"),
    # Debezium: a main table and two indexes (one nullable, one on the escaped segment)
    _r("main", "dbz", "[md5(id, 2)][long(id)]", {"d:k": "k", "d:v": "v"}, envelope="debezium"),
    _r("by_k", "dbz", "[k][_][long(id)]", {"d:v": "v"}, envelope="debezium"),
    _r("by_v", "dbz", "[text(v, escaped)][long(id)]", {"d:k": "k"}, envelope="debezium",
       null_key="dead_letter"),
    # record metadata and a deleted flag
    _r("meta", "meta", "[$key.id][_][k]", {"d:v": "v", "d:h": {"field": "$header.h", "required": False}},
       timestamp_field="$offset", deleted_field="gone"),
]
TOPICS = [TopicSpec(name="reg", value_format="json_schema"), TopicSpec(name="dbz", key_format="json"),
          TopicSpec(name="meta", key_format="json", on_route_error="dead_letter_record")]
NAMES = ["plain", "coded", "count", "reg", "dbz", "meta"]
SCHEMA_ID = 3


def _router(max_key: int, max_cell: int) -> Router:
    r = Router(ROUTES, max_key_bytes=max_key, max_cell_bytes=max_cell, topics=TOPICS)
    r.schemas.add(RegisteredSchema(SCHEMA_ID, "JSON", '{"type": "object"}'))
    r.schemas.add_unknown(99, "not found")  # the runtime fetches every id before routing
    return r


ROUTERS = [_router(48, 24), _router(32767, 4096)]


class _Record:
    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, value: Any, offset: int, key: bytes | None, headers: tuple[tuple[str, bytes | None], ...]):
        self.value, self.offset, self.key, self.headers, self.timestamp = value, offset, key, headers, 1_000


_edge_ints = st.sampled_from([0, -1, 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, -(2**64),
                              10**19, 2**53 + 1, 12345678901234567890123])
_scalar = st.one_of(st.none(), st.booleans(), _edge_ints, st.integers(-(2**40), 2**40),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.1, 1e16, -0.0, 2.5e-5]),
                    st.text(max_size=6), st.sampled_from(["a_b", "_", "", "x\x00y", "é", "k1", "18446744073709551616"]))
_value = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                       st.dictionaries(st.sampled_from("bcx"), inner, max_size=3)),
                      max_leaves=4)
_FIELDS = ["id", "k", "ts", "v", "o", "n", "j", "a", "gone"]
_any_event = st.dictionaries(st.sampled_from(_FIELDS), _value, max_size=9)
_good_event = st.fixed_dictionaries(  # mostly events every route takes, so that runs get long
    {"id": st.one_of(st.text(st.characters(blacklist_characters="_\x00", blacklist_categories=["Cs"]), min_size=1,
                             max_size=4), st.integers(-(2**40), 2**40)),
     "k": st.sampled_from(["x", "y", "w", "é"]), "ts": st.one_of(st.integers(0, 2**42), st.just(2**63 - 1)),
     "v": st.one_of(st.text(max_size=4), st.integers(-999, 999), st.sampled_from([1.5, 0.1])),
     "n": st.integers(0, 10**6), "j": st.one_of(st.integers(-9, 9), st.text(max_size=3))},
    optional={"o": st.one_of(st.none(), st.integers(-5, 5)), "a": st.fixed_dictionaries({}, optional={"b": _scalar}),
              "gone": st.sampled_from([True, "true", False, None])})


def _json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(value).encode()


def _debezium(draw: st.DrawFn) -> Any:
    op = draw(st.sampled_from(["c", "r", "u", "u", "d", "t", None]))
    image = st.one_of(_good_event, _any_event, st.none())
    return {"op": op, "before": draw(image), "after": draw(image), "source": {"lsn": draw(st.one_of(
        st.integers(0, 2**40), _edge_ints))}}


@st.composite
def _records(draw: st.DrawFn, topic: str) -> list[_Record]:
    out = []
    for offset in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["good", "good", "good", "any", "envelope", "odd"]))
        event: Any = draw(_good_event) if kind in ("good", "envelope") else draw(_any_event)
        if topic == "dbz" and kind != "odd":
            event = _debezium(draw)
        value: Any = _json(event)
        if kind == "envelope":
            value = b'{"schema": {"type": "struct"}, "payload": ' + value + b"}"
        elif kind == "odd":
            value = draw(st.sampled_from([None, b"", b"{", b"[1]", b'"s"', b"null", b"\xff", bytearray(b'{"id":1}'),
                                          b'{"schema": 1, "payload": 2}', b'{"id":"\\ud800"}']))
        if topic == "reg" and isinstance(value, bytes):
            value = frame(draw(st.sampled_from([SCHEMA_ID, SCHEMA_ID, 99])), value)
        key = _json(draw(st.one_of(st.fixed_dictionaries({"id": _scalar}), _scalar))) if draw(st.booleans()) else None
        headers = tuple(draw(st.lists(st.tuples(st.sampled_from(["h", "x"]), st.one_of(st.none(), st.binary(
            max_size=3))), max_size=2)))
        out.append(_Record(value, 100 + offset, key, headers))
    return out


def _check(router: Router, topic: str, records: list[_Record]) -> None:
    tp = TopicPartition(topic, 1)
    mutations, counts, refused = route_all(router, tp, records)
    expected = [router.route_record(tp, rec) for rec in records]
    assert [shown(m) for m in mutations] == [shown(m) for got in expected for m in got.mutations]
    assert counts == [len(got.mutations) for got in expected]
    assert [(off, name, e.reason, str(e)) for off, name, e in refused] == [
        (rec.offset, x.route, x.error.reason, str(x.error))
        for rec, got in zip(records, expected, strict=True) for x in got.refusals]
    puts = [m for m in mutations if m.kind is MutationKind.PUT]
    encode_python(b"t", puts)  # the wire takes every put routing gives (raises otherwise)
    encode_put_multiple(b"t", puts)
    for m in mutations:
        assert m.timestamp is None or 0 <= m.timestamp <= 2**63 - 1
        assert -(2**63) <= m.amount <= 2**63 - 1


@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_form_routes_as_the_reference(data: st.DataObject) -> None:
    topic = data.draw(st.sampled_from(NAMES))
    records = data.draw(_records(topic))
    _check(data.draw(st.sampled_from(ROUTERS)), topic, records)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_pure_python_form_routes_as_the_reference(data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = data.draw(st.sampled_from(["plain", "coded", "count"]))
    records = data.draw(_records(topic))
    with monkeypatch.context() as m:
        m.setattr(routing, "_ROUTERUN", None)
        _check(data.draw(st.sampled_from(ROUTERS)), topic, records)


@pytest.mark.parametrize("topic", ["plain", "coded", "count", "reg"])
def test_the_fast_forms_take_a_run_of_good_events_whole(topic: str) -> None:
    """The fast forms are no empty shell: a run of events every route takes is routed in one run."""
    events = [{"id": f"u{i}", "k": "x", "ts": i, "v": "hi", "n": i, "j": [i], "o": 1} for i in range(20)]
    values = [_json(e) for e in events]
    if topic == "reg":
        values = [frame(SCHEMA_ID, v) for v in values]
    records = [_Record(v, i, None, ()) for i, v in enumerate(values)]
    router = ROUTERS[1]
    run = router.route_run(TopicPartition(topic, 0), records, 0, len(records))
    assert run.stop == len(records) and len(run.mutations) == len(records) * len(router.by_topic[topic])
    _check(router, topic, records)


def test_one_record_with_a_timestamp_beyond_64_bits_is_refused_and_the_rest_are_written() -> None:
    """The record that once stopped every worker of a group (a timestamp from 2**63 to 2**64 - 1)."""
    router = Router([_r("r", "t", "[id]", {"d:v": "v"}, timestamp_field="ts")])
    values = [b'{"id": "a0", "ts": 1, "v": "x"}', b'{"id": "a1", "ts": 9223372036854775808, "v": "x"}',
              b'{"id": "a2", "ts": 18446744073709551615, "v": "x"}',
              b'{"id": "a3", "ts": 9223372036854775807, "v": "x"}']
    mutations, counts, refused = route_all(router, TopicPartition("t", 0), [_Record(v, i, None, ())
                                                                           for i, v in enumerate(values)])
    assert [m.row for m in mutations] == [b"a0", b"a3"] and counts == [1, 0, 0, 1]
    # (the topic's only route refuses them: refused as a whole)
    assert [(off, name, e.reason) for off, name, e in refused] == [(1, None, "bad_type"), (2, None, "bad_type")]
    encode_put_multiple(b"t", mutations)
