"""The reader's hot path: the batch merge equals the per-row heap merge, rows are decoded with the
unverified generated decoder, and ``verify_keys`` restores the full check."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.merge import Row, merge_batches, merge_pieces
from pipeline.runtime.read.reader import QueryError, Reader
from pipeline.settings import RouteSpec

from .test_reader_fake import FakeHBase

SPEC = "[salt(host, 4)][host][_][reverse_ts(ts)]"
ROUTE = RouteSpec(name="r", topic="t", table="t", rowkey=SPEC,
                  columns={"d:v": {"field": "v", "encoding": "long"}, "d:h": "host"})
ROWKEY = compile_rowkey(SPEC)


def _lead(key: bytes) -> bytes:
    return key[1:]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.binary(min_size=1, max_size=3), max_size=12), min_size=1, max_size=5),
    st.integers(1, 5),
    st.booleans(),
)
def test_merge_batches_equals_the_per_row_merge(ranges: list[list[bytes]], page: int,
                                                descending: bool) -> None:
    # range i holds keys b"<i>" + x, sorted by x in the merge direction; duplicates across ranges
    # (ties) must come out by range index, in arrival order within a range
    sources = [sorted((bytes((i,)) + x for x in xs), key=_lead, reverse=descending)
               for i, xs in enumerate(ranges)]
    rows = [[(k, {b"n": b"%d" % j}) for j, k in enumerate(src)] for src in sources]
    pages = [[r[p:p + page] for p in range(0, len(r), page)] for r in rows]

    async def receive(i: int) -> list[Row] | None:
        return pages[i].pop(0) if pages[i] else None

    async def run() -> list[tuple[int, Row]]:
        out: list[tuple[int, Row]] = []
        async for pieces in merge_batches(len(rows), receive, _lead, descending):
            assert pieces and all(chunk for _, chunk in pieces)
            tagged = [[(i, row) for row in chunk] for i, chunk in pieces]
            out.extend(merge_pieces(tagged, lambda t: _lead(t[1][0]), descending))
        return out

    got = anyio.run(run)
    indexed = [(i, j, row) for i, r in enumerate(rows) for j, row in enumerate(r)]
    if descending:
        # descending by key; ties ascending by (range, position): two stable sorts
        indexed.sort(key=lambda t: (t[0], t[1]))
        indexed.sort(key=lambda t: _lead(t[2][0]), reverse=True)
    else:
        indexed.sort(key=lambda t: (_lead(t[2][0]), t[0], t[1]))
    assert got == [(i, row) for i, _, row in indexed]


def _rows(n_hosts: int, per_host: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return [(ROWKEY.build({"host": f"h{h}", "ts": t}),
             {b"d:v": (h * 1000 + t).to_bytes(8, "big"), b"d:h": f"h{h}".encode()})
            for h in range(n_hosts) for t in range(per_host)]


async def test_rows_decode_like_the_verified_decoder() -> None:
    rows = _rows(30, 20)
    async with Reader(FakeHBase(rows), page_size=50, first_page=7) as reader:
        got = await reader.scan(ROUTE).collect()
    assert len(got) == len(rows)
    assert [r.key for r in got] == sorted((k for k, _ in rows), key=ROWKEY.sort_key)
    for row in got:
        assert row.fields == ROWKEY.decode(row.key)
        assert row.columns == {"d:v": int.from_bytes(dict(rows)[row.key][b"d:v"], "big"),
                               "d:h": row.fields["host"]}


@pytest.mark.parametrize("verify", [False, True])
async def test_verify_keys_checks_the_salt_of_every_row(verify: bool) -> None:
    rows = _rows(5, 3)
    good = ROWKEY.build({"host": "zz", "ts": 1})
    foreign = bytes(((good[0] + 1) % 4,)) + good[1:]  # a key this design would not build
    rows.append((foreign, {b"d:h": b"zz"}))
    async with Reader(FakeHBase(rows), verify_keys=verify) as reader:
        scan = reader.scan(ROUTE)
        if not verify:
            got: list[Any] = await scan.collect()
            assert [r.fields for r in got if r.key == foreign] == [{"host": "zz", "ts": 1}]
            return
        with pytest.raises(QueryError, match=r"does not decode.*salt") as info:
            await scan.collect()
    assert info.value.range_label is not None
