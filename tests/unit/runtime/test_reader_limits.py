"""Limited queries in logical order: pages are capped at a range's even share of the limit, so
read-ahead stays near what the merge can use, and a range holding most of the output still gets
there in a bounded number of round trips. The rows are the brute-force answer either way."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.rowkey import compile_rowkey
from pipeline.runtime.read.reader import Reader
from pipeline.settings import RouteSpec

from .test_reader_fake import FakeHBase, Row

SPEC = "[salt(host, 8)][host][_][long(ts)]"
ROUTE = RouteSpec(name="r", topic="t", table="t", rowkey=SPEC, columns={"d:h": "host"})
ROWKEY = compile_rowkey(SPEC)


class AskingHBase(FakeHBase):
    """Records the limit of every page asked for, by salt byte."""

    def __init__(self, rows: list[Row]) -> None:
        super().__init__(rows)
        self.asked: dict[int, list[int]] = {}

    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"",
                        prefix: bytes | None = None, limit: int = 1000, reverse: bool = False,
                        columns: Sequence[bytes] | None = None, filter: str | None = None) -> list[Row]:
        self.asked.setdefault(start[0], []).append(limit)
        return await super().scan_page(table, start=start, stop=stop, prefix=prefix, limit=limit,
                                       reverse=reverse, columns=columns, filter=filter)


def _rows(hosts: list[str], per_host: int) -> list[Row]:
    return [(ROWKEY.build({"host": h, "ts": t}), {b"d:h": h.encode()}) for h in hosts for t in range(per_host)]


def _first(rows: list[Row], limit: int) -> list[bytes]:
    return sorted((k for k, _ in rows), key=ROWKEY.sort_key_fn)[:limit]


async def test_pages_of_a_limited_query_stay_near_each_ranges_share() -> None:
    rows = _rows([f"h{i:03d}" for i in range(80)], 40)  # 3,200 rows, spread over the 8 salts
    hb = AskingHBase(rows)
    async with Reader(hb, page_size=1000, first_page=10) as reader:
        scan = reader.scan(ROUTE, limit=400)
        got = [r.key for r in await scan.collect()]
    assert got == _first(rows, 400)
    assert len(hb.asked) == 8
    asked = [n for pages in hb.asked.values() for n in pages]
    assert max(asked) == 50  # 400 / 8: without the cap the pages grow 10, 40, 160, 640
    assert scan.stats.rows_scanned <= 400 + 8 * 2 * 50  # at most two shares per range past the output


async def test_a_range_holding_the_whole_output_takes_a_bounded_number_of_pages() -> None:
    rows = _rows(["only"], 2000)  # every row under one salt; the other ranges are empty
    hb = AskingHBase(rows)
    salt = rows[0][0][0]
    async with Reader(hb, page_size=1000, first_page=10) as reader:
        got = [r.key for r in await reader.scan(ROUTE, limit=400).collect()]
    assert got == _first(rows, 400)
    assert hb.asked[salt][:3] == [10, 40, 50]
    assert sum(hb.asked[salt]) == 400  # the limit pushed down: never more than it
    assert len(hb.asked[salt]) <= 2 + 400 // 50  # the ramp, then one page per share


async def test_without_a_limit_pages_grow_to_the_page_size() -> None:
    rows = _rows([f"h{i:03d}" for i in range(80)], 40)
    hb = AskingHBase(rows)
    async with Reader(hb, page_size=1000, first_page=10) as reader:
        got = [r.key for r in await reader.scan(ROUTE).collect()]
    assert got == _first(rows, len(rows))
    assert max(n for pages in hb.asked.values() for n in pages) == 640
