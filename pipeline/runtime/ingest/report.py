"""What a worker reports: its summary when it stops, and the per-event warnings it logs within bounds.

:class:`EventWarnings` logs dead letters and offsets Kafka never delivered through a
:class:`~pipeline.core.digest.LogDigest`: per kind and reason (dead letters) or partition (offsets),
the first occurrence in an interval is logged in full, later ones are counted and logged as one
``*_digest`` line per interval (``more``: how many, ``first``: a sample with its partition and
offset). The metrics count every one; the dead-letter topic's headers keep every record's detail.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from pipeline.core.digest import LogDigest
from pipeline.core.ingest.progress import Skip
from pipeline.core.model import TopicPartition
from pipeline.runtime.ingest.observer import Observer

__all__ = ["EventWarnings", "WorkerSummary"]

log = structlog.get_logger("hbase_ingest.worker")
DIGEST_INTERVAL_S = 10.0
_DIGEST_EVENTS = {"dead_lettered": "dead_lettered_digest", "offsets_skipped": "offsets_skipped_digest"}


@dataclass(frozen=True)
class WorkerSummary:
    consumed: int
    rows_written: int
    batches_written: int
    dead_lettered: int
    retries: int
    elapsed_s: float
    committed: dict[TopicPartition, int]
    streaming_s: float = 0.0  # from the first record to the end (excludes start-up and group join)
    skipped: dict[TopicPartition, int] = field(default_factory=dict)  # offsets Kafka never delivered
    #: upper bounds (ms) of the p50 and p99 latency from a record's timestamp to done (None: no record)
    latency_p50_ms: int | None = None
    latency_p99_ms: int | None = None

    @property
    def events_per_s(self) -> float:
        return self.consumed / self.elapsed_s if self.elapsed_s > 0 else 0.0


class EventWarnings:
    """Bounded warnings of one worker (see the module docstring). ``clock``: seconds, monotonic."""

    def __init__(self, observer: Observer, dead_letter_topic: str, *, interval_s: float = DIGEST_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.observer = observer
        self.dead_letter_topic = dead_letter_topic
        self.digest = LogDigest(interval_s)
        self.clock = clock

    def __repr__(self) -> str:
        return f"EventWarnings({self.digest!r})"

    def skipped(self, skip: Skip) -> None:
        """Offsets Kafka never delivered. One offset is usually a transaction marker (one per
        transaction: DEBUG); more is worth a look (retention, compaction, an aborted transaction)."""
        self.observer.skipped(skip.tp, skip.count)
        fields = {"tp": str(skip.tp), "start": skip.start, "end": skip.end, "count": skip.count}
        if skip.count == 1:
            log.debug("offsets_skipped", **fields)
        elif self.digest.note(f"offsets_skipped/{skip.tp}", fields, self.clock()):
            log.warning("offsets_skipped", **fields,
                        why="never delivered by Kafka: deleted by retention, compacted away, or transaction markers")

    def dead_lettered(self, reason: str, fields: dict[str, Any]) -> None:
        """A record (or a mutation HBase refused) is in the dead-letter topic."""
        self.observer.dead_lettered(reason)
        if self.digest.note(f"dead_lettered/{reason}", fields, self.clock()):
            log.warning("dead_lettered", reason=reason, **fields, topic=self.dead_letter_topic)

    def flush(self, *, final: bool = False) -> None:
        """Log the digests whose interval has passed (every pending one when ``final``)."""
        now = self.clock()
        for d in self.digest.drain(now) if final else self.digest.due(now):
            kind, _, what = d.key.partition("/")
            log.warning(_DIGEST_EVENTS[kind], what=what, more=d.count, over_s=round(d.until - d.since, 1),
                        first=dict(d.sample))
