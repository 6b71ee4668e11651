"""Writing sealed batches to HBase: retries with exponential backoff and full jitter, region-map
refresh on staleness, per-row ordering, and isolation of mutations HBase refuses.

Ordering: two changes of one row land in the order :meth:`BatchWriter.write` was called with their
batches (the order the batcher sealed them). A batch starts once every batch of its table that
entered ``write`` before it and holds one of its rows has been written (or refused); batches with
no row in common run side by side, whatever region or server they are for. Entering happens before
the first await of ``write``, so the writers' FIFO stream of sealed batches fixes the order.

Contract of :meth:`BatchWriter.write`: it returns only when every mutation of the batch was
acknowledged by HBase, or was refused by HBase itself (non-retryable :class:`HBaseRequestError`) and
handed to ``reject`` (the dead-letter path). Retryable failures (unavailable, timeout, stale region)
are retried until ``retry_deadline_s`` (None: forever); past it :class:`WriteAbandoned` is raised and
the worker stops *without* committing the batch's offsets.
"""

from __future__ import annotations

import operator
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from itertools import compress, repeat
from typing import Protocol

import anyio
import structlog

from pipeline.core.backoff import Backoff
from pipeline.core.ingest.batcher import Batch
from pipeline.core.ingest.regions import Region, RegionMap, RegionMaps
from pipeline.core.model import Mutation
from pipeline.errors import HBaseError, HBaseIngestError, HBaseRequestError, RegionMapStale
from pipeline.ports import RegionLocator, RowSink
from pipeline.runtime.ingest.ledger import AckLedger, now_ms
from pipeline.runtime.ingest.observer import Observer
from pipeline.settings import WriterSettings

__all__ = ["BatchWriter", "WriteAbandoned", "load_region_map"]

_ROW = operator.attrgetter("row")

log = structlog.get_logger("hbase_ingest.writer")


class _Writable(RowSink, RegionLocator, Protocol):
    """What the writer needs of HBase: writes, and region lists to refresh its maps."""


class WriteAbandoned(HBaseIngestError):
    """HBase stayed unavailable past the retry deadline. Offsets of the batch are not committed."""


async def load_region_map(hbase: RegionLocator, table: str) -> RegionMap:
    regions = await hbase.regions(table)
    return RegionMap(Region(table, r.start_key, r.end_key, f"{r.server}:{r.port}", r.name, r.region_id)
                     for r in regions)


class _Hold:
    """What holds a batch's rows in :attr:`BatchWriter._holders`: set ``done`` once the batch is written
    (or refused); ``taken`` once a later batch holds one of its rows (the release then keeps those)."""

    __slots__ = ("done", "taken")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.taken = False


class BatchWriter:
    def __init__(self, hbase: _Writable, settings: WriterSettings, maps: RegionMaps,
                 observer: Observer, reject: Callable[[Mutation, str], Awaitable[None]],
                 ledger: AckLedger | None = None) -> None:
        self.hbase = hbase
        self.ledger = ledger
        self.settings = settings
        self.maps = maps
        self.observer = observer
        self.reject = reject
        self.backoff = Backoff(settings.retry_initial_ms, settings.retry_max_ms,
                               deadline_ms=None if settings.retry_deadline_s is None
                               else settings.retry_deadline_s * 1000)
        self.retries = 0
        self.refreshes = 0
        #: table -> row -> the batch that entered ``write`` last of those holding the row and not done
        self._holders: dict[str, dict[bytes, _Hold]] = {}
        self._refresh_lock = anyio.Lock()

    async def refresh(self, table: str) -> RegionMap:
        async with self._refresh_lock:
            new = await load_region_map(self.hbase, table)
            if self.maps.replace(table, new):
                log.info("region_map_refreshed", table=table, regions=len(new))
            self.refreshes += 1
            return new

    async def write(self, batch: Batch) -> None:
        # Enter before the first await: the batch waits for the last earlier batch holding each of its
        # rows (which waited for the one before it, and so on), so two changes of one row never
        # overtake each other, even when a split or a move sent the row to another region or server.
        holders = self._holders.get(batch.table)
        if holders is None:
            holders = self._holders[batch.table] = {}
        hold = _Hold()
        # per row: C-level iteration only (map, dict.fromkeys), no Python loop over the batch's rows
        mine = dict.fromkeys(map(_ROW, batch.mutations), hold)
        before = set(map(holders.get, mine))
        before.discard(None)
        for earlier in before:
            earlier.taken = True  # type: ignore[union-attr]  # None was discarded
        holders.update(mine)
        try:
            for earlier in before:
                await earlier.done.wait()  # type: ignore[union-attr]
            await self._write_with_retry(batch)
        finally:
            if hold.taken:  # a later batch holds some of these rows now: release only those still held here
                deque(map(holders.__delitem__, compress(mine, map(operator.is_, map(holders.get, mine), repeat(hold)))),
                      maxlen=0)
            else:
                deque(map(holders.__delitem__, mine), maxlen=0)
            hold.done.set()

    async def _write_with_retry(self, batch: Batch) -> None:
        attempt = 0
        started = time.monotonic()
        while True:
            t0 = time.monotonic()
            sent_ms = now_ms() if self.ledger is not None else 0
            try:
                gateway = await self.hbase.write(batch.table, batch.mutations, server=batch.server)
            except HBaseRequestError as exc:
                if self.ledger is not None:
                    self.ledger.failed(batch, sent_ms, attempt, str(exc), refused=True)
                await self._isolate(batch, exc, sent_ms, attempt, time.monotonic() - t0)
                return
            except HBaseError as exc:
                if self.ledger is not None:
                    self.ledger.failed(batch, sent_ms, attempt, f"{type(exc).__name__}: {exc}")
                if not exc.retryable:
                    raise
                if isinstance(exc, RegionMapStale):
                    try:
                        await self.refresh(batch.table)
                    except HBaseError as refresh_exc:
                        log.warning("region_refresh_failed", table=batch.table, error=str(refresh_exc))
                delay = self.backoff.next_delay_ms(attempt, random.random(), (time.monotonic() - started) * 1000)
                if delay is None:
                    raise WriteAbandoned(
                        f"table {batch.table!r} server {batch.server!r} ({_regions(batch)}): still failing after "
                        f"{time.monotonic() - started:.0f} s ({exc}); offsets not committed") from exc
                self.retries += 1
                self.observer.retried(batch.table, type(exc).__name__)
                log.warning("batch_retry", table=batch.table, server=batch.server, regions=len(batch.regions),
                            attempt=attempt + 1,
                            delay_ms=round(delay), error=str(exc))
                attempt += 1
                await anyio.sleep(delay / 1000)
            else:
                if self.ledger is not None:
                    self.ledger.acknowledged(batch, sent_ms, gateway, attempt)
                self.observer.batch_written(batch.table, batch.regions, batch.server, batch.rows, batch.size,
                                            time.monotonic() - t0)
                return

    async def _isolate(self, batch: Batch, exc: HBaseRequestError, sent_ms: int, attempt: int,
                       elapsed_s: float) -> None:
        """HBase refused the batch: write its mutations one by one; refused ones go to ``reject``. When
        the sink says which were applied (``exc.unapplied``), those count as written and only the others
        are written again."""
        log.warning("batch_refused", table=batch.table, server=batch.server, regions=len(batch.regions),
                    rows=batch.rows, unapplied=batch.rows if exc.unapplied is None else len(exc.unapplied),
                    error=str(exc))
        if batch.rows == 1 and exc.unapplied != ():
            await self.reject(batch.mutations[0], str(exc))
            return
        rmap = self.maps.get(batch.table)

        def part(ms: list[Mutation]) -> Batch:  # a batch of some of the batch's mutations
            regions: dict[str, int] = {}
            for m in ms:
                name = rmap.locate(m.row).name if rmap is not None else "?"
                regions[name] = regions.get(name, 0) + 1
            return Batch(batch.id, batch.table, batch.server, ms, sum(m.size for m in ms), batch.created_ms,
                         batch.reason, sum(len(m.cells) for m in ms), regions, batch.group)
        again = list(batch.mutations)
        if exc.unapplied is not None:
            unapplied = set(exc.unapplied)
            applied = part([m for i, m in enumerate(batch.mutations) if i not in unapplied])
            if applied.rows:
                if self.ledger is not None:
                    self.ledger.acknowledged(applied, sent_ms, None, attempt)
                self.observer.batch_written(batch.table, applied.regions, batch.server, applied.rows, applied.size,
                                            elapsed_s)
            again = [batch.mutations[i] for i in exc.unapplied]
        for m in again:
            await self._write_with_retry(part([m]))


def _regions(batch: Batch) -> str:
    """The batch's regions for an error message: the name of one, or how many."""
    if len(batch.regions) == 1:
        return f"region {next(iter(batch.regions))!r}"
    return f"{len(batch.regions)} regions"
