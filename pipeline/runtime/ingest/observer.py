"""What the worker reports while it runs. :class:`WorkerStats` is a plain snapshot-able record;
:class:`Observer` receives events as they happen (the Prometheus exporter implements it);
:class:`Observers` hands each event to several, in the order they were added."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.core.model import TopicPartition

__all__ = ["Observer", "Observers", "WorkerStats"]


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

    def batch_written(self, table: str, regions: Mapping[str, int], server: str, rows: int, size: int,
                      seconds: float) -> None: ...

    def retried(self, table: str, reason: str) -> None: ...

    def dead_lettered(self, reason: str) -> None: ...

    def committed(self, tp: TopicPartition, offset: int) -> None: ...

    def skipped(self, tp: TopicPartition, n: int) -> None:
        """``n`` offsets of ``tp`` will never be delivered (retention, compaction, transaction markers)."""

    def in_flight(self, nbytes: int) -> None: ...

    def assigned(self, tps: list[TopicPartition]) -> None: ...

    def revoked(self, tps: list[TopicPartition]) -> None: ...


class Observers(Observer):
    """Every event to each observer of ``members``, in order. The worker holds one from its start and
    hands that same object to its committer and writer, so an observer added at any time (before or
    during ``run``) sees every event from then on."""

    def __init__(self, *members: Observer) -> None:
        self.members: list[Observer] = list(members)

    def add(self, observer: Observer) -> None:
        self.members.append(observer)

    def consumed(self, tp: TopicPartition, n: int) -> None:
        for o in self.members:
            o.consumed(tp, n)

    def batch_written(self, table: str, regions: Mapping[str, int], server: str, rows: int, size: int,
                      seconds: float) -> None:
        for o in self.members:
            o.batch_written(table, regions, server, rows, size, seconds)

    def retried(self, table: str, reason: str) -> None:
        for o in self.members:
            o.retried(table, reason)

    def dead_lettered(self, reason: str) -> None:
        for o in self.members:
            o.dead_lettered(reason)

    def committed(self, tp: TopicPartition, offset: int) -> None:
        for o in self.members:
            o.committed(tp, offset)

    def skipped(self, tp: TopicPartition, n: int) -> None:
        for o in self.members:
            o.skipped(tp, n)

    def in_flight(self, nbytes: int) -> None:
        for o in self.members:
            o.in_flight(nbytes)

    def assigned(self, tps: list[TopicPartition]) -> None:
        for o in self.members:
            o.assigned(tps)

    def revoked(self, tps: list[TopicPartition]) -> None:
        for o in self.members:
            o.revoked(tps)
