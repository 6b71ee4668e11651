"""The compiled forms of the Multi path's per-row work against their references, on any input:
``_multiwire.c``'s ``group`` (a batch's rows by cached region) against ``group_python``, and its
``decode_ok`` (an all-successful MultiResponse) against ``decode_ok_python``, i.e. the Python reader; and the
answer of a Multi read the same way by both paths (``multi_failures``), an unanswered action refused."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.hbase.native import multi, regions
from connectors.hbase.native.messages import decode_multi_response
from connectors.hbase.native.multi import decode_ok_python, failures_of, multi_failures
from connectors.hbase.native.regions import Region, RegionCache, group_python
from connectors.hbase.native.wire import varint
from tests.budget import examples

needs_compiled = pytest.mark.skipif(regions.COMPILED_GROUP is None or not multi.COMPILED,
                                    reason="_multiwire is not in use (not built, or HBASE_INGEST_PURE_PYTHON=1)")


@dataclass(frozen=True)
class _Row:
    row: object


keys = st.binary(max_size=4)


@st.composite
def cached(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    """A table's cached regions: sorted distinct starts, each end the next start, an earlier key (a hole
    after it) or open."""
    starts = sorted(set(draw(st.lists(keys, max_size=6))))
    ends = []
    for k, start in enumerate(starts):
        following = starts[k + 1] if k + 1 < len(starts) else b""
        ends.append(draw(st.sampled_from([following, b"", start + b"\x00", start]))
                    if following else draw(st.sampled_from([b"", start + b"\x80"])))
    return starts, ends


@needs_compiled
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=cached(), rows=st.lists(st.one_of(keys, keys, st.just("not bytes")), max_size=12), data=st.data())
def test_group_is_group_python_on_any_input(table: tuple[list[bytes], list[bytes]], rows: list[object],
                                            data: st.DataObject) -> None:
    starts, ends = table
    batch: list[Any] = [_Row(r) for r in rows]
    pending = data.draw(st.lists(st.integers(-1, len(rows)), max_size=14))
    assert regions.COMPILED_GROUP is not None
    try:
        expected: object = group_python(starts, ends, batch, pending)
    except Exception as e:  # the error's type is the answer compared
        expected = type(e)
    try:
        got: object = regions.COMPILED_GROUP(starts, ends, batch, pending)
    except Exception as e:
        got = type(e)
    if got is None:  # not sure: the Python path answers, which must be where a row is not bytes
        assert any(not isinstance(batch[i].row, bytes) for i in pending if 0 <= i < len(batch))
    else:
        assert got == expected
    if isinstance(expected, tuple):  # what locate finds, row by row
        found, holes = expected
        for k, positions in found.items():
            for i in positions:
                row = batch[i].row
                assert isinstance(row, bytes) and bisect.bisect_right(starts, row) - 1 == k
                assert starts[k] <= row and (not ends[k] or row < ends[k])
        assert sorted([*holes, *(i for p in found.values() for i in p)]) == sorted(pending)


def test_the_cache_groups_rows_as_locate_finds_them() -> None:
    cache = RegionCache()
    for start, end, host in ((b"", b"g", "a"), (b"g", b"p", "b"), (b"r", b"", "a")):  # a hole [p, r)
        cache.put(Region(b"t," + start + b",1", "t", start, end, 1, host, 16020))
    batch = [_Row(r) for r in (b"z", b"a", b"q", b"h", b"b", b"r")]
    found, holes = cache.group("t", batch, range(6))  # type: ignore[arg-type]
    assert [(r.start_key, p) for r, p in found] == [(b"r", [0, 5]), (b"", [1, 4]), (b"g", [3])]
    assert holes == [2]
    assert all(cache.locate("t", batch[i].row) is r for r, p in found for i in p)  # type: ignore[arg-type]
    assert cache.group("unknown", batch, [0, 1]) == ([], [0, 1])  # type: ignore[arg-type]


# -- MultiResponse ------------------------------------------------------------------------------------


def _field(key: int, body: bytes) -> bytes:
    return bytes((key,)) + varint(len(body)) + body


def _roe(index: int | None, *, exception: bool = False, stats: bool = False) -> bytes:
    body = (b"" if index is None else b"\x08" + varint(index)) + _field(0x12, b"")
    if exception:
        body += _field(0x1a, _field(0x0a, b"org.apache.hadoop.hbase.NotServingRegionException") + _field(0x12, b"x"))
    if stats:
        body += _field(0x2a, b"\x08\x01")
    return _field(0x0a, body)


@st.composite
def responses(draw: st.DrawFn, damaged: bool = True) -> bytes:
    """MultiResponses as servers send them, now and then with an exception, a whole-region failure, extra
    fields, and (``damaged``) bytes cut or flipped."""
    out = b""
    for _ in range(draw(st.integers(0, 3))):
        rar = b"".join(_roe(draw(st.one_of(st.integers(1, 300), st.none())),
                            exception=draw(st.integers(0, 9)) == 0, stats=draw(st.booleans()))
                       for _ in range(draw(st.integers(0, 5))))
        if draw(st.integers(0, 9)) == 0:
            rar += _field(0x12, _field(0x0a, b"org.apache.hadoop.hbase.RegionTooBusyException"))
        if draw(st.booleans()):
            rar += b"\x18\x01"  # processed (an atomic action's), a varint
        out += _field(0x0a, rar)
    if draw(st.booleans()):
        out += b"\x12" + _field(0x08, b"\x01")[1:]  # field 2 (processed): skipped
    if damaged and out and draw(st.integers(0, 3)) == 0:
        cut = draw(st.integers(0, len(out) - 1))
        out = out[:cut] + (bytes((draw(st.integers(0, 255)),)) if draw(st.booleans()) else b"") + out[cut + 1:]
    return out


@needs_compiled
@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buf=st.one_of(responses(), st.binary(max_size=40)), intact=responses(damaged=False))
def test_decode_ok_is_the_python_reader_on_any_input(buf: bytes, intact: bytes) -> None:
    assert multi._COMPILED_DECODE_OK is not None
    got = multi._COMPILED_DECODE_OK(buf)
    assert got is None or got == decode_ok_python(buf)  # None: not sure, the Python reader answers
    expected = decode_ok_python(intact)
    if expected is not None:  # an answer as servers send it, every action a success: read by the compiled form
        assert multi._COMPILED_DECODE_OK(intact) == expected


def test_a_multi_answer_is_read_the_same_by_both_paths_and_an_unanswered_action_is_refused() -> None:
    a, b = (Region(b"t,%c,1" % c, "t", b"", b"", 1, "h", 1) for c in b"ab")
    groups = [(a, [4, 0]), (b, [2])]
    plain = _field(0x0a, _roe(5) + _roe(1)) + _field(0x0a, _roe(3, stats=True))
    assert multi_failures(groups, plain) == [] == failures_of(groups, decode_multi_response(plain))
    swapped = _field(0x0a, _roe(1) + _roe(5)) + _field(0x0a, _roe(3))  # in reverse, as region servers answer
    assert multi_failures(groups, swapped) == []
    twice = _field(0x0a, _roe(5) + _roe(5)) + _field(0x0a, _roe(3))  # index 1 unanswered, 5 twice
    with pytest.raises(ValueError, match=r"left 1 action\(s\) of region b't,a,1' unanswered"):
        multi_failures(groups, twice)
    failed = _field(0x0a, _roe(5) + _roe(1, exception=True)) + _field(0x0a, _roe(3))
    assert [(f.index, f.region) for f in multi_failures(groups, failed)] == [(0, a.name)]
    missing = _field(0x0a, _roe(5)) + _field(0x0a, _roe(3))
    with pytest.raises(ValueError, match=r"left 1 action\(s\) of region b't,a,1' unanswered \(indexes \[1\]"):
        multi_failures(groups, missing)
    stranger = _field(0x0a, _roe(5) + _roe(1) + _roe(9)) + _field(0x0a, _roe(3))
    with pytest.raises(ValueError, match=r"with indexes \[9\] it was not sent"):
        multi_failures(groups, stranger)
