"""An in-memory twin of :class:`connectors.hbase.HBaseClient` (the :class:`pipeline.ports.HBase` port).

It behaves like the gateway where runtime can tell:

- tables with column families and pre-split regions (``[start, end)``, ``b""`` the open ends);
  :meth:`MemoryHBase.split` and :meth:`MemoryHBase.move` change them while writing, as HBase does;
- writes apply puts and deletes at their cell timestamps (a re-delivered put rewrites the same
  version) and increments as 8-byte big-endian counters. Deletes leave markers, as HBase's do until a
  major compaction: a delete of a row, a family or a column at timestamp T hides every version at or
  below T, also of puts that arrive after it (a replayed older put stays hidden), and never one above
  T; a delete of one version (``DELETE_VERSION``) hides exactly that version, then and later; a
  delete without a timestamp takes ``clock()``; a family the table lacks is refused with
  :class:`~pipeline.errors.HBaseRequestError`, a missing table is
  :class:`~pipeline.errors.TableNotFound`, as the real gateway maps them;
- scans keep the real bounds (start inclusive, stop exclusive; reverse from ``start`` down to
  ``stop``), limits and column selection, and return cells with ``value`` and ``timestamp``;
  ``scan_in_process`` applies the page transform in this process (same contract, no pickling);
- failures on demand: :meth:`MemoryHBase.fail_writes` (the next N writes raise an error of your
  choice), a family the table lacks refused for the whole batch or (``per_action``) per mutation,
  ``fail_scan`` / ``hang_scan`` predicates on ``(start, stop, reverse)``;
- it counts calls and concurrent calls, so tests can check fan-out and bounds.

Every call yields to the event loop once, so concurrency is real (tasks interleave), as with threads.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import anyio
import anyio.lowlevel

from pipeline.core.model import Mutation, MutationKind
from pipeline.errors import HBaseError, HBaseRequestError, HBaseUnavailable, TableNotFound
from pipeline.ports import RegionInfo
from pipeline.settings import FamilySpec

__all__ = ["MemoryCell", "MemoryHBase"]

Row = tuple[bytes, dict[bytes, bytes]]
ScanHook = Callable[[bytes, bytes, bool], bool]


class MemoryCell(NamedTuple):
    """A scanned cell, as the real client's ``Cell`` carries it."""

    value: bytes
    timestamp: int = 0


@dataclass
class _Table:
    families: dict[str, FamilySpec]
    splits: list[bytes] = field(default_factory=list)
    servers: dict[bytes, str] = field(default_factory=dict)  # region start key -> "host:port"
    rows: dict[bytes, dict[bytes, dict[int, bytes]]] = field(default_factory=dict)  # row -> col -> ts -> value
    keys: list[bytes] = field(default_factory=list)  # sorted row keys
    generation: int = 1
    #: row -> what a delete named (b"" the row, b"family", b"family:qualifier") -> the highest timestamp
    markers: dict[bytes, dict[bytes, int]] = field(default_factory=dict)
    #: row -> (family or column, timestamp) of each one-version delete
    version_markers: dict[bytes, set[tuple[bytes, int]]] = field(default_factory=dict)

    def masked(self, row: bytes, column: bytes, ts: int) -> bool:
        """Whether a delete marker hides version ``ts`` of ``column`` in ``row``."""
        family = column.partition(b":")[0]
        marks = self.markers.get(row)
        if marks and max(marks.get(b"", -1), marks.get(family, -1), marks.get(column, -1)) >= ts:
            return True
        versions = self.version_markers.get(row)
        return versions is not None and ((column, ts) in versions or (family, ts) in versions)

    def delete(self, m: Mutation, ts: int) -> None:
        """Apply the delete mutation ``m`` at ``ts``: leave its markers, drop what they hide."""
        targets = list(m.cells) or [b""]
        if m.kind is MutationKind.DELETE_VERSION:
            self.version_markers.setdefault(m.row, set()).update((target, ts) for target in targets)
        else:
            marks = self.markers.setdefault(m.row, {})
            for target in targets:
                marks[target] = max(marks.get(target, -1), ts)
        for column, versions in self.rows.get(m.row, {}).items():
            for v in [v for v in versions if self.masked(m.row, column, v)]:
                del versions[v]


class MemoryHBase:
    """Tables in memory. ``clock`` gives the timestamp of cells written without one (ms)."""

    def __init__(self, *, pool_size: int = 4, server: str = "rs-1:16020",
                 fail_scan: ScanHook | None = None, hang_scan: ScanHook | None = None,
                 clock: Callable[[], int] | None = None) -> None:
        self._pool_size = pool_size
        self.server = server
        self.fail_scan = fail_scan
        self.hang_scan = hang_scan
        self.clock = clock or (lambda: 0)
        self._tables: dict[str, _Table] = {}
        self._write_failures: list[HBaseError] = []
        #: refusals per action, as HBase's native Multi answers: the batch's other mutations are applied
        #: and the error names the unapplied ones (``HBaseRequestError.unapplied``); False: as a gateway's
        #: ``putMultiple``, a refused batch writes nothing
        self.per_action = False
        self.calls = 0
        self.writes = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def __repr__(self) -> str:
        return f"MemoryHBase(tables={sorted(self._tables)}, calls={self.calls})"

    @property
    def pool_size(self) -> int:
        return self._pool_size

    def statistics(self) -> dict[str, Any]:
        return {"calls": self.calls, "writes": self.writes, "in_flight": self.in_flight}

    # -- set-up and failures on demand --------------------------------------------------------------

    def add_table(self, name: str, families: Iterable[str] = ("d",), splits: Iterable[bytes] = (),
                  rows: Iterable[Row] = ()) -> None:
        """Create ``name`` at once (no await), optionally with ``rows`` (cells at timestamp 0)."""
        self._tables[name] = _Table({f: FamilySpec() for f in families}, sorted(set(splits)))
        for key, cells in rows:
            self.put(name, key, cells)

    def put(self, table: str, key: bytes, cells: Mapping[bytes, bytes], timestamp: int = 0) -> None:
        """Store cells directly (set-up for scans; no family check)."""
        t = self._table(table)
        if key not in t.rows:
            bisect.insort(t.keys, key)
            t.rows[key] = {}
        for column, value in cells.items():
            t.rows[key].setdefault(column, {})[timestamp] = value

    def fail_writes(self, count: int, error: HBaseError | None = None) -> None:
        """The next ``count`` writes raise ``error`` (default: the gateway unreachable, retryable)."""
        self._write_failures.extend([error or HBaseUnavailable("gateway closed the connection")] * count)

    def split(self, table: str, key: bytes) -> None:
        """Split the region holding ``key`` at ``key`` (a new region map generation)."""
        t = self._table(table)
        if key and key not in t.splits:
            bisect.insort(t.splits, key)
            t.generation += 1

    def move(self, table: str, start_key: bytes, server: str) -> None:
        """Move the region starting at ``start_key`` to ``server`` (``host:port``)."""
        t = self._table(table)
        t.servers[start_key] = server
        t.generation += 1

    # -- inspection --------------------------------------------------------------------------------

    def row(self, table: str, key: bytes) -> dict[bytes, dict[int, bytes]]:
        """Every version of every cell of ``key``: column -> timestamp -> value ({} when absent)."""
        return {c: dict(v) for c, v in self._table(table).rows.get(key, {}).items()}

    def row_count(self, table: str) -> int:
        return len(self._table(table).keys)

    # -- the port ----------------------------------------------------------------------------------

    def _table(self, table: str) -> _Table:
        t = self._tables.get(table)
        if t is None:
            raise TableNotFound(f"table does not exist: {table}", table=table)
        return t

    def _enter(self) -> None:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    async def ping(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def tables(self) -> list[str]:
        await anyio.lowlevel.checkpoint()
        return sorted(self._tables)

    async def table_exists(self, table: str) -> bool:
        await anyio.lowlevel.checkpoint()
        return table in self._tables

    async def families(self, table: str) -> dict[str, int]:
        await anyio.lowlevel.checkpoint()
        return {f: spec.versions for f, spec in self._table(table).families.items()}

    async def create_table(self, table: str, families: Mapping[str, FamilySpec],
                           split_keys: Sequence[bytes] = ()) -> None:
        await anyio.lowlevel.checkpoint()
        if table in self._tables:
            raise HBaseRequestError(f"TableExistsException: {table}", table=table)
        self._tables[table] = _Table(dict(families), sorted(set(split_keys)))

    async def delete_table(self, table: str) -> None:
        await anyio.lowlevel.checkpoint()
        self._table(table)
        del self._tables[table]

    async def regions(self, table: str) -> list[RegionInfo]:
        await anyio.lowlevel.checkpoint()
        t = self._table(table)
        bounds = [b"", *t.splits, b""]
        out = []
        for i in range(len(bounds) - 1):
            host, _, port = t.servers.get(bounds[i], self.server).rpartition(":")
            out.append(RegionInfo(table, bounds[i], bounds[i + 1], host, int(port), t.generation * 1000 + i,
                                    f"{table},{bounds[i]!r},{t.generation}.{i}."))
        return out

    async def write(self, table: str, mutations: Sequence[Mutation], *, server: str | None = None) -> str | None:
        self._enter()
        try:
            await anyio.lowlevel.checkpoint()
            self.writes += 1
            if self._write_failures:
                raise self._write_failures.pop(0)
            t = self._table(table)
            missing = [i for i, m in enumerate(mutations)
                       if any(c.partition(b":")[0].decode() not in t.families for c in m.cells)]
            if missing and not self.per_action:  # checked first: a refused batch writes nothing
                family = next(c.partition(b":")[0].decode() for c in mutations[missing[0]].cells
                              if c.partition(b":")[0].decode() not in t.families)
                raise HBaseRequestError(f"NoSuchColumnFamilyException: {family} in {table}", table=table)
            refused = set(missing)
            for i, m in enumerate(mutations):
                if i in refused:
                    continue
                ts = m.timestamp if m.timestamp is not None else self.clock()
                if m.kind is MutationKind.DELETE or m.kind is MutationKind.DELETE_VERSION:
                    t.delete(m, ts)
                elif m.kind is MutationKind.INCREMENT:
                    column = next(iter(m.cells))
                    versions = t.rows.get(m.row, {}).get(column, {})
                    total = int.from_bytes(versions[max(versions)], "big", signed=True) if versions else 0
                    self.put(table, m.row, {column: (total + m.amount).to_bytes(8, "big", signed=True)}, ts)
                else:
                    self.put(table, m.row, {c: v for c, v in m.cells.items() if not t.masked(m.row, c, ts)}, ts)
            if missing:  # per_action: the others were applied, as a native Multi applies them
                raise HBaseRequestError(f"NoSuchColumnFamilyException: {len(missing)} action(s) in {table}",
                                        table=table, unapplied=tuple(missing))
            return None
        finally:
            self.in_flight -= 1

    def _page(self, table: str, start: bytes, stop: bytes, prefix: bytes | None, limit: int, reverse: bool,
              columns: Sequence[bytes] | None) -> list[tuple[bytes, dict[bytes, MemoryCell]]]:
        t = self._table(table)
        if prefix is not None:
            start, stop = prefix, _after_prefix(prefix)
        keys = t.keys
        if reverse:
            hi = len(keys) if not start else bisect.bisect_right(keys, start)
            lo = 0 if not stop else bisect.bisect_right(keys, stop)
            chosen = keys[lo:hi][::-1]
        else:
            lo = bisect.bisect_left(keys, start)
            hi = len(keys) if not stop else bisect.bisect_left(keys, stop)
            chosen = keys[lo:hi]
        out = []
        for key in chosen:
            cells = {}
            for column, versions in t.rows[key].items():
                if versions and (columns is None or column in columns or column.partition(b":")[0] in columns):
                    ts = max(versions)
                    cells[column] = MemoryCell(versions[ts], ts)
            if cells:
                out.append((key, cells))
                if len(out) >= limit:
                    break
        return out

    async def scan_cells(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                         limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                         filter: str | None = None) -> list[tuple[bytes, dict[bytes, Any]]]:
        if limit <= 0:
            return []
        self._enter()
        try:
            await anyio.lowlevel.checkpoint()
            if self.fail_scan is not None and self.fail_scan(start, stop, reverse):
                raise HBaseUnavailable("connection reset by peer", table=table)
            if self.hang_scan is not None and self.hang_scan(start, stop, reverse):
                await anyio.sleep_forever()
            page = self._page(table, start, stop, prefix, limit, reverse, columns)
            if filter is not None and "KeyOnlyFilter" in filter:
                page = [(k, {c: MemoryCell(b"", cell.timestamp) for c, cell in cells.items()}) for k, cells in page]
            return list(page)
        finally:
            self.in_flight -= 1

    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                        limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                        filter: str | None = None) -> list[Row]:
        page = await self.scan_cells(table, start=start, stop=stop, prefix=prefix, limit=limit, reverse=reverse,
                                     columns=columns, filter=filter)
        return [(k, {c: cell.value for c, cell in cells.items()}) for k, cells in page]

    async def scan_in_process(self, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
                              reverse: bool = False, columns: Sequence[bytes] | None = None,
                              transform: tuple[Callable[..., Any], tuple[Any, ...]], label: str,
                              limiter: anyio.CapacityLimiter) -> Any:
        if limit <= 0:
            raise ValueError("limit must be >= 1")
        async with limiter:
            page = await self.scan_cells(table, start=start, stop=stop, limit=limit, reverse=reverse, columns=columns)
        factory, args = transform
        return factory(*args)(page, label)

    async def warm_scan_processes(self, limiter: anyio.CapacityLimiter) -> None:
        await anyio.lowlevel.checkpoint()


def _after_prefix(prefix: bytes) -> bytes:
    """The smallest key after every key starting with ``prefix`` (b"" when there is none)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b""
