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
did not open). A :class:`~connectors.hbase.probe.Prober` thread probes a down gateway every
``probe_interval_ms`` and takes it back in when it answers. When no gateway is up, a call raises
:class:`~pipeline.errors.HBaseUnavailable` at once (the callers' backoff waits).

Bounds: ``start`` is inclusive and ``stop`` exclusive in every scan; ``b""`` means an open end.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import happybase
import Hbase_thrift  # the Thrift1 IDL module happybase loads at import
import structlog

from connectors.hbase.errors import is_gateway_failure, map_exceptions
from connectors.hbase.gateways import GatewayBoard
from connectors.hbase.pool import ConnectionPool
from connectors.hbase.probe import Prober, probe_gateway
from connectors.hbase.putwire import direct_puts, put_multiple, split_column, tputs
from connectors.hbase.scanprocs import Gateway, PageTransform, scan_page_in_process, warm_worker
from connectors.hbase.scanrows import SMALL_PAGE_ROWS, CellRow, scan_rows, scan_rows2, tscan
from connectors.hbase.thrift2 import load_idl, open_client
from pipeline.core.model import Mutation, MutationKind
from pipeline.errors import HBaseError, HBaseRequestError, HBaseUnavailable, TableNotFound
from pipeline.rowkey import format_key
from pipeline.settings import FamilySpec, GatewaySpec, HBaseSettings

__all__ = ["Cells", "HBaseClient", "RegionInfo", "Row"]

T = TypeVar("T")
Cells = dict[bytes, bytes]
Row = tuple[bytes, Cells]

log = structlog.get_logger("hbase_ingest.hbase")


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


class _Endpoint:
    """One gateway's connection pools (Thrift1 and Thrift2) and the limiters that bound its calls."""

    def __init__(self, spec: GatewaySpec, s: HBaseSettings) -> None:
        self.spec = spec
        self.t1: ConnectionPool[happybase.Connection] = ConnectionPool(
            s.pool_size,
            lambda: happybase.Connection(spec.host, spec.port, timeout=s.timeout_ms, transport=s.transport,
                                         protocol=s.protocol, autoconnect=True),
            lambda c: c.close(), name=f"thrift1 {spec.name}")
        self.t2: ConnectionPool[Any] = ConnectionPool(
            s.pool_size,
            lambda: open_client(spec.host, spec.thrift2_port, s.timeout_ms, framed=s.transport == "framed",
                                compact=s.protocol == "compact"),
            lambda c: c.close(), name=f"thrift2 {spec.host}:{spec.thrift2_port}")
        self.limit1 = anyio.CapacityLimiter(s.pool_size)
        self.limit2 = anyio.CapacityLimiter(s.pool_size)
        self.gateway = Gateway(spec.host, spec.port, spec.thrift2_port, s.timeout_ms, s.transport, s.protocol)

    def close(self) -> None:
        self.t1.close()
        self.t2.close()


class _Sent:
    """Set once a call's connection is open: from then on its request may have reached HBase."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = False


class HBaseClient:
    """Async HBase access over one or several gateways (module docstring). Use as
    ``async with HBaseClient(settings) as hb:``."""

    def __init__(self, settings: HBaseSettings) -> None:
        self.settings = settings
        s = settings
        self._prefix = s.table_prefix
        specs = s.endpoints()
        self._endpoints = [_Endpoint(spec, s) for spec in specs]
        self._board = GatewayBoard([(spec.name, spec.server) for spec in specs])
        self._prober = Prober(self._board, lambda i: probe_gateway(specs[i], s), s.probe_interval_ms / 1000)
        # puts are encoded straight to bytes on the binary protocol (connectors.hbase.putwire)
        self._direct_puts = direct_puts(s.protocol)

    def __repr__(self) -> str:
        return f"HBaseClient({self._board!r})"

    async def __aenter__(self) -> HBaseClient:
        # the Thrift2 IDL is needed by every write: a missing one is a setup error, raised here
        # (ConfigError) rather than at the first write, where it would look like an outage
        await anyio.to_thread.run_sync(load_idl)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._prober.close()
        for ep in self._endpoints:
            ep.close()

    @property
    def pool_size(self) -> int:
        """Connections per gateway: how many calls usefully run at once."""
        return self.settings.pool_size

    def statistics(self) -> dict[str, Any]:
        """``gateways``: per gateway name (``host:port``), its state (``up``/``down``), calls, errors,
        failovers, last error and pools; ``thrift1``/``thrift2``: the pools summed over gateways."""
        gateways = self._board.snapshot()
        for ep in self._endpoints:
            gateways[ep.spec.name] |= {"thrift1": ep.t1.statistics(), "thrift2": ep.t2.statistics()}

        def total(pool: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for g in gateways.values():
                for k, v in g[pool].items():
                    out[k] = out.get(k, 0) + v
            return out
        return {"thrift1": total("thrift1"), "thrift2": total("thrift2"), "gateways": gateways,
                "threads_busy": sum(ep.limit1.borrowed_tokens + ep.limit2.borrowed_tokens
                                    for ep in self._endpoints)}

    def _name(self, table: str) -> str:
        return self._prefix + table

    # -- the doorways ----------------------------------------------------------------------------

    async def _on_gateway(self, use: Callable[[_Endpoint, _Sent], Awaitable[T]], *, idempotent: bool,
                          table: str | None, what: str, server: str | None = None) -> T:
        """``use(endpoint, sent)`` on a healthy gateway (``server``: the region server the call is
        for, for locality), retried once on another after a connection-level failure when safe
        (module docstring)."""
        tried: list[int] = []
        while True:
            i = self._board.choose(server, exclude=tried)
            if i is None:
                raise self._none_up(table, what, tried)
            sent = _Sent()
            self._board.started(i)
            try:
                result = await use(self._endpoints[i], sent)
            except HBaseError as exc:
                self._board.finished(i, str(exc))
                if not is_gateway_failure(exc):
                    raise
                self._mark_down(i, exc)
                tried.append(i)
                if len(tried) > 1 or not (idempotent or not sent.sent) or not self._board.any_up(tried):
                    raise
                self._board.failed_over(i)
                log.warning("gateway_failover", gateway=self._board.name(i), what=what, table=table,
                            error=str(exc))
                continue
            except BaseException:
                self._board.finished(i, "interrupted")
                raise
            self._board.finished(i)
            return result

    def _mark_down(self, i: int, exc: HBaseError) -> None:
        if self._board.mark_down(i, str(exc), time.monotonic()):
            log.warning("gateway_down", gateway=self._board.name(i), error=str(exc))
            # its idle sockets are as dead as the one that failed
            self._endpoints[i].t1.discard_idle()
            self._endpoints[i].t2.discard_idle()
        self._prober.wake()

    def _none_up(self, table: str | None, what: str, tried: list[int]) -> HBaseUnavailable:
        where = f"{what} on table {table!r}" if table else what
        names = ", ".join(self._board.name(i) for i in range(len(self._board)))
        last = self._board.snapshot()[self._board.name(tried[-1] if tried else 0)]["last_error"]
        return HBaseUnavailable(f"{where} failed: every HBase gateway is down ({names}); last error: {last}",
                                table=table)

    async def call(self, fn: Callable[[happybase.Connection], T], *, table: str | None = None,
                   what: str = "HBase call", idempotent: bool = False, server: str | None = None) -> T:
        """Run ``fn(connection)`` in a worker thread on a pooled Thrift1 (happybase) connection of a
        healthy gateway. ``idempotent``: ``fn`` may run twice (on another gateway after a
        connection-level failure); otherwise it is retried only when it could not have started."""
        timeout_s = self.settings.timeout_ms / 1000

        async def use(ep: _Endpoint, sent: _Sent) -> T:
            def run() -> T:
                with map_exceptions(table, what), ep.t1.connection(timeout_s=timeout_s) as conn:
                    sent.sent = True
                    return fn(conn)
            return await anyio.to_thread.run_sync(run, limiter=ep.limit1)
        return await self._on_gateway(use, idempotent=idempotent, table=table, what=what, server=server)

    async def call2(self, fn: Callable[[Any], T], *, table: str | None = None, what: str = "HBase call",
                    idempotent: bool = False, server: str | None = None) -> T:
        """Run ``fn(client)`` in a worker thread on a pooled Thrift2 client (``idempotent``: as in
        :meth:`call`)."""
        timeout_s = self.settings.timeout_ms / 1000

        async def use(ep: _Endpoint, sent: _Sent) -> T:
            def run() -> T:
                with map_exceptions(table, what), ep.t2.connection(timeout_s=timeout_s) as c:
                    sent.sent = True
                    return fn(c)
            return await anyio.to_thread.run_sync(run, limiter=ep.limit2)
        return await self._on_gateway(use, idempotent=idempotent, table=table, what=what, server=server)

    async def _ddl(self, fn: Callable[[Any, Any], T], table: str, what: str, idempotent: bool = False) -> T:
        s = self.settings

        async def use(ep: _Endpoint, sent: _Sent) -> T:
            def run() -> T:
                with map_exceptions(table, what):
                    client = open_client(ep.spec.host, ep.spec.thrift2_port, s.ddl_timeout_ms,
                                         framed=s.transport == "framed", compact=s.protocol == "compact")
                    sent.sent = True
                    try:
                        return fn(client, load_idl())
                    finally:
                        client.close()
            return await anyio.to_thread.run_sync(run, limiter=ep.limit2)
        return await self._on_gateway(use, idempotent=idempotent, table=table, what=what)

    # -- DDL (Thrift2) ---------------------------------------------------------------------------

    def _tname(self, idl: Any, table: str) -> Any:
        ns, _, q = self._name(table).rpartition(":")
        return idl.TTableName(ns=(ns or "default").encode(), qualifier=q.encode())

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
        return await self.call(get, table=table, what="list regions", idempotent=True)

    # -- writes ----------------------------------------------------------------------------------

    async def write(self, table: str, mutations: Sequence[Mutation], server: str | None = None) -> None:
        """Apply ``mutations`` (one table) in as few round trips as possible: puts in one
        ``putMultiple``, deletes in one ``deleteMultiple``, increments in one ``incrementRows``
        call. ``server`` (``host:port``, optional): the region server the rows live on; the call
        goes to the gateway declared to sit with it when that one is up. Raises on any failure; a
        retry re-applies puts/deletes idempotently when they carry timestamps, and puts and deletes
        are retried on another gateway after a connection-level failure; increments are not
        idempotent and are retried elsewhere only when they cannot have been sent."""
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
            await self.call2(send, table=table, what="write batch", idempotent=True, server=server)
        if incs:
            def increment(c: happybase.Connection) -> None:
                # one incrementRows round trip for the whole batch (happybase only exposes single ones)
                c.client.incrementRows([Hbase_thrift.TIncrement(table=name, row=m.row, column=next(iter(m.cells)),
                                                                ammount=m.amount) for m in incs])
            await self.call(increment, table=table, what="increment batch", server=server)

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
        call, a bigger one goes through Thrift1 (:mod:`connectors.hbase.scanrows`)."""
        if limit <= 0:
            return []
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


