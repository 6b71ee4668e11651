"""An in-memory twin of ``HBaseClient.scan_page``/``scan_cells``/``regions`` for fast reader tests, and checks
that it keeps the real client's bound conventions (the integration tests hold the reader to the
real one).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import NamedTuple

import anyio

from connectors.hbase import RegionInfo
from pipeline.errors import HBaseUnavailable

Row = tuple[bytes, dict[bytes, bytes]]


class Cell(NamedTuple):
    """A scanned cell, as :class:`connectors.hbase.Cell` carries it."""

    value: bytes
    timestamp: int = 0


class FakeHBase:
    """Sorted rows in memory. ``fail(start, stop, reverse)`` -> True raises HBaseUnavailable;
    ``hang(start, stop, reverse)`` -> True blocks forever (until cancelled)."""

    def __init__(self, rows: Iterable[Row] = (), *, pool_size: int = 4,
                 splits: Iterable[bytes] = (),
                 fail: Callable[[bytes, bytes, bool], bool] | None = None,
                 hang: Callable[[bytes, bytes, bool], bool] | None = None) -> None:
        self.settings = SimpleNamespace(pool_size=pool_size)
        self.data = dict(rows)
        self.keys = sorted(self.data)
        self.splits = sorted(splits)
        self.fail = fail
        self.hang = hang
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def put(self, key: bytes, cells: dict[bytes, bytes]) -> None:
        if key not in self.data:
            bisect.insort(self.keys, key)
        self.data[key] = cells

    async def scan_cells(self, table: str, *, start: bytes = b"", stop: bytes = b"",
                         prefix: bytes | None = None, limit: int = 1000, reverse: bool = False,
                         columns: object = None, filter: object = None
                         ) -> list[tuple[bytes, dict[bytes, Cell]]]:
        page = await self.scan_page(table, start=start, stop=stop, prefix=prefix, limit=limit,
                                    reverse=reverse, columns=columns, filter=filter)
        return [(k, {q: Cell(v) for q, v in cells.items()}) for k, cells in page]

    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"",
                        prefix: bytes | None = None, limit: int = 1000, reverse: bool = False,
                        columns: object = None, filter: object = None) -> list[Row]:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await anyio.sleep(0)
            if self.fail is not None and self.fail(start, stop, reverse):
                raise HBaseUnavailable("connection reset by peer", table=table)
            if self.hang is not None and self.hang(start, stop, reverse):
                await anyio.sleep_forever()
            if reverse:
                hi = len(self.keys) if not start else bisect.bisect_right(self.keys, start)
                lo = 0 if not stop else bisect.bisect_right(self.keys, stop)
                keys = self.keys[lo:hi][::-1][:limit]
            else:
                lo = bisect.bisect_left(self.keys, start)
                hi = len(self.keys) if not stop else bisect.bisect_left(self.keys, stop)
                keys = self.keys[lo:hi][:limit]
            return [(k, dict(self.data[k])) for k in keys]
        finally:
            self.in_flight -= 1

    async def regions(self, table: str) -> list[RegionInfo]:
        bounds = [b"", *self.splits, b""]
        return [RegionInfo(table, bounds[i], bounds[i + 1], "rs", 16020, i, f"r{i}")
                for i in range(len(bounds) - 1)]


async def test_fake_keeps_the_clients_bounds() -> None:
    hb = FakeHBase([(b"k%02d" % i, {}) for i in range(20)])
    assert [k for k, _ in await hb.scan_page("t", start=b"k05", stop=b"k08")] == [b"k05", b"k06",
                                                                                 b"k07"]
    page = await hb.scan_page("t", start=b"k08", stop=b"k05", reverse=True)
    assert [k for k, _ in page] == [b"k08", b"k07", b"k06"]
    assert [k for k, _ in await hb.scan_page("t", reverse=True, limit=2)] == [b"k19", b"k18"]
    assert len(await hb.scan_page("t", limit=7)) == 7
    assert [(r.start_key, r.end_key) for r in await FakeHBase(splits=[b"m"]).regions("t")] == [
        (b"", b"m"), (b"m", b"")]
