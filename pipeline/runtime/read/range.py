"""Paging one planned range of a query into a bounded stream of pages.

:func:`page_range` is the body of one producer task: it fetches the range's rows a page at a time
with its ``fetch`` (``HBaseClient.scan_cells`` in a worker thread, or ``scan_in_process``: one
scanner opened and closed per page; only a row's key, ``row[0]``, is read here), drops what the
plan's filter rejects (``keep``: the plan's key filter, or, for pages a worker process decoded and
filtered, :func:`~pipeline.runtime.read.rows.is_decoded`), and sends each non-empty page (rows in
the merge direction) to the query's merge.

Page schedule: the first page asks for ``first_page`` rows, each next page four times as many, up
to ``page_size``, so a small limit or an early stop costs little and a full scan pays few round
trips. When the range's rows are exact (no filter) and the query has a limit, no page asks for more
rows than the limit still allows: a range never returns more than the limit. Pages are fetched
under the query's ``limiter`` (at most ``concurrency`` pages in flight); ``send`` blocks while the
merge is ``read_ahead`` pages behind, which bounds memory.

Reverse ranges (newest first over a design that stores time ascending) are scanned with HBase's
reverse scan from the range's exclusive upper bound down to :func:`reverse_lower_bound` of its
start; the row equal to the upper bound, and rows repeated at a page boundary, are skipped, and
rows below the start (over-scanned by the bound) are dropped.

Errors are the client's :class:`~pipeline.errors.HBaseIngestError` and the stream's
``BrokenResourceError`` (the merge stopped reading); the caller maps them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from pipeline.runtime.read.plan import ScanRange
from pipeline.runtime.read.rows import ScannedRow
from pipeline.runtime.read.stats import QueryStats, RangeStats, ReaderTotals

__all__ = ["Fetch", "page_range", "reverse_lower_bound"]

Fetch = Callable[[bytes, bytes, int, bool], Awaitable[list[ScannedRow]]]
"""``fetch(start, stop, limit, reverse)``: at most ``limit`` rows of the scan, in scan order."""


def reverse_lower_bound(start: bytes) -> bytes:
    """The exclusive lower bound of a reverse scan that must include ``start`` itself.

    HBase's reverse stop row is exclusive, and the key just below ``start`` has no finite spelling
    unless ``start`` ends in ``0x00``. Otherwise this returns ``start`` with its last byte decreased
    and 16 ``0xFF`` bytes appended: only keys in ``(bound, start)`` are over-scanned (keys beginning
    with that many ``0xFF`` bytes), and the caller drops any row below ``start``.
    """
    if not start:
        return b""
    if start[-1] == 0:
        return start[:-1]
    return start[:-1] + bytes((start[-1] - 1,)) + b"\xff" * 16


async def page_range(fetch: Fetch, rng: ScanRange, send: MemoryObjectSendStream[list[ScannedRow]],
                     *, reverse: bool, keep: Callable[[Any], bool] | None, limit: int | None,
                     first_page: int, page_size: int,
                     limiter: anyio.CapacityLimiter, stats: RangeStats, query: QueryStats,
                     totals: ReaderTotals, more: Callable[[bytes], bool] | None = None) -> None:
    """Page ``rng`` into ``send`` until the range is exhausted or ``limit`` matching
    rows were sent (None: no limit). Updates ``stats``, ``query`` and ``totals`` as pages arrive.
    ``keep`` (a row predicate) filters rows the range's bounds cannot exclude. ``more``
    (optional) is asked with the last key scanned after each page: False stops the range there
    (rows come best first and the rest cannot be used)."""
    low = rng.start
    # reverse: start = upper bound (inclusive, so a row equal to it is dropped), stop = lower
    cursor = rng.stop if reverse else rng.start
    stop = reverse_lower_bound(rng.start) if reverse else rng.stop
    skip: bytes | None = (rng.stop or None) if reverse else None
    size = first_page
    while True:
        want = min(size, page_size)
        if limit is not None and keep is None:
            # exact ranges: every row counts toward the limit (a filtered range keeps its pages,
            # since most of what it scans may be dropped)
            want = min(want, limit - stats.rows_matched)
        ask = want + (1 if skip is not None else 0)
        async with limiter:
            query.scanners_opened += 1
            totals.scanners += 1
            page = await fetch(cursor, stop, ask, reverse)
        stats.pages += 1
        exhausted = len(page) < ask
        if skip is not None and page and page[0][0] >= skip:
            page = page[1:]  # the previous page's last row, or the range's stop key
        elif len(page) > want:
            page = page[:want]
        last = page[-1][0] if page else b""
        query.rows_scanned += len(page)
        totals.scanned += len(page)
        stats.rows_scanned += len(page)
        if reverse and low and page and page[-1][0] < low:
            page = [r for r in page if r[0] >= low]
            exhausted = True
        if keep is not None:
            page = [r for r in page if keep(r)]
        stats.rows_matched += len(page)
        if page:
            await send.send(page)
        if exhausted or (limit is not None and stats.rows_matched >= limit):
            return
        if more is not None and not more(last):
            return
        if reverse:
            cursor = skip = last
        else:
            cursor = last + b"\x00"
        size *= 4
