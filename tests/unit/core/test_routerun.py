"""The compiled plain-topic loop (``pipeline/core/_routerun.c``) against its reference, the pure-Python
``_route_plain``: for any run of records, the same stop, the same mutations (class, every attribute,
the weight) and the same refusal (class, reason, message)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core import routing
from pipeline.core.model import TopicPartition
from pipeline.core.routing import RoutedRun, Router
from pipeline.errors import EventError
from pipeline.settings import RouteSpec

TEXT_COLUMNS: dict[str, Any] = {"d:t": "t", "d:o": {"field": "o", "required": False},
                                "d:deep": {"field": "a.b", "required": False}, "d:need": "a.c"}


def _route(name: str, topic: str, rowkey: str, columns: dict[str, Any], ts: str | None = "ts") -> RouteSpec:
    return RouteSpec(name=name, topic=topic, table=f"tb_{name}", rowkey=rowkey, timestamp_field=ts, columns=columns)


ROUTES = [
    # a key plan of every kind of op: salt over fields, text with its delimiter guard, literal, reverse_ts
    _route("planned", "p", "[salt(id, k, 16)][id][_][k][reverse_ts(ts)]", TEXT_COLUMNS),
    _route("keysalt", "ks", "[salt(4)][id][_][reverse_ts(ts, text)]", TEXT_COLUMNS),
    _route("notime", "nt", "[k][id]", {"d:t": "t"}, ts=None),
    # keys the loop does not build (the route's builder), columns it does not encode (the route's mutation)
    _route("built", "b", "[md5(id, 4)][id][_][dec(ts, 20)]", TEXT_COLUMNS),
    _route("encoded", "e", "[id]", {"d:t": "t", "d:n": {"field": "n", "encoding": "long"},
                                    "d:j": {"field": "j", "encoding": "json"}}),
    # two routes on one topic: a record is routed whole or not at all
    _route("both_a", "m", "[salt(id, 4)][id]", {"d:t": "t"}),
    _route("both_b", "m", "[id][reverse_ts(ts)]", {"d:n": {"field": "n", "encoding": "long"}}),
]
ROUTER = Router(ROUTES, max_key_bytes=48, max_cell_bytes=16)
TOPICS = ["p", "ks", "nt", "b", "e", "m", "unrouted"]


class _Record:
    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, value: Any, offset: int) -> None:
        self.value, self.offset = value, offset
        self.key, self.headers, self.timestamp = None, (), 0


_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.integers(0, 2**45), st.integers(2**63 - 2, 2**63 + 2),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=10), st.sampled_from(["a_b", "", "héllo", "_"]))
_value = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                       st.dictionaries(st.sampled_from("bcx"), inner, max_size=3)),
                      max_leaves=4)
_event = st.dictionaries(st.sampled_from(["id", "k", "ts", "t", "o", "a", "n", "j"]), _value, max_size=8)
_good = st.fixed_dictionaries(  # mostly events every route takes, so that runs get long
    {"id": st.one_of(st.text(min_size=1, max_size=6), st.sampled_from(["a_b", "_", "x"]), st.integers()),
     "k": st.sampled_from(["x", "y_z", "w"]), "ts": st.integers(0, 2**42),
     "t": st.one_of(st.text(max_size=6), st.integers(-999, 999), st.sampled_from([1.5, -0.25, 1e16, 2.5e-5, 0.1]),
                    st.integers(), st.floats(allow_nan=False)), "n": st.integers(-5, 5),
     "a": st.fixed_dictionaries({"c": st.text(max_size=4)}, optional={"b": _scalar})},
    optional={"o": _scalar, "j": _value})


def _json(event: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(event)
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(event).encode()


_values = st.one_of(
    _good.map(_json), _good.map(_json), _event.map(_json),
    st.sampled_from([None, b"", b"not json", b"[1, 2]", b'"text"', b"{", b'{"id": "\\ud800"}']),
    st.builds(lambda e: bytearray(_json(e)), _good),
    st.binary(max_size=12))


def _seen(run: RoutedRun) -> tuple[Any, ...]:
    ms = [(type(m), m.table, m.row, m.kind, list(m.cells.items()), m.timestamp, m.origin, m.amount, m.weight)
          for m in run.mutations]
    err = None if run.error is None else (type(run.error), run.error.reason, str(run.error))
    return run.stop, ms, err, run.counts


def _compiled_run(tp: TopicPartition, records: list[_Record], start: int, stop: int) -> RoutedRun:
    assert routing._ROUTERUN is not None, "pipeline/core/_routerun.c is not built (tests/unit/test_compiled.py)"
    return ROUTER.route_run(tp, records, start, stop)


def _reference_run(tp: TopicPartition, records: list[_Record], start: int, stop: int,
                   monkeypatch: pytest.MonkeyPatch) -> RoutedRun:
    with monkeypatch.context() as m:
        m.setattr(routing, "_ROUTERUN", None)
        return ROUTER.route_run(tp, records, start, stop)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(topic=st.sampled_from([*TOPICS, "p", "p", "ks", "m"]), values=st.lists(_values, min_size=1, max_size=12),
       data=st.data())
def test_the_compiled_loop_routes_as_the_reference(topic: str, values: list[Any], data: st.DataObject,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    records = [_Record(v, 100 + i) for i, v in enumerate(values)]
    start = data.draw(st.integers(0, len(records)))
    stop = data.draw(st.integers(start, len(records)))
    tp = TopicPartition(topic, 2)
    assert _seen(_compiled_run(tp, records, start, stop)) == _seen(
        _reference_run(tp, records, start, stop, monkeypatch))


_short = st.one_of(st.none(), st.booleans(), st.integers(-999, 999), st.text(max_size=4),
                   st.sampled_from([1.5, -0.25, 1e16, 2.5e-5, 0.1, 7.244]))
_valid = st.fixed_dictionaries(  # events every route takes (long runs: each of their mutations compared)
    {"id": st.one_of(st.text(st.characters(blacklist_characters="_", blacklist_categories=["Cs"]), min_size=1,
                             max_size=4), st.integers(-(2**40), 2**40)),
     "k": st.sampled_from(["x", "y_z", "w", "é"]), "ts": st.one_of(st.integers(0, 2**42), st.just(2**63 - 1)),
     "t": st.one_of(st.text(max_size=4), st.integers(-(10**14), 10**15), st.sampled_from([1.5, 1e16, 2.5e-5])),
     # "j" is a json column: its JSON text (escapes included) must fit the 16-byte cell limit
     "n": st.integers(-5, 5), "j": _short.filter(lambda v: v is not None and len(orjson.dumps(v)) <= 16),
     "a": st.fixed_dictionaries({"c": st.text(max_size=4)}, optional={"b": _short})},
    optional={"o": _short})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(topic=st.sampled_from(TOPICS), events=st.lists(_valid, min_size=1, max_size=40))
def test_the_compiled_loop_builds_what_the_reference_builds(topic: str, events: list[dict[str, Any]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    records = [_Record(_json(e), i) for i, e in enumerate(events)]
    tp = TopicPartition(topic, 0)
    got = _compiled_run(tp, records, 0, len(records))
    assert topic == "unrouted" or len(got.mutations) >= len(records)  # every record routed, none refused
    assert _seen(got) == _seen(_reference_run(tp, records, 0, len(records), monkeypatch))


def test_a_run_stops_at_the_first_refused_record_and_keeps_none_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    good = _json({"id": "u1", "k": "x", "ts": 5, "t": "hi", "n": 1, "a": {"c": "c"}})
    bad = _json({"id": "u2", "k": "x", "ts": 5, "t": "hi", "a": {"c": "c"}})  # no "n": both_b refuses it
    records = [_Record(good, 0), _Record(good, 1), _Record(bad, 2), _Record(good, 3)]
    run = _compiled_run(TopicPartition("m", 0), records, 0, 4)
    assert run.stop == 2 and len(run.mutations) == 4 and isinstance(run.error, EventError)
    assert run.error.reason == "missing_field"
    assert _seen(run) == _seen(_reference_run(TopicPartition("m", 0), records, 0, 4, monkeypatch))


def test_the_plans_cover_what_they_claim() -> None:
    """Which routes the loop builds itself (a plan, and a key plan), and which it calls."""
    plans = {topic: ROUTER._plans[topic] for topic in ("p", "ks", "b", "e")}
    assert isinstance(plans["p"][0], tuple) and isinstance(plans["p"][0][1], tuple)  # put and key planned
    assert isinstance(plans["ks"][0], tuple) and plans["ks"][0][1][0] == (4, 4)  # the leading salt of the rest
    assert isinstance(plans["b"][0], tuple) and callable(plans["b"][0][1])  # md5, dec: the route's key builder
    assert callable(plans["e"][0])  # long and json columns: the route's mutation
