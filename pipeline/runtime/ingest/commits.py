"""The worker's commits: flush -> HBase acknowledges -> tracker marks done -> commit the highest
contiguous offset + 1, per partition still assigned. Never past unwritten data.

A bounded run's partition whose fetch position reached its stop offset with nothing of it pending is
complete up to the stop offset, even when the last offsets before it were never delivered (an empty
slice, compaction, transaction markers): those are counted as skipped.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import structlog

from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.progress import Progress, Skip
from pipeline.core.model import TopicPartition
from pipeline.errors import KafkaError
from pipeline.ports import RecordSource
from pipeline.runtime.ingest.observer import Observer, WorkerStats

__all__ = ["Committer"]

log = structlog.get_logger("hbase_ingest.worker")
_POSITION_TIMEOUT_S = 0.2


class Committer:
    """Commits what the tracker says is done through ``source``; ``on_skip`` hears of offsets found
    never delivered at a stop offset."""

    def __init__(self, source: RecordSource, tracker: OffsetTracker, progress: Progress, observer: Observer,
                 stats: WorkerStats, on_skip: Callable[[Skip], None]) -> None:
        self.source = source
        self.tracker = tracker
        self.progress = progress
        self.observer = observer
        self.stats = stats
        self.on_skip = on_skip

    def __repr__(self) -> str:
        return f"Committer(commits={self.stats.commits}, committed={len(self.progress.committed)} partitions)"

    def pending(self, tp: TopicPartition) -> bool:
        """Records of ``tp`` are registered and not yet done, or fetched and not yet registered (the
        fetch position is past them, so it says nothing about what was written)."""
        found = self.tracker.pending(tp)
        return tp in self.progress.in_hand or (found is not None and found.pending_records > 0)

    async def reached_stop(self) -> dict[TopicPartition, int]:
        """Partitions complete up to their stop offset by position (see the module docstring)."""
        out: dict[TopicPartition, int] = {}
        busy = [tp for tp in self.progress.assigned if self.pending(tp)]
        for tp, end in self.progress.stop_candidates(busy):
            position = -1
            with anyio.move_on_after(_POSITION_TIMEOUT_S):
                try:
                    position = await self.source.position(tp)
                except KafkaError:  # not assigned any more, or no position yet: not complete
                    position = -1
            if self.pending(tp):  # checked again: a fetch may have landed meanwhile
                continue
            reached = self.progress.reached_stop(tp, end, position)
            if reached is False:
                continue
            if isinstance(reached, Skip):
                self.on_skip(reached)
            log.debug("stop_offset_reached_by_position", tp=str(tp), position=position, end=end)
            out[tp] = end
        return out

    async def commit(self) -> bool:
        """Commit what is done; True when something was committed. A refused commit (a rebalance in
        progress, Kafka unreachable) logs a warning and leaves it to the next call."""
        offsets = self.progress.committable(self.tracker.committable())
        for tp, end in (await self.reached_stop()).items():
            offsets[tp] = max(offsets.get(tp, end), end)
        if not offsets:
            return False
        try:
            await self.source.commit(offsets)
        except KafkaError as exc:
            log.warning("commit_failed", error=str(exc), retryable=exc.retryable)
            return False
        for tp, off in offsets.items():
            self.tracker.mark_committed(tp, off)
            self.observer.committed(tp, off)
        self.progress.mark_committed(offsets)
        self.stats.commits += 1
        return True
