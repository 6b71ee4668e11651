"""The fan-out reader: one logical query over a salted/bucketed table as one ordered row stream.

Use::

    async with HBaseClient(settings.hbase) as hb, Reader(hb) as reader:
        rows = reader.scan(route, where={"hostname": "web1"}, newest_first=True, limit=100)
        async for row in rows:
            print(row.fields, row.columns)

How a query runs:

1. **Plan** (:mod:`pipeline.runtime.read.plan`): the route's rowkey design turns ``where`` and
   ``time_range`` into key ranges, one per salt/bucket value, or one when the salt is computable
   from ``where``. A huge fan-out set (a 4-hex-char md5 prefix has 65,536 values) is planned per
   region instead. :meth:`Reader.plan` returns the plan; ``explain_lines`` prints it.
2. **Scan**: every range is one producer task in the reader's task group, paging with
   ``HBaseClient.scan_cells`` (a scanner is opened and closed per page, in a worker thread) into a
   bounded memory stream of ``read_ahead`` pages (:mod:`pipeline.runtime.read.range`). At most
   ``concurrency`` pages are being fetched at once per query (a ``CapacityLimiter``, default
   ``HBaseSettings.pool_size``). With ``Reader(processes=N)`` a page is fetched *and decoded* in
   one of N worker processes (``HBaseClient.scan_in_process`` with the route's
   :func:`~pipeline.runtime.read.rows.page_decoder`), and this process only unpickles and
   merges: a full scan is then no longer bound by one process's CPU (the GIL). When the plan
   filters rows (per-region plans, or ranges the bounds cannot narrow), the workers apply the
   filter too (:func:`page_query`) and decode, send and unpickle only the rows it keeps. It pays
   when the machine has cores to spare for the workers; on small queries the page round trip to a
   worker costs more than it saves.
3. **Merge**: a k-way merge in batches (:class:`pipeline.core.merge.PageMerge`): once every range
   has a page, every row that sorts before the smallest last row among those pages is emitted at
   once (each range's share decoded with its label, then one stable sort), so the merge does no
   per-row heap work however the ranges' keys interleave. Memory is bounded by ranges x
   (read_ahead + 2) pages, never by bucket size.

Order contract. Rows come out in the design's *logical order*: the key without its leading
salt/hash/bucket prefix (``RowKey.sort_key``), ascending, or descending for ``newest_first`` when
the design stores time ascending (then every range is scanned in reverse and merged descending).
When the design stores time descending (``reverse_ts``, ``long(ts, desc)``), a forward scan already
gives newest first, so ``newest_first`` changes nothing. Plans made per region cannot stream the
logical order (a region holds many hash prefixes): without a limit they stream in table order;
with a limit they return the first ``limit`` rows in logical order (a bounded top-k over the scan).
``by_time=True`` (with a limit) asks for another order: the newest (``newest_first``) or oldest
``limit`` rows by the time field across every entity, ties in logical order, kept by a top-k; an
entity-led design is then walked entity by entity (:mod:`pipeline.runtime.read.entities`).
``skip_scan=True`` (with a time range) keeps the logical order and walks an entity-led design the
same way, reading only each entity's rows in the time range instead of every row filtered by time.

Limits are pushed down: a range never fetches more than ``limit`` matching rows (page size =
min(page_size, rows still allowed)), and the merge stops at ``limit`` rows, cancelling the scans
still running. A limited query whose ranges come in the output's order (not a top-k) also caps
its pages at a range's even share of the limit (``limit / ranges``, at least ``first_page``), so
that the pages read ahead when the merge stops stay near what it could have used; a range that
holds most of the output then takes at most ``ranges`` more round trips. An error in any range
fails the query at once with a :class:`QueryError` naming the range; so does the per-query
timeout. Nothing waits on a failed range.

Keys are decoded with the design's generated unverified decoder (``RowKey.decode(key,
verify=False)``): rows read back from the route's own table were built by the same design, so the
salt/hash/bucket bytes are not recomputed for every row. A key that does not fit the layout still
fails the query; ``Reader(verify_keys=True)`` checks every key in full (a table written by other
tools).
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from pipeline.core.routes.router import compile_route
from pipeline.errors import HBaseIngestError
from pipeline.ports import HBase, PageTransform
from pipeline.rowkey import RowKey
from pipeline.runtime.read.args import check_query, check_reader
from pipeline.runtime.read.errors import QueryError
from pipeline.runtime.read.plan import QueryPlan, ScanRange, plan_query
from pipeline.runtime.read.range import reverse_lower_bound
from pipeline.runtime.read.rows import (
    PageQuery,
    ReadRow,
    RowDecoder,
    ScannedRow,
    compile_row_decoder,
    key_decoder,
    page_decoder,
)
from pipeline.runtime.read.scan import Scan
from pipeline.runtime.read.stats import QueryStats, RangeStats, ReaderStats, ReaderTotals
from pipeline.settings import RouteSpec

__all__ = [
    "PAGE_SIZE", "PROCESS_PAGE_SIZE", "QueryError", "QueryPlan", "QueryStats", "RangeStats", "ReadRow",
    "Reader", "ReaderStats",
    "Scan", "ScanRange", "reverse_lower_bound",
]

Row = ScannedRow

#: rows per page of a reader with worker threads (a 16-range full scan buffers about 35 MB of rows)
PAGE_SIZE = 1000
#: rows per page of a reader with worker processes. Each page is a round trip to a worker (a
#: command, a Thrift scanner opened and closed, the page marshalled, piped and unmarshalled), so
#: bigger pages pay there: a 16-range full scan of 1M rows took 2-9% less time than with 1,000-row
#: pages in eleven interleaved comparisons; the serial scan, run with both in three, moved 3% at
#: most either way. The price: that scan's buffered pages hold about 120 MB of decoded rows instead
#: of 35 MB. A limited query does not read further ahead: its pages are capped at each range's
#: share of the limit (limit 30,000 over 16 ranges reads about 58,000 rows; 85,000 before the cap).
PROCESS_PAGE_SIZE = 4000


class Reader:
    """Runs fan-out queries through one :class:`~pipeline.ports.HBase` (the gateway client). Use as
    ``async with Reader(hb) as r``;
    its task group owns every producer task, and leaving it cancels queries still running and waits
    for their in-flight pages (each bounded by the client's socket timeout).

    ``page_size`` rows per ``scan_cells`` call (the first page of a range is ``first_page`` rows,
    growing 4x per page, so a small limit or an early stop costs little; default
    :data:`PAGE_SIZE`, or :data:`PROCESS_PAGE_SIZE` with ``processes``); ``read_ahead`` pages
    buffered per range; ``concurrency`` pages fetched at once per query (default the pool size);
    ``timeout_s`` the default per-query timeout (None: none); ``verify_keys`` decodes keys with the
    verified ``RowKey.decode`` (salt/hash/bucket bytes recomputed) instead of the fast unverified
    one. ``processes`` > 0 fetches and decodes pages in that many worker processes
    (``HBaseClient.scan_in_process``): this process then only merges, which pays on big scans when
    cores are free (see the module docstring); 0 uses worker threads. A worker process re-runs the
    program's main module (as multiprocessing's spawn does) before it takes work, so a script that
    uses ``processes`` must start under ``if __name__ == "__main__":``; otherwise its workers fail
    to start and the query fails naming the range ("its scan worker process died").
    """

    def __init__(self, hbase: HBase, *, page_size: int | None = None, first_page: int = 100,
                 read_ahead: int = 1, concurrency: int | None = None,
                 timeout_s: float | None = None, verify_keys: bool = False, processes: int = 0) -> None:
        check_reader(page_size=page_size, first_page=first_page, read_ahead=read_ahead,
                     concurrency=concurrency, timeout_s=timeout_s, processes=processes)
        self.hbase = hbase
        self.page_size = page_size or (PROCESS_PAGE_SIZE if processes else PAGE_SIZE)
        self.first_page = min(first_page, self.page_size)
        self.read_ahead = read_ahead
        self.concurrency = concurrency or hbase.pool_size
        self.timeout_s = timeout_s
        self.verify_keys = verify_keys
        self.processes = processes
        self._procs: anyio.CapacityLimiter | None = None  # made in __aenter__ (needs the event loop)
        self._tg: TaskGroup | None = None
        self._designs: dict[str, tuple[RowKey, RowDecoder]] = {}
        self.totals = ReaderTotals()

    def __repr__(self) -> str:
        return (f"Reader(page_size={self.page_size}, read_ahead={self.read_ahead}, "
                f"concurrency={self.concurrency}, processes={self.processes}, active={self.totals.active})")

    async def __aenter__(self) -> Reader:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        if self.processes:
            self._procs = anyio.CapacityLimiter(self.processes)
            tg.start_soon(self._warm, self._procs)
        return self

    async def _warm(self, limiter: anyio.CapacityLimiter) -> None:
        """Start the scan worker processes while the first query plans (best effort: a failure here
        is met again, and reported, by the query that needs the workers)."""
        try:
            await self.hbase.warm_scan_processes(limiter)
        except* (HBaseIngestError, anyio.BrokenWorkerProcess, OSError):
            pass  # the workers start in a task group: their failures come grouped

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        tg, self._tg = self._tg, None
        assert tg is not None
        tg.cancel_scope.cancel()
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # producers never raise, so the group only wraps the body's own exception: let that
            # propagate unchanged (``except QueryError`` around the block keeps working)
            if exc is not None and list(group.exceptions) == [exc]:
                return False
            raise

    def statistics(self) -> ReaderStats:
        return self.totals.snapshot()

    def design(self, route: RouteSpec) -> tuple[RowKey, RowDecoder]:
        """The compiled rowkey of ``route`` and its row decoder (``decode_run(rows, range_label)``,
        see :mod:`pipeline.runtime.read.rows`) with the reader's key decoder; compiled once per
        route."""
        cache_key = f"{route.name}\x00{route.rowkey}"
        found = self._designs.get(cache_key)
        if found is None:
            rowkey = compile_route(route).rowkey
            found = (rowkey, compile_row_decoder(route, self.key_decoder(rowkey)))
            self._designs[cache_key] = found
        return found

    def key_decoder(self, rowkey: RowKey) -> Callable[[bytes], dict[str, Any]]:
        """The key decoder the reader uses: unverified (generated) unless ``verify_keys``."""
        return key_decoder(rowkey, self.verify_keys)

    def transform(self, route: RouteSpec, query: PageQuery | None = None) -> PageTransform:
        """What a scan worker process applies to ``route``'s pages: the same decoding as
        :meth:`design`'s decoder, built in the worker from the route's JSON
        (:func:`~pipeline.runtime.read.rows.page_decoder`); with ``query`` (:func:`page_query`),
        only the rows the query's filter keeps are decoded."""
        return (page_decoder, (route.model_dump_json(), self.verify_keys, query))

    async def plan(self, route: RouteSpec, *, where: Mapping[str, Any] | None = None,
                   time_range: tuple[int, int] | None = None, newest_first: bool = False,
                   limit: int | None = None, by_time: bool = False, skip_scan: bool = False) -> QueryPlan:
        """The ranges a query would scan (reads the region list only for per-region plans).

        Raises :class:`QueryError` (from the rowkey's ``PlanError`` or an HBase error)."""
        rowkey, _ = self.design(route)
        try:
            return await plan_query(self.hbase, rowkey, route, where=where, time_range=time_range,
                                    newest_first=newest_first, limit=limit, by_time=by_time,
                                    skip_scan=skip_scan, decode_key=self.key_decoder(rowkey))
        except HBaseIngestError as exc:
            if isinstance(exc, QueryError):
                raise
            raise QueryError(f"cannot plan the query on route {route.name!r}: {exc}",
                             table=route.table) from exc

    def scan(self, route: RouteSpec, *, where: Mapping[str, Any] | None = None,
             time_range: tuple[int, int] | None = None, newest_first: bool = False,
             limit: int | None = None, columns: Sequence[str] | None = None,
             timeout_s: float | None = None, by_time: bool = False, skip_scan: bool = False) -> Scan:
        """One query: an async iterator of :class:`ReadRow` (the module docstring gives the order).

        ``where`` maps rowkey field names to values; ``time_range`` is ``[t0, t1)`` in epoch ms on
        the design's time field; ``columns`` restricts the cells fetched (``family:qualifier`` or
        ``family``); ``timeout_s`` overrides the reader's per-query timeout. ``by_time`` (needs
        ``limit``) returns the newest (``newest_first``) or oldest ``limit`` rows by time across
        every entity instead of the logical order. ``skip_scan`` (needs ``time_range``) reads a
        range that holds many entities (hosts) entity by entity, only each one's rows in the time
        range, instead of every row of the range filtered by time: one or two scanner calls per
        entity, which pays when entities hold many rows each and the time range few of them.
        Iterating raises :class:`QueryError`. Breaking out early is fine; ``aclose()`` (or ``async
        with``) releases the scans at once rather than at garbage collection.
        """
        check_query(route, where=where, time_range=time_range, limit=limit, columns=columns,
                    timeout_s=timeout_s, by_time=by_time, skip_scan=skip_scan)
        if time_range is not None:
            time_range = (time_range[0], time_range[1])
        return Scan(self, route, where=dict(where or {}), time_range=time_range,
                    newest_first=newest_first, limit=limit, by_time=by_time, skip_scan=skip_scan,
                    columns=[c.encode() for c in columns] if columns else None,
                    timeout_s=self.timeout_s if timeout_s is None else timeout_s)

    @property
    def process_limiter(self) -> anyio.CapacityLimiter | None:
        """The bound on pages in worker processes at once (``processes``), None when pages are decoded in
        this process."""
        return self._procs

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``fn`` in the reader's task group (a scan's ranges: they end with the reader)."""
        if self._tg is None:
            raise RuntimeError("use the Reader as 'async with Reader(hbase) as reader:'")
        self._tg.start_soon(fn)
