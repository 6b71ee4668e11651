"""The one awaitable doorway to HBase.

Every call runs in a worker thread (``anyio.to_thread.run_sync`` bounded by a ``CapacityLimiter``
the size of the pool) holding one pooled connection, except :meth:`HBaseClient.scan_in_process`,
which runs a scan page in a worker process (:mod:`connectors.hbase.scanprocs`). A connection never
crosses threads and a scan generator never leaves its thread (a page comes back as a list). Every
socket carries the configured timeout, so no call blocks longer than ``timeout_ms`` per round trip.
Errors come out as the project's own types (:mod:`connectors.hbase.errors`).

Two gateways are used:

- Thrift1 through happybase: region lists, gets, scans, counters, table listing.
- Thrift2: writes (``putMultiple``/``deleteMultiple`` carry a timestamp per cell, which Thrift1's
  ``mutateRowsTs`` cannot: it takes one timestamp per call) and DDL with split keys. On the binary
  protocol a ``putMultiple`` call is encoded straight to bytes (:mod:`connectors.hbase.putwire`),
  byte for byte what thriftpy2 would send, without a Thrift object per row and cell.

Bounds: ``start`` is inclusive and ``stop`` exclusive in every scan; ``b""`` means an open end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import happybase
import Hbase_thrift  # the Thrift1 IDL module happybase loads at import

from connectors.hbase.errors import map_exceptions
from connectors.hbase.pool import ConnectionPool
from connectors.hbase.putwire import direct_puts, put_multiple, split_column, tputs
from connectors.hbase.scanprocs import Gateway, PageTransform, scan_page_in_process, warm_worker
from connectors.hbase.scanrows import SMALL_PAGE_ROWS, CellRow, scan_rows, scan_rows2, tscan
from connectors.hbase.thrift2 import load_idl, open_client
from pipeline.core.model import Mutation, MutationKind
from pipeline.errors import HBaseRequestError, TableNotFound
from pipeline.rowkey import format_key
from pipeline.settings import FamilySpec, HBaseSettings

__all__ = ["Cells", "HBaseClient", "RegionInfo", "Row"]

T = TypeVar("T")
Cells = dict[bytes, bytes]
Row = tuple[bytes, Cells]


@dataclass(frozen=True, slots=True)
class RegionInfo:
    """One region of a table: ``[start_key, end_key)``; ``b""`` is the open end on either side.
    ``name`` is HBase's region name (``table,start key,id.encoded.``) in HBase shell escaping, since
    it holds the raw start key: printable in logs and metric labels."""

    table: str
    start_key: bytes
    end_key: bytes
    server: str
    port: int
    region_id: int
    name: str


class HBaseClient:
    """Async HBase access for one gateway host. Use as ``async with HBaseClient(settings) as hb:``."""

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings
        s = settings
        self._prefix = s.table_prefix
        self._t1: ConnectionPool[happybase.Connection] = ConnectionPool(
            s.pool_size,
            lambda: happybase.Connection(s.host, s.port, timeout=s.timeout_ms, transport=s.transport,
                                         protocol=s.protocol, autoconnect=True),
            lambda c: c.close(), name="thrift1")
        self._t2: ConnectionPool[Any] = ConnectionPool(
            s.pool_size,
            lambda: open_client(s.host, s.thrift2_port, s.timeout_ms, framed=s.transport == "framed",
                                compact=s.protocol == "compact"),
            lambda c: c.close(), name="thrift2")
        self._limit1 = anyio.CapacityLimiter(s.pool_size)
        self._limit2 = anyio.CapacityLimiter(s.pool_size)
        # puts are encoded straight to bytes on the binary protocol (connectors.hbase.putwire)
        self._direct_puts = direct_puts(s.protocol)

    def __repr__(self) -> str:
        return f"HBaseClient({self.settings.host}:{self.settings.port}, {self._t1!r}, {self._t2!r})"

    async def __aenter__(self) -> HBaseClient:
        # the Thrift2 IDL is needed by every write: a missing one is a setup error, raised here
        # (ConfigError) rather than at the first write, where it would look like an outage
        await anyio.to_thread.run_sync(load_idl)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._t1.close()
        self._t2.close()

    @property
    def pool_size(self) -> int:
        """Connections per gateway: how many calls usefully run at once."""
        return self.settings.pool_size

    def statistics(self) -> dict[str, Any]:
        return {"thrift1": self._t1.statistics(), "thrift2": self._t2.statistics(),
                "threads_busy": self._limit1.borrowed_tokens + self._limit2.borrowed_tokens}

    def _name(self, table: str) -> str:
        return self._prefix + table

    # -- the doorways ----------------------------------------------------------------------------

    async def call(self, fn: Callable[[happybase.Connection], T], *, table: str | None = None,
                   what: str = "HBase call") -> T:
        """Run ``fn(connection)`` in a worker thread on a pooled Thrift1 (happybase) connection."""
        def run() -> T:
            with map_exceptions(table, what), self._t1.connection(timeout_s=self.settings.timeout_ms / 1000) as conn:
                return fn(conn)
        return await anyio.to_thread.run_sync(run, limiter=self._limit1)

    async def call2(self, fn: Callable[[Any], T], *, table: str | None = None, what: str = "HBase call") -> T:
        """Run ``fn(client)`` in a worker thread on a pooled Thrift2 client."""
        def run() -> T:
            with map_exceptions(table, what), self._t2.connection(timeout_s=self.settings.timeout_ms / 1000) as c:
                return fn(c)
        return await anyio.to_thread.run_sync(run, limiter=self._limit2)

    async def _ddl(self, fn: Callable[[Any, Any], T], table: str, what: str) -> T:
        s = self.settings

        def run() -> T:
            with map_exceptions(table, what):
                client = open_client(s.host, s.thrift2_port, s.ddl_timeout_ms, framed=s.transport == "framed",
                                     compact=s.protocol == "compact")
                try:
                    return fn(client, load_idl())
                finally:
                    client.close()
        return await anyio.to_thread.run_sync(run, limiter=self._limit2)

    # -- DDL (Thrift2) ---------------------------------------------------------------------------

    def _tname(self, idl: Any, table: str) -> Any:
        ns, _, q = self._name(table).rpartition(":")
        return idl.TTableName(ns=(ns or "default").encode(), qualifier=q.encode())

    async def tables(self) -> list[str]:
        names: list[bytes] = await self.call(lambda c: c.tables(), what="list tables")
        out = [n.decode() for n in names]
        return [n[len(self._prefix):] for n in out if n.startswith(self._prefix)]

    async def table_exists(self, table: str) -> bool:
        return await self._ddl(lambda c, idl: bool(c.tableExists(self._tname(idl, table))), table, "tableExists")

    async def create_table(self, table: str, families: Mapping[str, FamilySpec],
                           split_keys: Sequence[bytes] = ()) -> None:
        """Create ``table`` with ``families`` pre-split at ``split_keys`` (sorted, distinct, non-empty)."""
        splits = sorted(set(split_keys))
        if b"" in splits:
            raise HBaseRequestError("a split key cannot be empty", table=table)

        def create(c: Any, idl: Any) -> None:
            cols = []
            for name, spec in families.items():
                fam = idl.TColumnFamilyDescriptor(name=name.encode(), maxVersions=spec.versions,
                                                  inMemory=spec.in_memory)
                if spec.ttl_s is not None:
                    fam.timeToLive = spec.ttl_s
                if spec.compression is not None:
                    fam.compressionType = getattr(idl.TCompressionAlgorithm, spec.compression)
                cols.append(fam)
            desc = idl.TTableDescriptor(tableName=self._tname(idl, table), columns=cols)
            c.createTable(desc, splits or None)
        await self._ddl(create, table, "create table")

    async def delete_table(self, table: str) -> None:
        def drop(c: Any, idl: Any) -> None:
            name = self._tname(idl, table)
            if not c.tableExists(name):
                raise TableNotFound(f"table {table!r} does not exist", table=table)
            if c.isTableEnabled(name):
                c.disableTable(name)
            c.deleteTable(name)
        await self._ddl(drop, table, "delete table")

    async def disable_table(self, table: str) -> None:
        await self._ddl(lambda c, idl: c.disableTable(self._tname(idl, table)), table, "disable table")

    async def enable_table(self, table: str) -> None:
        await self._ddl(lambda c, idl: c.enableTable(self._tname(idl, table)), table, "enable table")

    async def truncate_table(self, table: str, preserve_splits: bool = True) -> None:
        def trunc(c: Any, idl: Any) -> None:
            name = self._tname(idl, table)
            if c.isTableEnabled(name):
                c.disableTable(name)
            c.truncateTable(name, preserve_splits)
        await self._ddl(trunc, table, "truncate table")

    async def families(self, table: str) -> dict[str, int]:
        """Column family name -> max versions."""
        def get(c: happybase.Connection) -> dict[str, int]:
            fams = c.table(self._name(table)).families()
            if not fams:
                raise TableNotFound(f"table {table!r} does not exist", table=table)
            return {k.decode(): int(v.get("max_versions", 1)) for k, v in fams.items()}
        return await self.call(get, table=table, what="describe families")

    async def regions(self, table: str) -> list[RegionInfo]:
        """The table's regions in key order (from the gateway's region locator)."""
        def get(c: happybase.Connection) -> list[RegionInfo]:
            regs = c.table(self._name(table)).regions()
            if not regs:
                raise TableNotFound(f"table {table!r} does not exist or has no regions", table=table)
            out = [RegionInfo(table, r["start_key"], r["end_key"], r["server_name"].decode()
                              if isinstance(r["server_name"], bytes) else str(r["server_name"]),
                              int(r["port"]), int(r["id"]), format_key(r["name"])  # it holds the start key
                              if isinstance(r["name"], bytes) else str(r["name"])) for r in regs]
            return sorted(out, key=lambda r: r.start_key)
        return await self.call(get, table=table, what="list regions")

    # -- writes ----------------------------------------------------------------------------------

    async def write(self, table: str, mutations: Sequence[Mutation]) -> None:
        """Apply ``mutations`` (one table) in as few round trips as possible: puts in one
        ``putMultiple``, deletes in one ``deleteMultiple``, increments in one ``incrementRows``
        call. Raises on any failure; a retry re-applies puts/deletes
        idempotently when they carry timestamps (increments are not idempotent)."""
        name = self._name(table).encode()
        puts = [m for m in mutations if m.kind is MutationKind.PUT]
        dels = [m for m in mutations if m.kind is MutationKind.DELETE]
        incs = [m for m in mutations if m.kind is MutationKind.INCREMENT]
        if puts or dels:
            def send(c: Any) -> None:
                idl = load_idl()
                if puts and self._direct_puts:
                    put_multiple(c, name, puts)
                elif puts:
                    c.putMultiple(name, tputs(idl, puts))
                if dels:
                    tdels = []
                    for m in dels:
                        cols = [idl.TColumn(*split_column(col)) for col in m.cells] or None
                        tdels.append(idl.TDelete(row=m.row, columns=cols, timestamp=m.timestamp))
                    failed = c.deleteMultiple(name, tdels)
                    if failed:
                        raise HBaseRequestError(f"{len(failed)} deletes were not applied", table=table)
            await self.call2(send, table=table, what="write batch")
        if incs:
            def increment(c: happybase.Connection) -> None:
                # one incrementRows round trip for the whole batch (happybase only exposes single ones)
                c.client.incrementRows([Hbase_thrift.TIncrement(table=name, row=m.row, column=next(iter(m.cells)),
                                                                ammount=m.amount) for m in incs])
            await self.call(increment, table=table, what="increment batch")

    async def put(self, table: str, row: bytes, cells: Mapping[bytes, bytes], timestamp: int | None = None) -> None:
        def put(c: happybase.Connection) -> None:
            c.table(self._name(table)).put(row, dict(cells), timestamp=timestamp)
        await self.call(put, table=table, what="put")

    async def delete(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> None:
        await self.call(lambda c: c.table(self._name(table)).delete(row, columns=columns), table=table,
                        what="delete")

    async def increment(self, table: str, row: bytes, column: bytes, amount: int = 1) -> int:
        """Atomically add ``amount`` to the 8-byte big-endian counter at ``column``; returns the new value."""
        return await self.call(lambda c: int(c.table(self._name(table)).counter_inc(row, column, amount)),
                               table=table, what="increment")

    async def counter(self, table: str, row: bytes, column: bytes) -> int:
        return await self.call(lambda c: int(c.table(self._name(table)).counter_get(row, column)),
                               table=table, what="counter get")

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None,
                  *, include_timestamp: bool = False) -> dict[bytes, Any]:
        def get(c: happybase.Connection) -> dict[bytes, Any]:
            return dict(c.table(self._name(table)).row(row, columns=columns, include_timestamp=include_timestamp))
        return await self.call(get, table=table, what="get")

    async def cell_versions(self, table: str, row: bytes, column: bytes, versions: int = 10) -> list[tuple[bytes, int]]:
        """Every stored version of one cell, newest first, as (value, timestamp)."""
        def get(c: happybase.Connection) -> list[tuple[bytes, int]]:
            return [(v, int(ts)) for v, ts in c.table(self._name(table)).cells(
                row, column, versions=versions, include_timestamp=True)]
        return await self.call(get, table=table, what="get versions")

    async def rows(self, table: str, rows: Sequence[bytes], columns: Sequence[bytes] | None = None) -> list[Row]:
        def get(c: happybase.Connection) -> list[Row]:
            return [(k, dict(v)) for k, v in c.table(self._name(table)).rows(list(rows), columns=columns)]
        return await self.call(get, table=table, what="get rows")

    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                        limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                        filter: str | None = None) -> list[Row]:
        """At most ``limit`` rows of ``[start, stop)`` (or of ``prefix``), in key order (descending
        when ``reverse``; then ``start`` is the upper, inclusive bound and ``stop`` the lower,
        exclusive one, as in HBase), each as ``(key, {b"family:qualifier": value})``. The scanner is
        opened and closed inside the worker thread."""
        rows = await self.scan_cells(table, start=start, stop=stop, prefix=prefix, limit=limit, reverse=reverse,
                                     columns=columns, filter=filter)
        return [(k, {q: cell.value for q, cell in cells.items()}) for k, cells in rows]

    async def scan_cells(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                         limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                         filter: str | None = None) -> list[CellRow]:
        """:meth:`scan_page` with each row's cells as :class:`~connectors.hbase.scanrows.Cell` objects
        (``value``, ``timestamp``) straight from the Thrift reply: the reader's path, which skips
        building a second dict per row. A page of at most ``SMALL_PAGE_ROWS`` rows is one Thrift2
        call, a bigger one goes through Thrift1 (:mod:`connectors.hbase.scanrows`)."""
        if limit <= 0:
            return []
        scan = tscan(start, stop, prefix, limit, reverse, columns, filter)
        name = self._name(table).encode()
        if limit <= SMALL_PAGE_ROWS:
            idl = load_idl()
            return await self.call2(
                lambda c: scan_rows2(c, idl, name, scan.startRow or b"", scan.stopRow or b"", limit, reverse,
                                     columns, filter), table=table, what="scan")
        return await self.call(lambda c: scan_rows(c, name, scan, limit), table=table, what="scan")

    async def scan_in_process(self, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
                              reverse: bool = False, columns: Sequence[bytes] | None = None,
                              transform: PageTransform, label: str, limiter: anyio.CapacityLimiter) -> Any:
        """:meth:`scan_cells`' page passed through ``transform`` in a worker process, at most
        ``limiter``'s tokens of workers at once (contract: :mod:`connectors.hbase.scanprocs`)."""
        if limit <= 0:
            raise ValueError("limit must be >= 1")
        return await scan_page_in_process(Gateway.of(self.settings), self._name(table).encode(), table,
                                          start=start, stop=stop, limit=limit, reverse=reverse,
                                          columns=columns, transform=transform, label=label, limiter=limiter)

    async def warm_scan_processes(self, limiter: anyio.CapacityLimiter) -> None:
        """Start ``limiter``'s tokens of scan worker processes at once, each with its connection open
        (a query's first pages then do not wait for process start-up)."""
        gw = Gateway.of(self.settings)
        async with anyio.create_task_group() as tg:
            for _ in range(int(limiter.total_tokens)):
                tg.start_soon(warm_worker, gw, limiter)

    async def count(self, table: str) -> int:
        """Rows in the table, by a key-only scan (for tests and small tables)."""
        def count(c: happybase.Connection) -> int:
            return sum(1 for _ in c.table(self._name(table)).scan(
                filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()", batch_size=5000))
        return await self.call(count, table=table, what="count")


