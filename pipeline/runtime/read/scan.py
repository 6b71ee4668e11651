"""One fan-out query in flight: :class:`Scan` pages every planned range concurrently (threads or
worker processes, via the reader's :class:`~pipeline.ports.HBase`), decodes the rows, and merges the
ranges into one ordered, limited stream. Built by :meth:`pipeline.runtime.read.reader.Reader.scan`;
the contract (ordering, limits, failures, cancellation) is in :mod:`pipeline.runtime.read.reader`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import (
    AsyncGenerator,
    Callable,
    Coroutine,
    Mapping,
    Sequence,
)
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pipeline.errors import HBaseIngestError
from pipeline.ports import PageTransform
from pipeline.runtime.read.entities import walk_entities
from pipeline.runtime.read.errors import QueryError, RowDecodeError
from pipeline.runtime.read.merge import Cutoff, merge_batches, merge_pieces, top_k
from pipeline.runtime.read.plan import QueryPlan
from pipeline.runtime.read.range import Fetch, page_range
from pipeline.runtime.read.rows import (
    PageQuery,
    ReadRow,
    ScannedRow,
    as_read_rows,
    is_decoded,
)
from pipeline.runtime.read.stats import QueryStats, RangeStats
from pipeline.settings import RouteSpec

if TYPE_CHECKING:
    from pipeline.ports import HBase
    from pipeline.rowkey import RowKey
    from pipeline.runtime.read.rows import RowDecoder
    from pipeline.runtime.read.stats import ReaderTotals

__all__ = ["Scan", "ScanSource", "page_query"]


class ScanSource(Protocol):
    """What a :class:`Scan` takes from the reader that made it (:class:`~pipeline.runtime.read.reader.Reader`
    is one): its HBase, paging and concurrency, its totals, the compiled designs and plans, the worker-process
    limiter (None: pages are decoded in this process) and the task group a scan's ranges run in."""

    hbase: HBase
    page_size: int
    first_page: int
    read_ahead: int
    concurrency: int
    totals: ReaderTotals

    @property
    def process_limiter(self) -> anyio.CapacityLimiter | None: ...

    def design(self, route: RouteSpec) -> tuple[RowKey, RowDecoder]: ...

    def transform(self, route: RouteSpec, query: PageQuery | None = None) -> PageTransform: ...

    async def plan(self, route: RouteSpec, *, where: Mapping[str, Any] | None = None,
                   time_range: tuple[int, int] | None = None, newest_first: bool = False,
                   limit: int | None = None, by_time: bool = False, skip_scan: bool = False) -> QueryPlan: ...

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None: ...

Row = ScannedRow
_PRUNED_FIRST_PAGE = 4  # rows an entity's first page asks for once a by-time top-k is full
_EVERY_ROW = 1 << 62  # an entity walk's per-entity limit when the query has none


def page_query(plan: QueryPlan) -> PageQuery | None:
    """The plan's filter in the form a scan worker process rebuilds it from (``RowKey.plan``'s
    arguments, hashable), or None: the plan has no filter, or a ``where`` value does not hash (its
    rows are then filtered in this process)."""
    if plan.matches is None:
        return None
    query: PageQuery = (tuple(sorted(plan.where.items())), plan.time_range, plan.time_field)
    try:
        hash(query)
    except TypeError:
        return None
    return query


def _key_filter(matches: Callable[[bytes], bool] | None) -> Callable[[Any], bool] | None:
    """A row predicate from a key predicate."""
    if matches is None:
        return None
    return lambda row: matches(row[0])


def _range_failure(plan: QueryPlan, label: str, exc: Exception) -> Exception:
    """What the query raises for range ``label``'s failure ``exc``: a :class:`QueryError` naming the
    range (or the row that does not decode) for the project's errors and a dead scan worker process;
    anything else as it is."""
    if isinstance(exc, RowDecodeError):  # decoded in a worker process
        err = QueryError(f"row {plan.format_key(exc.key)} does not decode: {exc.detail}",
                         table=plan.table, range_label=label)
    elif isinstance(exc, HBaseIngestError | anyio.BrokenWorkerProcess):
        why = str(exc) or type(exc).__name__
        if isinstance(exc, anyio.BrokenWorkerProcess):
            why = f"its scan worker process died ({why})"
        err = QueryError(f"range {label} failed: {why}", table=plan.table, range_label=label)
    else:
        return exc
    err.__cause__ = exc
    return err


class Scan:
    """One running query: an async iterator of :class:`ReadRow` with live :attr:`stats`.

    The producers run in the reader's task group, never in the caller's task, so a ``yield`` never
    crosses a cancel scope; the caller's waits are the only place where a failure or the timeout
    reaches it.
    """

    def __init__(self, reader: ScanSource, route: RouteSpec, *, where: dict[str, Any],
                 time_range: tuple[int, int] | None, newest_first: bool, limit: int | None,
                 columns: list[bytes] | None, timeout_s: float | None, by_time: bool = False,
                 skip_scan: bool = False) -> None:
        self.reader = reader
        self.route = route
        self.where = where
        self.time_range = time_range
        self.newest_first = newest_first
        self.limit = limit
        self.by_time = by_time
        self.skip_scan = skip_scan
        self.columns = columns
        self.timeout_s = timeout_s
        self.plan: QueryPlan | None = None
        self.stats = QueryStats(table=route.table)
        self._gen: AsyncGenerator[list[ReadRow], None] | None = None
        self._buf: deque[ReadRow] = deque()
        self._finished = False
        self._error: BaseException | None = None
        self._waiting: anyio.CancelScope | None = None
        self._runner = anyio.CancelScope()
        self._done: list[bool] = []
        self._t0 = 0.0
        self._deadline = float("inf")

    def __repr__(self) -> str:
        s = self.stats
        return (f"Scan(route={self.route.name!r}, ranges={s.ranges_planned}, "
                f"returned={s.rows_returned}, outcome={s.outcome})")

    def statistics(self) -> QueryStats:
        """A snapshot of :attr:`stats` (which keeps changing while the query runs)."""
        s = self.stats
        elapsed = s.elapsed_s if s.outcome != "running" or not self._t0 else (
            time.monotonic() - self._t0)
        return replace(s, elapsed_s=elapsed, ranges=[replace(r) for r in s.ranges])

    def __aiter__(self) -> Scan:
        self._check_not_over()
        return self

    def _check_not_over(self) -> None:
        """A scan is read once: iterating it again after it ended would silently yield nothing."""
        if self._finished and not self._buf:
            raise RuntimeError(f"this scan of route {self.route.name!r} has ended ({self.stats.outcome}); "
                               "start a new one with reader.scan(...)")

    async def __anext__(self) -> ReadRow:
        buf = self._buf
        if not buf:
            if self._gen is None:
                self._gen = self._batches()
            while not buf:
                buf.extend(await self._gen.__anext__())
        if self.stats.first_row_s is None:
            self.stats.first_row_s = time.monotonic() - self._t0
        self.stats.rows_returned += 1
        self.reader.totals.returned += 1
        return buf.popleft()

    async def batches(self) -> AsyncGenerator[list[ReadRow], None]:
        """The same rows in the same order, a batch at a time: each list holds consecutive rows of
        the merged order, from any ranges (the merge's unit: about a page's worth, less with a
        limit). For consumers that handle rows in bulk, this saves an ``await`` per row. Rows
        already taken one by one are not repeated; rows buffered by row iteration come first.
        Close the scan (``async with``) when stopping early."""
        stats, reader = self.stats, self.reader
        self._check_not_over()
        if self._gen is None:
            self._gen = self._batches()
        if self._buf:
            rows = list(self._buf)
            self._buf.clear()
            stats.rows_returned += len(rows)
            reader.totals.returned += len(rows)
            yield rows
        async for batch in self._gen:
            if stats.first_row_s is None:
                stats.first_row_s = time.monotonic() - self._t0
            stats.rows_returned += len(batch)
            reader.totals.returned += len(batch)
            yield batch

    async def aclose(self) -> None:
        """Stop the query: cancel the scans still running and release the read-ahead buffers."""
        self._buf.clear()
        if self._gen is None:
            self._gen = self._batches()
        await self._gen.aclose()

    async def __aenter__(self) -> Scan:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def collect(self) -> list[ReadRow]:
        """Every row of the query, as a list."""
        async with self:
            return [row async for row in self]

    # -- failure ----------------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        """Record the query's first failure and wake the caller if it is waiting for a page."""
        if self._error is None:
            self._error = exc
        self._runner.cancel()
        if self._waiting is not None:
            self._waiting.cancel()

    # -- producers (reader's task group) ---------------------------------------------------------

    async def _run(self, plan: QueryPlan, sends: list[MemoryObjectSendStream[list[Row]]],
                   cutoff: Cutoff) -> None:
        limiter = anyio.CapacityLimiter(self.reader.concurrency)
        # built once per query; a worker caches the decoder it builds from it by value
        transform, keep = None, _key_filter(plan.matches)
        if self.reader.process_limiter is not None:
            query = page_query(plan)
            transform = self.reader.transform(self.route, query)
            if query is not None:  # the workers filter: the rows they dropped come back as (key,)
                keep = is_decoded
        with self._runner:
            async with anyio.create_task_group() as tg:
                for i, send in enumerate(sends):
                    tg.start_soon(self._produce, plan, i, send, limiter, transform, keep, cutoff)
        for send in sends:  # when cancelled before the producers started
            send.close()

    async def _produce(self, plan: QueryPlan, i: int, send: MemoryObjectSendStream[list[Row]],
                       limiter: anyio.CapacityLimiter, transform: PageTransform | None,
                       keep: Callable[[Any], bool] | None, cutoff: Cutoff) -> None:
        """One range's producer: pages it (never raising) and records how it ended. ``keep``
        filters the fetched rows (None: every row matches)."""
        rng, st, reader = plan.ranges[i], self.stats.ranges[i], self.reader
        fetch = self._fetcher(plan.table, rng.label, transform)
        sort_key = plan.sort_key

        def more(last: bytes) -> bool:  # by time: the rest of a time-ordered run may still count
            return not cutoff.useless(sort_key(last))

        def first() -> int:  # by time: once the top-k is full, most entities cannot enter it
            return reader.first_page if cutoff.worst is None else min(reader.first_page, _PRUNED_FIRST_PAGE)

        # a range (an entity) never needs more matching rows than the limit, unless its rows are
        # not in the output's order (a top-k, or by time over per-region ranges)
        in_order = plan.order == "logical" or (plan.order == "by-time" and not plan.per_region)
        page_size = reader.page_size
        if in_order and self.limit is not None and keep is None:  # exact ranges: cap at a share
            page_size = min(page_size, max(reader.first_page, -(-self.limit // len(plan.ranges))))
        async with send:
            try:
                st.state = "scanning"
                if plan.bounds is not None:  # by time, or a skip scan (which may have no limit)
                    await walk_entities(
                        fetch, rng, send, bounds=plan.bounds, reverse=plan.reverse, keep=keep,
                        limit=self.limit if self.limit is not None else _EVERY_ROW, first=first,
                        page_size=reader.page_size,
                        limiter=limiter, stats=st, query=self.stats, totals=reader.totals, more=more)
                else:
                    await page_range(
                        fetch, rng, send, reverse=plan.reverse, keep=keep,
                        limit=self.limit if in_order else None,
                        first_page=reader.first_page, page_size=page_size, limiter=limiter,
                        stats=st, query=self.stats, totals=reader.totals,
                        more=more if in_order and plan.order == "by-time" else None)
                st.state = "done"
                self._done[i] = True
            except anyio.BrokenResourceError:
                st.state = "cancelled"  # the caller stopped reading
            except Exception as exc:
                st.state = "failed"
                self._fail(_range_failure(plan, rng.label, exc))
            except BaseException:
                st.state = "cancelled"
                raise

    def _fetcher(self, table: str, label: str, transform: PageTransform | None) -> Fetch:
        """How a range's producer reads one page: in a scan worker process (decoded there by
        ``transform``) when the reader has them, else in a thread of this process."""
        hb, columns, procs = self.reader.hbase, self.columns, self.reader.process_limiter
        if procs is not None and transform is not None:
            async def in_process(start: bytes, stop: bytes, limit: int, reverse: bool) -> list[Row]:
                page: list[Row] = await hb.scan_in_process(
                    table, start=start, stop=stop, limit=limit, reverse=reverse, columns=columns,
                    transform=transform, label=label, limiter=procs)
                return page
            return in_process

        async def in_thread(start: bytes, stop: bytes, limit: int, reverse: bool) -> list[Row]:
            return await hb.scan_cells(table, start=start, stop=stop, limit=limit, reverse=reverse,
                                       columns=columns)
        return in_thread

    # -- the merge (caller's task) -----------------------------------------------------------------

    async def _receive(self, plan: QueryPlan, i: int,
                       recv: MemoryObjectReceiveStream[list[Row]]) -> list[Row] | None:
        """The next page of range ``i``; None when the range is exhausted. Raises the query's
        failure, or a timeout naming the range waited on."""
        page: list[Row] | None = None
        waited_out = False
        if self._error is None:
            try:
                page = recv.receive_nowait()
            except anyio.WouldBlock:
                with anyio.CancelScope(deadline=self._deadline) as scope:
                    self._waiting = scope
                    try:
                        page = await recv.receive()
                    except anyio.EndOfStream:
                        page = None
                    finally:
                        self._waiting = None
                waited_out = scope.cancelled_caught
            except anyio.EndOfStream:
                page = None
        if waited_out and self._error is None:
            raise self._timeout(plan, i)
        if self._error is not None:
            raise self._error
        if page is None and not self._done[i]:
            if anyio.current_time() >= self._deadline:
                raise self._timeout(plan, i)
            raise QueryError("the scan was cancelled (the reader is closing)", table=plan.table,
                             range_label=plan.ranges[i].label)
        return page

    def _timeout(self, plan: QueryPlan, i: int) -> QueryError:
        label = plan.ranges[i].label
        self._fail(QueryError(f"query timed out after {self.timeout_s} s waiting for range {label}",
                              table=plan.table, range_label=label, timed_out=True))
        assert isinstance(self._error, QueryError)
        return self._error

    async def _batches(self) -> AsyncGenerator[list[ReadRow], None]:
        """Plan, start the producers, merge; yield decoded batches of rows (the limit applied)."""
        reader = self.reader
        plan = await self._plan()
        self.plan = plan
        self.stats.ranges_planned = len(plan.ranges)
        self.stats.per_region = plan.per_region
        self.stats.ranges = [RangeStats(r.label) for r in plan.ranges]
        self._done = [False] * len(plan.ranges)
        if self.limit == 0 or not plan.ranges:
            self._finish("done")
            return
        sends: list[MemoryObjectSendStream[list[Row]]] = []
        recvs: list[MemoryObjectReceiveStream[list[Row]]] = []
        for _ in plan.ranges:
            s, r = anyio.create_memory_object_stream[list[Row]](reader.read_ahead)
            sends.append(s)
            recvs.append(r)
        cutoff = Cutoff(plan.descending)
        try:
            reader.spawn(lambda: self._run(plan, sends, cutoff))
        except BaseException:
            for s in sends:
                s.close()
            self._finish("failed")
            raise

        def stop() -> None:
            self._runner.cancel()
            for r in recvs:
                r.close()

        async def receive(i: int) -> list[Row] | None:
            return await self._receive(plan, i, recvs[i])

        if plan.order in ("top-k", "by-time"):
            assert self.limit is not None
            batches = top_k(recvs, receive, plan.sort_key, plan.descending, self.limit, cutoff)
        else:
            batches = merge_batches(len(recvs), receive, plan.sort_key, plan.descending)
        left = self.limit
        outcome = "closed"
        try:
            async for pieces in batches:
                batch = self._merged(plan, pieces, left)
                if left is not None:
                    left -= len(batch)
                    if left == 0:
                        outcome = "limit"
                        stop()  # before handing over the last rows: nothing keeps scanning
                        yield batch
                        return
                yield batch
            outcome = "done"
        except QueryError as exc:
            outcome = "timeout" if exc.timed_out else "failed"
            raise
        except Exception:
            outcome = "failed"
            raise
        finally:
            stop()
            self._finish(outcome)
            await batches.aclose()

    async def _plan(self) -> QueryPlan:
        """Start the query's clock (and its deadline) and plan it within its timeout."""
        reader = self.reader
        self._t0 = time.monotonic()
        reader.totals.started += 1
        reader.totals.active += 1
        try:
            if self.timeout_s is not None:
                self._deadline = anyio.current_time() + self.timeout_s
            with anyio.fail_after(self.timeout_s):
                return await reader.plan(self.route, where=self.where, time_range=self.time_range,
                                         newest_first=self.newest_first, limit=self.limit,
                                         by_time=self.by_time, skip_scan=self.skip_scan)
        except TimeoutError as exc:
            self._finish("timeout")
            raise QueryError(f"query timed out after {self.timeout_s} s while planning",
                             table=self.route.table, timed_out=True) from exc
        except BaseException:
            self._finish("failed")
            raise

    def _merged(self, plan: QueryPlan, pieces: list[tuple[int, Sequence[Row]]], left: int | None) -> list[ReadRow]:
        """One merge step's pieces (range index, its rows) as decoded rows in the output's order, at
        most ``left`` of them (None: all)."""
        sort_key = plan.sort_key
        if left is not None:  # no piece gives more than ``left`` of the first ``left`` rows
            pieces = [(i, rows[:left]) for i, rows in pieces]
        if self.reader.process_limiter is not None:  # pages arrive decoded: (key, fields, columns, label)
            merged = merge_pieces([rows for _, rows in pieces], lambda t: sort_key(t[0]), plan.descending)
            return as_read_rows(merged[:left] if left is not None else merged)  # type: ignore[arg-type]
        _, decode_run = self.reader.design(self.route)
        decoded = []
        for i, rows in pieces:
            try:
                decoded.append(decode_run(rows, plan.ranges[i].label))
            except HBaseIngestError as exc:
                raise self._undecodable(plan, i, rows, exc) from exc
        batch = merge_pieces(decoded, lambda r: sort_key(r.key), plan.descending)
        if left is not None:
            del batch[left:]
        return batch

    def _undecodable(self, plan: QueryPlan, i: int, run: Sequence[Row],
                     exc: HBaseIngestError) -> QueryError:
        _, decode_run = self.reader.design(self.route)
        bad = run[0][0]
        for row in run:  # find the row at fault, for the message
            try:
                decode_run([row], "")
            except HBaseIngestError:
                bad = row[0]
                break
        return QueryError(f"row {plan.format_key(bad)} does not decode: {exc}", table=plan.table,
                          range_label=plan.ranges[i].label)

    def _finish(self, outcome: str) -> None:
        if self._finished:
            return
        self._finished = True
        self.stats.outcome = outcome
        self.stats.elapsed_s = time.monotonic() - self._t0
        self.reader.totals.active -= 1
        if outcome in ("failed", "timeout"):
            self.reader.totals.failed += 1
