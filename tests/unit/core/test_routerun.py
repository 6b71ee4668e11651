"""The compiled plain-topic loop (``pipeline/core/routes/_routerun.c``) against its pure-Python form
``_route_plain``: for any run of records, the same stop and the same mutations (class, every
attribute, the weight). Both against the reference: tests/unit/core/test_route_forms.py."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.model import TopicPartition
from pipeline.core.routes import router as routing
from pipeline.core.routes.router import RoutedRun, Router
from pipeline.settings import RouteSpec
from tests.budget import examples
from tests.unit.core.routing_support import shown

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
WIDE = Router(ROUTES, max_key_bytes=4096, max_cell_bytes=4096)  # no limit hides a wrong text
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
    return run.stop, [shown(m) for m in run.mutations], run.counts


def _compiled_run(tp: TopicPartition, records: list[_Record], start: int, stop: int,
                  router: Router = ROUTER) -> RoutedRun:
    assert routing._ROUTERUN is not None, "pipeline/core/routes/_routerun.c is not built (tests/unit/test_compiled.py)"
    return router.route_run(tp, records, start, stop)


def _reference_run(tp: TopicPartition, records: list[_Record], start: int, stop: int,
                   monkeypatch: pytest.MonkeyPatch, router: Router = ROUTER) -> RoutedRun:
    with monkeypatch.context() as m:
        m.setattr(routing, "_ROUTERUN", None)
        return router.route_run(tp, records, start, stop)


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow,
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
     "t": st.one_of(st.text(max_size=4), st.integers(-(10**14), 10**15),
                    st.sampled_from(["a\nb", "\b\f\r\t", "é€", "\x00", '"\\/', "\u07ff\u0800\uffff"]),
                    st.sampled_from([1.5, 1e16, 2.5e-5])),
     # "j" is a json column: its JSON text (escapes included) must fit the 16-byte cell limit
     "n": st.integers(-5, 5), "j": _short.filter(lambda v: v is not None and len(orjson.dumps(v)) <= 16),
     "a": st.fixed_dictionaries({"c": st.text(max_size=4)}, optional={"b": _short})},
    optional={"o": _short})


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(topic=st.sampled_from(TOPICS), events=st.lists(_valid, min_size=1, max_size=40))
def test_the_compiled_loop_builds_what_the_reference_builds(topic: str, events: list[dict[str, Any]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    records = [_Record(_json(e), i) for i, e in enumerate(events)]
    tp = TopicPartition(topic, 0)
    got = _compiled_run(tp, records, 0, len(records))
    assert topic == "unrouted" or len(got.mutations) >= len(records)  # every record routed, none refused
    assert _seen(got) == _seen(_reference_run(tp, records, 0, len(records), monkeypatch))


def test_a_run_stops_at_the_first_record_it_does_not_take_and_keeps_none_of_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = _json({"id": "u1", "k": "x", "ts": 5, "t": "hi", "n": 1, "a": {"c": "c"}})
    bad = _json({"id": "u2", "k": "x", "ts": 5, "t": "hi", "a": {"c": "c"}})  # no "n": both_b refuses it
    for odd in (bad, None, b"[1]", _json({"id": "u1", "k": "x", "ts": 2**63, "t": "hi", "n": 1})):
        records = [_Record(good, 0), _Record(good, 1), _Record(odd, 2), _Record(good, 3)]
        run = _compiled_run(TopicPartition("m", 0), records, 0, 4)
        assert run.stop == 2 and len(run.mutations) == 4
        assert _seen(run) == _seen(_reference_run(TopicPartition("m", 0), records, 0, 4, monkeypatch))



@pytest.mark.parametrize("topic", ["p", "m"])  # a planned run (the sparse event), and one that is not
def test_a_connect_envelope_routes_as_its_payload(topic: str) -> None:
    good = _json({"id": "u1", "k": "x", "ts": 5, "t": "hi", "n": 1, "a": {"c": "c"}})
    envelope = b'{"schema": {"type": "struct"}, "payload": ' + good + b"}"
    tp = TopicPartition(topic, 0)
    run = ROUTER.route_run(tp, [_Record(envelope, 0)], 0, 1)
    assert run.stop == 1 and [shown(m) for m in run.mutations] == [
        shown(m) for m in ROUTER.route_run(tp, [_Record(good, 0)], 0, 1).mutations]


def test_the_plans_cover_what_they_claim() -> None:
    """Which routes the loop builds itself (a plan, and a key plan), and which it calls."""
    plans = {topic: ROUTER._plans[topic] for topic in ("p", "ks", "b", "e")}
    assert isinstance(plans["p"][0], tuple) and isinstance(plans["p"][0][1], tuple)  # put and key planned
    assert isinstance(plans["ks"][0], tuple) and plans["ks"][0][1][0] == (4, 4)  # the leading salt of the rest
    assert isinstance(plans["b"][0], tuple) and callable(plans["b"][0][1])  # md5, dec: the route's key builder
    assert callable(plans["e"][0])  # long and json columns: the route's mutation


# -- the sparse event: a run whose routes are all planned reads the declared fields from the JSON text --

_WS = ["", " ", "\n", "\t", "\r\n  "]


def _number_text(v: int | float, data: st.DataObject) -> str:
    """One of the JSON texts of ``v`` (or near it): the forms the scanner takes, and those it leaves to orjson."""
    if isinstance(v, int):
        forms = [str(v), f"{v}.0", f"{v}e0", f"{v}E+00", "-0" if v == 0 else str(v), f"{v}0" if v else "0"]
    else:
        forms = [repr(v), f"{v:.17g}", f"{v:.15g}", f"{v:.3f}", f"{v:e}", repr(v) + "0", f"{v:.20f}", f"{v:.1f}"]
    text = data.draw(st.sampled_from(forms))
    return text if all(c in "0123456789+-.eE" for c in text) and "inf" not in text else repr(v)


def _text(v: Any, data: st.DataObject, depth: int = 0) -> str:
    """A JSON text of ``v`` drawn from many spellings: whitespace, escapes, number forms, a key given twice."""
    def ws() -> str:
        return data.draw(st.sampled_from(_WS))

    if isinstance(v, dict):
        items = [(json.dumps(k, ensure_ascii=data.draw(st.booleans())), _text(x, data, depth + 1))
                 for k, x in v.items()]
        if items and data.draw(st.integers(0, 4)) == 0:  # a key given twice: orjson keeps the last
            k, _ = data.draw(st.sampled_from(items))
            decoy = data.draw(st.sampled_from(['"decoy"', "1.5", "null", "{}", '{"b": 1, "c": "x"}', "[1]"]))
            items.insert(0, (k, decoy))
        return "{" + ws() + ("," + ws()).join(f"{k}{ws()}:{ws()}{x}" for k, x in items) + ws() + "}"
    if isinstance(v, list):
        return "[" + ws() + ",".join(_text(x, data, depth + 1) + ws() for x in v) + "]"
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int | float):
        return _number_text(v, data)
    text = json.dumps(v, ensure_ascii=data.draw(st.booleans()))
    return text.replace("/", "\\/") if data.draw(st.booleans()) else text


_planned_event = st.fixed_dictionaries(  # mostly events the planned routes take (a refused one ends the run)
    {"id": st.one_of(st.text(st.characters(blacklist_characters="_", blacklist_categories=["Cs"]), min_size=1,
                             max_size=4), st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40),
                     st.sampled_from(["é/", "a\\b", 'q"'])),
     "k": st.sampled_from(["x", "y_z", "w", "é", "\u2028", "\U0001f600"]),
     "ts": st.one_of(st.integers(0, 2**42), st.integers(0, 2**42), st.just(2**63 - 1), st.sampled_from([-1, 1.0, "5"])),
     "t": st.one_of(st.text(max_size=4), st.integers(-(10**14), 10**15),
                    st.sampled_from(["a\nb", "\b\f\r\t", "é€", "\x00", '"\\/', "\u07ff\u0800\uffff"]),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from([1.5, 7.244, 0.0001, 0.00001, 1e15, 1e16, 0.0, -0.0, 123456789.125, 0.1, 100.0])),
     "a": st.one_of(*[st.fixed_dictionaries({"c": st.text(max_size=4)}, optional={"b": _short})] * 4, _short)},
    optional={"o": _short, "x": _value, "z": st.lists(_value, max_size=3)})


def _mutated(text: bytes, data: st.DataObject) -> bytes:
    """``text``, or it with one byte replaced, removed or added (mostly invalid JSON, sometimes not)."""
    how = data.draw(st.sampled_from(["none", "none", "none", "none", "replace", "remove", "insert"]))
    if how == "none" or not text:
        return text
    at = data.draw(st.integers(0, len(text) - 1))
    byte = bytes([data.draw(st.sampled_from([0x00, 0x1F, 0x22, 0x5C, 0x2C, 0x7D, 0x30, 0x2D, 0x80, 0xC3, 0xED, 0xFF]))])
    if how == "replace":
        return text[:at] + byte + text[at + 1:]
    if how == "remove":
        return text[:at] + text[at + 1:]
    return text[:at] + byte + text[at:]


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(topic=st.sampled_from(["p", "p", "ks", "nt", "b", "m"]), events=st.lists(_planned_event, min_size=1, max_size=8),
       wide=st.booleans(), data=st.data())
def test_the_sparse_event_routes_as_the_whole_event(topic: str, events: list[dict[str, Any]], wide: bool,
                                                    data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any JSON text of a planned route's event, in any spelling, valid or one byte off, gives the
    compiled loop's sparse path the reference's result."""
    values = [_mutated(_text(e, data).encode(), data) for e in events]
    records = [_Record(v, i) for i, v in enumerate(values)]
    tp, router = TopicPartition(topic, 1), WIDE if wide else ROUTER
    assert _seen(_compiled_run(tp, records, 0, len(records), router)) == _seen(
        _reference_run(tp, records, 0, len(records), monkeypatch, router))


def _edge(t: str, rest: str = "") -> bytes:
    """An event every planned route takes, its column ``t`` spelled ``t``, and ``rest`` after its last field."""
    return ('{"id":"a","k":"x","ts":1,"t":' + t + ',"a":{"c":""}' + rest + "}").encode()


_EDGES = [
    *(_edge(t) for t in ["1.50", "7.0", "0.00001", "0.0001", "-0.0", "0.0", "1e2", "10000000000000000.0",
                         "1000000000000000.0", "-0", "0.30000000000000004", "123456789012345.6", "0.1234567890123456",
                         "1.0000000000000001", "0.10000000000000001", '"\\ud83d\\ude00"', '"tab\there"', "true",
                         "[1]", '"a\\nb"', '"\\b\\f\\r\\t\\/\\\\\\""', '"\\u00e9\\u20AC\\u0041\\u07ff\\u0800"',
                         '"\\u0000"', "1.5e-07", "-2.5E+10", "1.2345678901234567"]),
    _edge("1", ',"q":1e400'), _edge('""', ',"q":"\\ud800"'), _edge('""', ',"a":{"b":1}'),
    _edge('"x"', ',"deep":' + "[" * 70 + "]" * 70), _edge('"x"', ',"deep":' + "[" * 2000 + "]" * 2000),
    _edge('""') + b" x", b"\xef\xbb\xbf" + _edge('""'),
    b'{"i\\u0064":"a","k":"x","ts":1,"t":"","a":{"c":""}}', b'{"id":"a","k":"x","ts":01,"t":1,"a":{"c":""}}',
    b'{"id":"a","k":"x","ts":1,"t":"\xed\xa0\x80"}', b'{"id":"a","k":"x","ts":1,"t":"\xc0\xaf"}',
    b'{"id":"a","k":"x","ts":1,"t":"\xf4\x90\x80\x80"}', b'{"id":"a","k":"x","ts":1,"t":{},"a":"c"}',
    b'{"id":"a","k":"x","ts":12345678901234567890,"t":1,"a":{"c":""}}', b'{"id":-9223372036854775809,"k":"x","ts":1}',
    b'{"id":"a","k":"x","ts":1.5,"t":1}', b'{"id":1.5,"k":"x","ts":1,"t":1}', b"{}", b" {} ", b"{,}", b'{"a":}',
    b'{"id":18446744073709551617,"k":"x","ts":1,"t":1,"a":{"c":""}}',  # 2**64 + 1
    b'{"id":9999999999999999999,"k":"x","ts":1,"t":1,"a":{"c":""}}', b'{"id":-999999999999999999,"k":"x","ts":1}',
]


@pytest.mark.parametrize("router", [ROUTER, WIDE], ids=["limits", "wide"])
@pytest.mark.parametrize("topic", ["p", "ks", "nt"])
def test_the_sparse_event_at_its_edges(topic: str, router: Router, monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts at each limit of the scanner (number forms, escapes, UTF-8, depth, keys given twice,
    trailing bytes) route as the reference routes them, one run each and all in one run."""
    tp = TopicPartition(topic, 0)
    for i, value in enumerate(_EDGES):
        records = [_Record(value, i)]
        assert _seen(_compiled_run(tp, records, 0, 1, router)) == _seen(
            _reference_run(tp, records, 0, 1, monkeypatch, router)), value
    records = [_Record(v, i) for i, v in enumerate(_EDGES)]
    assert _seen(_compiled_run(tp, records, 0, len(records), router)) == _seen(
        _reference_run(tp, records, 0, len(records), monkeypatch, router))
