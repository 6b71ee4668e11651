"""By-time queries over entity-led designs: a skip scan that reads each entity's best rows only.

An entity-led design such as ``[salt(host, 16)][host][_][reverse_ts(ts)]`` orders rows by host
first, so "the newest 100 rows across every host" is not a prefix of any merge. It is, though,
among the newest 100 rows *of each host*, and each host's rows are contiguous and sorted by time.
A by-time query therefore walks every planned range entity by entity:

1. **Probe**: read forward from the cursor: one row, or, when the entity is read forward anyway, a
   first page. The first key names the next entity: the values of
   :func:`~pipeline.runtime.read.plan.entity_fields` decoded from it.
2. **Read the entity** (:func:`~pipeline.runtime.read.plan.entity_bounds`): plan the query
   again with the entity's fields added to ``where``. That plan pins every byte up to the time
   segment, so it gives the entity's whole key range (where the walk goes next) and, with the
   query's time range, the part of it to read. That part is paged like any range
   (:func:`~pipeline.runtime.read.range.page_range`), in the wanted time direction (a reverse
   scan when the design stores time the other way), at most ``limit`` rows, and it stops early
   once its rows cannot enter the top ``limit`` kept so far
   (:class:`~pipeline.runtime.read.merge.Cutoff`).
3. **Skip** to the end of the entity's key range and probe again.

The merge is :func:`~pipeline.runtime.read.merge.top_k` by ``(time, logical key)``. Cost: one
or two scanner calls per entity (a forward walk reads the entity's first rows with its probe) and at
most ``limit`` rows per entity, fewer once the top ``limit`` is full, instead of every row of the
table. A design where the entity's rows are not one contiguous, time-sorted run (a coarse time
bucket before an entity field, or a key that does not store the time field in order) is refused
with :class:`~pipeline.runtime.read.errors.QueryError`: when the query is planned, or, naming the
range, at the first entity that shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from pipeline.errors import HBaseIngestError
from pipeline.runtime.read.errors import QueryError
from pipeline.runtime.read.plan import EntityBounds, ScanRange, intersect
from pipeline.runtime.read.range import Fetch, page_range
from pipeline.runtime.read.rows import ScannedRow
from pipeline.runtime.read.stats import QueryStats, RangeStats, ReaderTotals

__all__ = ["walk_entities"]

async def walk_entities(fetch: Fetch, rng: ScanRange, send: MemoryObjectSendStream[list[ScannedRow]], *,
                        bounds: EntityBounds, reverse: bool, keep: Callable[[Any], bool] | None,
                        limit: int, first: Callable[[], int], page_size: int,
                        limiter: anyio.CapacityLimiter, stats: RangeStats, query: QueryStats,
                        totals: ReaderTotals, more: Callable[[bytes], bool]) -> None:
    """Send the best ``limit`` rows (or fewer, once ``more`` says no) of every entity of ``rng``
    into ``send``, an entity at a time (the module docstring gives the walk). ``reverse``: read an
    entity's part with a reverse scan. ``first()``: the first page size for the next entity (the
    caller makes it small once the top-k is full). Updates ``stats`` (``entities`` too), ``query``
    and ``totals``.

    A forward walk reads ``first()`` rows at the probe: when the entity's part starts at or before
    the probe's key, the probe's rows of that part are its first rows in the wanted order, and the
    part is read on from there (one scanner call per entity when the probe holds what it needs)."""
    cursor = rng.start
    while True:
        n = 1 if reverse else max(1, min(first(), limit))
        async with limiter:
            query.scanners_opened += 1
            totals.scanners += 1
            probe = await fetch(cursor, rng.stop, n, False)
        stats.pages += 1
        if not probe:
            return
        key = probe[0][0]
        query.rows_scanned += len(probe)
        totals.scanned += len(probe)
        stats.rows_scanned += len(probe)
        try:
            skip_to, parts = bounds(key)
        except HBaseIngestError as exc:  # the key does not decode, or the entity does not plan
            raise QueryError(f"row {key!r} cannot be walked by entity: {exc}", table=query.table,
                             range_label=rng.label) from exc
        if skip_to and skip_to <= key:  # defensive: a walk that does not advance would never end
            raise QueryError(f"the entity of row {key!r} ends at or before it", table=query.table,
                             range_label=rng.label)
        stats.entities += 1
        for idx, (start, stop) in enumerate(parts):
            clipped = intersect(start, stop, rng.start, rng.stop)
            if clipped is None:
                continue
            low, high = clipped
            sent = 0
            if idx == 0 and not reverse and low <= key:
                own = [r for r in probe if not high or r[0] < high]
                goes_on = len(own) == n  # the probe ended inside the part
                if keep is not None:
                    own = [r for r in own if keep(r)]
                own = own[:limit]
                if own:
                    await send.send(own)
                sent = len(own)
                stats.rows_matched += sent
                if not goes_on or sent >= limit or not more(probe[-1][0]):
                    continue
                low = probe[-1][0] + b"\x00"
            one = RangeStats(rng.label)
            await page_range(fetch, ScanRange(low, high, rng.label), send, reverse=reverse, keep=keep,
                             limit=limit - sent, first_page=first(), page_size=page_size, limiter=limiter,
                             stats=one, query=query, totals=totals, more=more)
            stats.pages += one.pages
            stats.rows_scanned += one.rows_scanned
            stats.rows_matched += one.rows_matched
        if not skip_to or (rng.stop and skip_to >= rng.stop):
            return
        cursor = skip_to
