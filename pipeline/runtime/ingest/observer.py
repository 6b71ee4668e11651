"""What the worker reports while it runs. :class:`WorkerStats` is a plain snapshot-able record;
:class:`Observer` receives events as they happen (the Prometheus exporter implements it)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from pipeline.core.model import TopicPartition

__all__ = ["Observer", "WorkerStats"]


@dataclass
class WorkerStats:
    started_s: float = field(default_factory=time.monotonic)
    first_record_s: float | None = None
    consumed: int = 0
    mutations: int = 0
    rows_written: int = 0
    batches_written: int = 0
    bytes_written: int = 0
    dead_lettered: int = 0
    retries: int = 0
    commits: int = 0
    region_refreshes: int = 0
    pauses: int = 0
    dead_by_reason: Counter[str] = field(default_factory=Counter)
    rows_by_table: Counter[str] = field(default_factory=Counter)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    skipped: dict[TopicPartition, int] = field(default_factory=dict)  # offsets Kafka never delivered

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_s


class Observer:
    """No-op hooks; override what you need. Called on the event loop, must not block."""

    def consumed(self, tp: TopicPartition, n: int) -> None: ...

    def batch_written(self, table: str, region: str, server: str, rows: int, size: int, seconds: float) -> None: ...

    def retried(self, table: str, reason: str) -> None: ...

    def dead_lettered(self, reason: str) -> None: ...

    def committed(self, tp: TopicPartition, offset: int) -> None: ...

    def skipped(self, tp: TopicPartition, n: int) -> None:
        """``n`` offsets of ``tp`` will never be delivered (retention, compaction, transaction markers)."""

    def in_flight(self, nbytes: int) -> None: ...

    def assigned(self, tps: list[TopicPartition]) -> None: ...

    def revoked(self, tps: list[TopicPartition]) -> None: ...
