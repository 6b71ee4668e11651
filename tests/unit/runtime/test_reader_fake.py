"""The reader tests' twin: :class:`connectors.memory.MemoryHBase` holding one table that every table
name reaches, with ``scan_cells`` built on ``scan_page`` (so a test can watch every page asked for),
and checks that it keeps the real client's bound conventions (the integration tests hold the reader
to the real one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from connectors.memory import MemoryCell, MemoryHBase
from connectors.memory.hbase import _Table

Row = tuple[bytes, dict[bytes, bytes]]
Cell = MemoryCell
TABLE = "t"


class FakeHBase(MemoryHBase):
    """Sorted rows of one table in memory. ``fail(start, stop, reverse)`` -> True raises
    HBaseUnavailable; ``hang(start, stop, reverse)`` -> True blocks until cancelled."""

    def __init__(self, rows: Iterable[Row] = (), *, pool_size: int = 4, splits: Iterable[bytes] = (),
                 fail: Callable[[bytes, bytes, bool], bool] | None = None,
                 hang: Callable[[bytes, bytes, bool], bool] | None = None) -> None:
        super().__init__(pool_size=pool_size, fail_scan=fail, hang_scan=hang)
        self.add_table(TABLE, splits=splits, rows=rows)

    def _table(self, table: str) -> _Table:
        return super()._table(TABLE)

    @property
    def keys(self) -> list[bytes]:
        return self._table(TABLE).keys

    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"",
                        prefix: bytes | None = None, limit: int = 1000, reverse: bool = False,
                        columns: Sequence[bytes] | None = None, filter: str | None = None) -> list[Row]:
        page = await super().scan_cells(table, start=start, stop=stop, prefix=prefix, limit=limit,
                                        reverse=reverse, columns=columns, filter=filter)
        return [(k, {c: cell.value for c, cell in cells.items()}) for k, cells in page]

    async def scan_cells(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                         limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                         filter: str | None = None) -> list[tuple[bytes, dict[bytes, Any]]]:
        page = await self.scan_page(table, start=start, stop=stop, prefix=prefix, limit=limit, reverse=reverse,
                                    columns=columns, filter=filter)
        return [(k, {c: Cell(v) for c, v in cells.items()}) for k, cells in page]


async def test_fake_keeps_the_clients_bounds() -> None:
    hb = FakeHBase([(b"k%02d" % i, {b"d:v": b"%d" % i}) for i in range(20)])
    assert [k for k, _ in await hb.scan_page("t", start=b"k05", stop=b"k08")] == [b"k05", b"k06",
                                                                                 b"k07"]
    page = await hb.scan_page("t", start=b"k08", stop=b"k05", reverse=True)
    assert [k for k, _ in page] == [b"k08", b"k07", b"k06"]
    assert [k for k, _ in await hb.scan_page("t", reverse=True, limit=2)] == [b"k19", b"k18"]
    assert len(await hb.scan_page("t", limit=7)) == 7
    assert [(r.start_key, r.end_key) for r in await FakeHBase(splits=[b"m"]).regions("t")] == [
        (b"", b"m"), (b"m", b"")]
