"""The worker's flush timer: seals batches that reached ``max_batch_age_ms``, logs the digests of
bounded per-event warnings once their interval passed, and refreshes every table's region map every
30 s (a failed refresh is logged and tried again at the next one; writes refresh on their own when
HBase says a region moved).

It wakes only when something is due: at the oldest open batch's deadline (newer batches have later
ones), or, while no batch is open, when the worker opens one (:meth:`TimerWake.opened`) or after
:data:`IDLE_WAKE_S` for the digests and the refresh."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio
import structlog

from pipeline.core.ingest.batcher import Batch, RegionBatcher
from pipeline.errors import HBaseError
from pipeline.runtime.ingest.report import EventWarnings
from pipeline.runtime.ingest.writer import BatchWriter

__all__ = ["TimerWake", "flush_timer"]

log = structlog.get_logger("hbase_ingest.worker")
REGION_REFRESH_S = 30.0
IDLE_WAKE_S = 1.0


class TimerWake:
    """Wakes the flush timer while it waits with no batch open. ``opened()`` is cheap when the
    timer is not waiting (an attribute test)."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def opened(self) -> None:
        """Rows were added to the batcher: a batch may be open now."""
        if self._event is not None:
            self._event.set()

    async def wait(self, seconds: float) -> None:
        self._event = anyio.Event()
        try:
            with anyio.move_on_after(seconds):
                await self._event.wait()
        finally:
            self._event = None


async def flush_timer(batcher: RegionBatcher, submit: Callable[[Sequence[Batch]], Awaitable[None]],
                      writer: BatchWriter, warnings: EventWarnings, wake: TimerWake) -> None:
    """Run until cancelled (the worker's task group owns it). ``submit`` sends sealed batches
    behind every batch sealed before them."""
    last_refresh = time.monotonic()
    while True:
        deadline = batcher.next_deadline()
        now = int(time.monotonic() * 1000)
        if deadline is not None and deadline <= now:
            await submit(batcher.due(now))  # behind any batch sealed before them
            continue
        if deadline is None:
            await wake.wait(IDLE_WAKE_S)
        else:
            await anyio.sleep(max((deadline - now) / 1000, 0.001))
        warnings.flush()
        if time.monotonic() - last_refresh > REGION_REFRESH_S:
            last_refresh = time.monotonic()
            for table in list(writer.maps):
                try:
                    await writer.refresh(table)
                except HBaseError as exc:
                    log.warning("region_refresh_failed", table=table, error=str(exc))
