"""The generated row decoder of a route: it must decode exactly what the general column decoder
decodes, name the column of a bad cell, and build ReadRows."""

from __future__ import annotations

import marshal
import pickle
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.columns import CellDecodeError, compile_columns
from pipeline.runtime.read.errors import RowDecodeError
from pipeline.runtime.read.rows import ReadRow, as_read_rows, compile_row_decoder, is_decoded, page_decoder
from pipeline.settings import RouteSpec

from .test_reader_fake import Cell

ROUTE = RouteSpec(name="r", topic="t", table="t", rowkey="[host][_][long(ts)]", columns={
    "d:t": {"field": "t"}, "d:j": {"field": "j", "encoding": "json"},
    "d:n": {"field": "n", "encoding": "long"}})
KEY = compile_rowkey(ROUTE.rowkey).build({"host": "web1", "ts": 7})


GENERAL = compile_columns(ROUTE)


def cells(raw: dict[bytes, bytes]) -> dict[bytes, Cell]:
    return {q: Cell(v, 1) for q, v in raw.items()}


def decoder(route: RouteSpec = ROUTE) -> Any:
    return compile_row_decoder(route, compile_rowkey(route.rowkey).decode)


def test_mapped_unmapped_and_missing_cells() -> None:
    raw = {b"d:j": orjson.dumps({"a": [1]}), b"d:n": (-5).to_bytes(8, "big", signed=True),
           b"d:other": b"\x00", b"d:t": "é".encode()}
    [row] = decoder()([(KEY, cells(raw))], "salt=3")
    assert row == ReadRow(KEY, {"host": "web1", "ts": 7},
                          {"d:t": "é", "d:j": {"a": [1]}, "d:n": -5, "d:other": b"\x00"}, "salt=3")
    assert (row.key, row.range_label) == (KEY, "salt=3")
    assert list(row.columns) == ["d:t", "d:j", "d:n", "d:other"]  # mapping order, then the rest
    [only] = decoder()([(KEY, cells({b"d:n": (9).to_bytes(8, "big")}))], "")
    assert only.columns == {"d:n": 9}  # a scan restricted to some columns
    assert decoder()([], "x") == []
    assert "def decode_run" in (decoder().__doc__ or "")


@pytest.mark.parametrize(("column", "value", "encoding"), [
    (b"d:n", b"\x01", "long"), (b"d:t", b"\xff\xfe", "text"), (b"d:j", b"{nope", "json")])
def test_a_bad_cell_names_its_column(column: bytes, value: bytes, encoding: str) -> None:
    raw = {b"d:t": b"ok", column: value}
    with pytest.raises(CellDecodeError, match=f"'{column.decode()}' \\({encoding}\\)"):
        decoder()([(KEY, cells({b"d:t": b"fine"})), (KEY, cells(raw))], "")


def test_counters_in_both_modes() -> None:
    tally = RouteSpec(name="r", topic="t", table="t", rowkey="[host]",
                      counter={"column": "c:n", "mode": "tally"}, columns={"d:h": "host"})
    [row] = decoder(tally)([(b"web1", cells({b"c:e1": (2).to_bytes(8, "big"), b"c:e2": b"3",
                                              b"d:h": b"web1"}))], "")
    assert row.columns == {"d:h": "web1", "c:n": 5}
    alone = RouteSpec(name="r", topic="t", table="t", rowkey="[host]",
                      counter={"column": "c:n", "mode": "tally"})  # no mapped column at all
    [row] = decoder(alone)([(b"web1", cells({b"c:e1": b"2", b"c:e2": b"3"}))], "")
    assert row.columns == {"c:n": 5}
    incr = RouteSpec(name="r", topic="t", table="t", rowkey="[host]",
                     counter={"column": "c:n", "mode": "increment"})
    [row] = decoder(incr)([(b"web1", cells({b"c:n": (41).to_bytes(8, "big")}))], "")
    assert row.columns == {"c:n": 41}


DECODE = decoder()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([b"d:t", b"d:j", b"d:n", b"d:x", b"e:y"]),
                       st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)),
                       max_size=5))
def test_generated_decoder_agrees_with_the_general_one(values: dict[bytes, Any]) -> None:
    raw = {q: (v.to_bytes(8, "big", signed=True) if q == b"d:n" and isinstance(v, int)
               else orjson.dumps(v) if q == b"d:j" else str(v).encode())
           for q, v in values.items()}
    try:
        expected: Any = GENERAL(raw)
    except CellDecodeError as exc:
        expected = exc.column
    try:
        [row] = DECODE([(KEY, cells(raw))], "")
        got: Any = row.columns
    except CellDecodeError as exc:
        got = exc.column
    assert got == expected


def test_page_decoder_matches_the_reader_decoder_as_plain_tuples() -> None:
    tally = RouteSpec(name="c", topic="t", table="t", rowkey="[salt(host, 4)][host]",
                      columns={"d:t": {"field": "t"}}, counter={"column": "c:n", "mode": "tally"})
    for route, key in [(ROUTE, KEY), (tally, compile_rowkey(tally.rowkey).build({"host": "h"}))]:
        raw = {b"d:t": b"x", b"d:other": b"\x01", b"c:n:e1": (2).to_bytes(8, "big"), b"c:n:e2": b"3"}
        rows = [(key, cells(raw)), (key, cells({b"d:t": b"y"}))]
        want = decoder(route)(rows, "salt=1")
        for verify in (False, True):
            got = page_decoder(route.model_dump_json(), verify)(rows, "salt=1")
            assert [type(r) for r in got] == [tuple, tuple]
            assert got == [tuple(r) for r in want]
            assert as_read_rows(got) == want and type(as_read_rows(got)[0]) is ReadRow
            assert marshal.loads(marshal.dumps(got)) == got  # the worker's wire form


def test_page_decoder_names_the_bad_row_with_a_picklable_error() -> None:
    decode = page_decoder(ROUTE.model_dump_json(), False)
    bad_key = compile_rowkey(ROUTE.rowkey).build({"host": "web2", "ts": 8})
    rows = [(KEY, cells({b"d:n": (1).to_bytes(8, "big")})), (bad_key, cells({b"d:n": b"\x01"}))]
    with pytest.raises(RowDecodeError) as info:
        decode(rows, "")
    err = pickle.loads(pickle.dumps(info.value))  # it crosses from a worker process
    assert type(err) is RowDecodeError
    assert err.key == bad_key and "'d:n' (long)" in err.detail and str(err) == str(info.value)
    with pytest.raises(RowDecodeError, match="web3"):  # a key that does not fit the layout
        decode([(b"web3", cells({}))], "")


def test_page_decoder_with_the_query_decodes_only_the_rows_it_keeps() -> None:
    rowkey = compile_rowkey(ROUTE.rowkey)
    keys = [rowkey.build({"host": h, "ts": t}) for h in ("web1", "web2") for t in (5, 7, 9)]
    good = {b"d:n": (1).to_bytes(8, "big")}
    rows = [(k, cells(good)) for k in keys]
    plain = page_decoder(ROUTE.model_dump_json(), False)(rows, "all")
    for where, want in [({}, [7, 9, 7, 9]), ({"host": "web2"}, [7, 9])]:  # a filtered plan, an exact one
        query = (tuple(where.items()), (6, 10), "ts")
        matches = rowkey.plan(where, (6, 10), time_field="ts").matches
        got = page_decoder(ROUTE.model_dump_json(), False, query)(rows, "all")
        assert [r[0] for r in got] == keys  # every key comes back, in order
        assert got == [p if matches(p[0]) else (p[0],) for p in plain]
        assert [r[1]["ts"] for r in got if is_decoded(r)] == want
        assert marshal.loads(marshal.dumps(got)) == got
    decode = page_decoder(ROUTE.model_dump_json(), False, ((), (6, 10), "ts"))
    # a row the filter drops is never decoded: a bad cell there does not fail the page
    dropped_bad = [(keys[0], cells({b"d:n": b"\x01"})), *rows[1:]]
    assert [r[0] for r in decode(dropped_bad, "all") if is_decoded(r)] == [keys[1], keys[2], keys[4], keys[5]]
    with pytest.raises(RowDecodeError, match="'d:n' \\(long\\)"):  # one it keeps still names itself
        decode([(keys[4], cells({b"d:n": b"\x01"}))], "all")
    assert decode([(b"web2_\x01", cells(good))], "all") == [(b"web2_\x01",)]  # the filter cannot read it
