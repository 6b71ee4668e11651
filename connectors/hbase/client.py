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

Several gateways (``[hbase] gateways``): each has its own connection pools and limiters; a call
goes to a healthy gateway chosen by :class:`~connectors.hbase.gateways.GatewayBoard` (least busy,
round-robin on ties; a write whose region server is named goes to the gateway declared to sit with
it). A call that fails with a connection-level error
(:func:`~connectors.hbase.errors.is_gateway_failure`) takes its gateway down at once (its idle
connections are closed) and is retried once, inside the same method call, on another healthy
gateway when that is safe: reads, scans, puts and deletes (they carry timestamps) always, anything
else (increments, DDL) only when the failure came before the request could be sent (the connection
did not open). A stale connection (:func:`~connectors.hbase.errors.is_stale_connection`: a pooled socket
found closed or reset) first gets the same rule on its own gateway: the gateway's idle connections are
closed and the call tried once more there, on a new one, before the gateway is taken down. A
:class:`~connectors.hbase.probe.Prober` thread probes a down gateway every
``probe_interval_ms`` and takes it back in when it answers. When no gateway is up, a call raises
:class:`~pipeline.errors.HBaseUnavailable` at once (the callers' backoff waits).

Bounds: ``start`` is inclusive and ``stop`` exclusive in every scan; ``b""`` means an open end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import happybase
import Hbase_thrift  # the Thrift1 IDL module happybase loads at import
import structlog

from connectors.hbase.doorway import GatewayCalls, _Endpoint, _Sent
from connectors.hbase.putwire import put_multiple, split_column, tputs
from connectors.hbase.scanprocs import PageTransform, scan_page_in_process, warm_worker
from connectors.hbase.scanrows import SMALL_PAGE_ROWS, CellRow, scan_bounds, scan_cell, scan_rows, scan_rows2, tscan
from connectors.hbase.thrift2 import load_idl
from pipeline.core.model import Mutation, MutationKind
from pipeline.errors import HBaseRequestError, TableNotFound
from pipeline.ports import RegionInfo
from pipeline.rowkey import format_key
from pipeline.settings import FamilySpec

__all__ = ["Cells", "HBaseClient", "RegionInfo", "Row"]

T = TypeVar("T")
Cells = dict[bytes, bytes]
Row = tuple[bytes, Cells]

log = structlog.get_logger("hbase_ingest.hbase")
_KIND = attrgetter("kind")
_ONLY_PUTS = {MutationKind.PUT}
_DELETES = (MutationKind.DELETE, MutationKind.DELETE_VERSION)


def tdeletes(idl: Any, m: Mutation) -> list[Any]:
    """The Thrift2 ``TDelete`` objects of one delete mutation (:class:`~pipeline.core.model.Mutation`'s
    contract). Thrift2 reads a timestamp per ``TColumn`` (its ``TDelete`` timestamp only when no
    column is given) and one delete type per ``TDelete``, so columns and whole families go in
    separate ones: columns as ``DELETE_COLUMNS`` (``DELETE_COLUMN``: the one version), families as
    ``DELETE_FAMILY`` (``DELETE_FAMILY_VERSION``)."""
    ts = m.timestamp
    if not m.cells:
        return [idl.TDelete(row=m.row, timestamp=ts)]
    one = m.kind is MutationKind.DELETE_VERSION
    kinds = idl.TDeleteType
    columns = [idl.TColumn(*split_column(c), ts) for c in m.cells if b":" in c]
    families = [idl.TColumn(family=c, timestamp=ts) for c in m.cells if b":" not in c]
    out = []
    if columns:
        out.append(idl.TDelete(row=m.row, columns=columns, timestamp=ts,
                               deleteType=kinds.DELETE_COLUMN if one else kinds.DELETE_COLUMNS))
    if families:
        out.append(idl.TDelete(row=m.row, columns=families, timestamp=ts,
                               deleteType=kinds.DELETE_FAMILY_VERSION if one else kinds.DELETE_FAMILY))
    return out


class HBaseClient(GatewayCalls):
    """Async HBase access over one or several gateways (module docstring). Use as
    ``async with HBaseClient(settings) as hb:``."""

    # -- DDL (Thrift2) ---------------------------------------------------------------------------

    def _tname(self, idl: Any, table: str) -> Any:
        ns, _, q = self._name(table).rpartition(":")
        return idl.TTableName(ns=(ns or "default").encode(), qualifier=q.encode())

    async def ping(self) -> None:
        """One round trip on the way writes go, for readiness: with ``client = "native"`` a read of
        ``hbase:meta`` over HBase's RPC (:meth:`~connectors.hbase.native.NativeClient.ping`: the writes
        locate regions there and need no gateway), else the gateways' table list."""
        if self._native is not None:
            await self._native.ping()
        else:
            await self.tables()

    async def tables(self) -> list[str]:
        names: list[bytes] = await self.call(lambda c: c.tables(), what="list tables", idempotent=True)
        out = [n.decode() for n in names]
        return [n[len(self._prefix):] for n in out if n.startswith(self._prefix)]

    async def table_exists(self, table: str) -> bool:
        return await self._ddl(lambda c, idl: bool(c.tableExists(self._tname(idl, table))), table, "tableExists",
                               idempotent=True)

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
        return await self.call(get, table=table, what="describe families", idempotent=True)

    async def regions(self, table: str) -> list[RegionInfo]:
        """The table's regions in key order (from the gateway's region locator; with ``client = "native"``
        from ``hbase:meta`` read over HBase's RPC, which the native writes then route by)."""
        if self._native is not None:
            return [RegionInfo(table, r.start_key, r.end_key, r.host, r.port, r.region_id, format_key(r.name))
                    for r in await self._native.regions(table, refresh=True)]
        def get(c: happybase.Connection) -> list[RegionInfo]:
            regs = c.table(self._name(table)).regions()
            if not regs:
                raise TableNotFound(f"table {table!r} does not exist or has no regions", table=table)
            out = [RegionInfo(table, r["start_key"], r["end_key"], r["server_name"].decode()
                              if isinstance(r["server_name"], bytes) else str(r["server_name"]),
                              int(r["port"]), int(r["id"]), format_key(r["name"])  # it holds the start key
                              if isinstance(r["name"], bytes) else str(r["name"])) for r in regs]
            return sorted(out, key=lambda r: r.start_key)
        return await self.call(get, table=table, what="list regions", idempotent=True)

    # -- writes ----------------------------------------------------------------------------------

    async def write(self, table: str, mutations: Sequence[Mutation], server: str | None = None) -> str | None:
        """Apply ``mutations`` (one table) in as few round trips as possible: puts in one
        ``putMultiple``, deletes in one ``deleteMultiple``, increments in one ``incrementRows``
        call. ``server`` (``host:port``, optional): the region server the rows live on; the call
        goes to the gateway declared to sit with it when that one is up. Raises on any failure; a
        retry re-applies puts/deletes idempotently when they carry timestamps, and puts and deletes
        are retried on another gateway after a connection-level failure; increments are not
        idempotent and are retried elsewhere only when they cannot have been sent. Returns the name
        of the gateway whose reply acknowledged the puts and deletes (None for increments only).

        With ``client = "native"`` every mutation goes in one ``Multi`` per region server instead
        (:class:`~connectors.hbase.native.NativeClient`: it retries only the failed actions, after
        re-reading the table's regions when they moved; increments carry nonces, so a retry does not
        count twice) and None is returned."""
        if self._native is not None:
            await self._native.write(table, mutations)
            return None
        name = self._name(table).encode()
        served: list[str] = []
        puts: Sequence[Mutation]
        dels: Sequence[Mutation] = ()
        incs: Sequence[Mutation] = ()
        if set(map(_KIND, mutations)) == _ONLY_PUTS:  # a worker's batch, but for deletes and counters: one pass
            puts = mutations
        else:
            puts = [m for m in mutations if m.kind is MutationKind.PUT]
            dels = [m for m in mutations if m.kind in _DELETES]
            incs = [m for m in mutations if m.kind is MutationKind.INCREMENT]
        if puts or dels:
            def send(c: Any) -> None:
                idl = load_idl()
                expiring = [m for m in puts if m.ttl is not None] if self._direct_puts else ()
                if expiring:  # the direct encoder writes no attributes: those go the thriftpy2 way
                    c.putMultiple(name, tputs(idl, expiring))
                    plain = [m for m in puts if m.ttl is None]
                    if plain:
                        put_multiple(c, name, plain)
                elif puts and self._direct_puts:
                    put_multiple(c, name, puts)
                elif puts:
                    c.putMultiple(name, tputs(idl, puts))
                if dels:
                    tdels = [t for m in dels for t in tdeletes(idl, m)]
                    failed = c.deleteMultiple(name, tdels)
                    if failed:
                        raise HBaseRequestError(f"{len(failed)} deletes were not applied", table=table)
            await self.call2(send, table=table, what="write batch", idempotent=True, server=server, served=served)
        if incs:
            def increment(c: happybase.Connection) -> None:
                # one incrementRows round trip for the whole batch (happybase only exposes single ones)
                c.client.incrementRows([Hbase_thrift.TIncrement(table=name, row=m.row, column=next(iter(m.cells)),
                                                                ammount=m.amount) for m in incs])
            await self.call(increment, table=table, what="increment batch", server=server)
        return served[0] if served else None

    async def put(self, table: str, row: bytes, cells: Mapping[bytes, bytes], timestamp: int | None = None) -> None:
        def put(c: happybase.Connection) -> None:
            c.table(self._name(table)).put(row, dict(cells), timestamp=timestamp)
        await self.call(put, table=table, what="put", idempotent=True)

    async def delete(self, table: str, row: bytes, columns: Sequence[bytes] | None = None) -> None:
        await self.call(lambda c: c.table(self._name(table)).delete(row, columns=columns), table=table,
                        what="delete", idempotent=True)

    async def increment(self, table: str, row: bytes, column: bytes, amount: int = 1) -> int:
        """Atomically add ``amount`` to the 8-byte big-endian counter at ``column``; returns the new value."""
        return await self.call(lambda c: int(c.table(self._name(table)).counter_inc(row, column, amount)),
                               table=table, what="increment")

    async def counter(self, table: str, row: bytes, column: bytes) -> int:
        return await self.call(lambda c: int(c.table(self._name(table)).counter_get(row, column)),
                               table=table, what="counter get", idempotent=True)

    # -- reads -----------------------------------------------------------------------------------

    async def get(self, table: str, row: bytes, columns: Sequence[bytes] | None = None,
                  *, include_timestamp: bool = False) -> dict[bytes, Any]:
        def get(c: happybase.Connection) -> dict[bytes, Any]:
            return dict(c.table(self._name(table)).row(row, columns=columns, include_timestamp=include_timestamp))
        return await self.call(get, table=table, what="get", idempotent=True)

    async def cell_versions(self, table: str, row: bytes, column: bytes, versions: int = 10) -> list[tuple[bytes, int]]:
        """Every stored version of one cell, newest first, as (value, timestamp)."""
        def get(c: happybase.Connection) -> list[tuple[bytes, int]]:
            return [(v, int(ts)) for v, ts in c.table(self._name(table)).cells(
                row, column, versions=versions, include_timestamp=True)]
        return await self.call(get, table=table, what="get versions", idempotent=True)

    async def rows(self, table: str, rows: Sequence[bytes], columns: Sequence[bytes] | None = None) -> list[Row]:
        def get(c: happybase.Connection) -> list[Row]:
            return [(k, dict(v)) for k, v in c.table(self._name(table)).rows(list(rows), columns=columns)]
        return await self.call(get, table=table, what="get rows", idempotent=True)

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
        call, a bigger one goes through Thrift1 (:mod:`connectors.hbase.scanrows`). With ``client =
        "native"`` a scan without a ``filter`` goes over HBase's RPC instead
        (:meth:`~connectors.hbase.native.NativeClient.scan`)."""
        if limit <= 0:
            return []
        if self._native is not None and filter is None:
            first, last = scan_bounds(start, stop, prefix)
            rows = await self._native.scan(table, start=first, stop=last, limit=limit, reverse=reverse,
                                           columns=columns or ())
            return [(key, {c.family + b":" + c.qualifier: scan_cell(c.value, c.timestamp) for c in cells})
                    for key, cells in rows]
        scan = tscan(start, stop, prefix, limit, reverse, columns, filter)
        name = self._name(table).encode()
        if limit <= SMALL_PAGE_ROWS:
            idl = load_idl()
            return await self.call2(
                lambda c: scan_rows2(c, idl, name, scan.startRow or b"", scan.stopRow or b"", limit, reverse,
                                     columns, filter), table=table, what="scan", idempotent=True)
        return await self.call(lambda c: scan_rows(c, name, scan, limit), table=table, what="scan", idempotent=True)

    async def scan_in_process(self, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
                              reverse: bool = False, columns: Sequence[bytes] | None = None,
                              transform: PageTransform, label: str, limiter: anyio.CapacityLimiter) -> Any:
        """:meth:`scan_cells`' page passed through ``transform`` in a worker process, at most
        ``limiter``'s tokens of workers at once (contract: :mod:`connectors.hbase.scanprocs`)."""
        if limit <= 0:
            raise ValueError("limit must be >= 1")
        name = self._name(table).encode()

        async def use(ep: _Endpoint, sent: _Sent) -> Any:
            return await scan_page_in_process(ep.gateway, name, table, start=start, stop=stop, limit=limit,
                                              reverse=reverse, columns=columns, transform=transform, label=label,
                                              limiter=limiter)
        # a page is read-only: retried on another gateway after a connection-level failure, from the
        # same start, so the caller's paging sees one page, never a row twice
        return await self._on_gateway(use, idempotent=True, table=table, what="scan")

    async def warm_scan_processes(self, limiter: anyio.CapacityLimiter) -> None:
        """Start ``limiter``'s tokens of scan worker processes at once, each with its connection open
        (a query's first pages then do not wait for process start-up)."""
        up = [ep.gateway for i, ep in enumerate(self._endpoints) if self._board.is_up(i)] or \
            [self._endpoints[0].gateway]
        async with anyio.create_task_group() as tg:
            for k in range(int(limiter.total_tokens)):
                tg.start_soon(warm_worker, up[k % len(up)], limiter)

    async def count(self, table: str) -> int:
        """Rows in the table, by a key-only scan (for tests and small tables)."""
        def count(c: happybase.Connection) -> int:
            return sum(1 for _ in c.table(self._name(table)).scan(
                filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()", batch_size=5000))
        return await self.call(count, table=table, what="count", idempotent=True)


