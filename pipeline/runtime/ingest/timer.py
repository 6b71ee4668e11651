"""The worker's flush timer: seals batches that reached ``max_batch_age_ms`` (sleeping until the next
deadline, at most 50 ms at a time), logs the digests of bounded per-event warnings once their
interval passed, and refreshes every table's region map every 30 s (a failed refresh is logged and
tried again at the next one; writes refresh on their own when HBase says a region moved)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio
import structlog

from pipeline.core.ingest.batcher import Batch, RegionBatcher
from pipeline.errors import HBaseError
from pipeline.runtime.ingest.report import EventWarnings
from pipeline.runtime.ingest.writer import BatchWriter

__all__ = ["flush_timer"]

log = structlog.get_logger("hbase_ingest.worker")
REGION_REFRESH_S = 30.0


async def flush_timer(batcher: RegionBatcher, submit: Callable[[Sequence[Batch]], Awaitable[None]],
                      writer: BatchWriter, warnings: EventWarnings) -> None:
    """Run until cancelled (the worker's task group owns it). ``submit`` sends sealed batches
    behind every batch sealed before them."""
    last_refresh = time.monotonic()
    while True:
        deadline = batcher.next_deadline()
        now = int(time.monotonic() * 1000)
        if deadline is not None and deadline <= now:
            await submit(batcher.due(now))  # behind any batch sealed before them
            continue
        wait = 0.05 if deadline is None else min(0.05, (deadline - now) / 1000)
        await anyio.sleep(max(wait, 0.001))
        warnings.flush()
        if time.monotonic() - last_refresh > REGION_REFRESH_S:
            last_refresh = time.monotonic()
            for table in list(writer.maps):
                try:
                    await writer.refresh(table)
                except HBaseError as exc:
                    log.warning("region_refresh_failed", table=table, error=str(exc))
