"""The observer that feeds a worker's :class:`~pipeline.runtime.metrics.registry.Metrics`."""

from __future__ import annotations

from pipeline.core.model import TopicPartition
from pipeline.runtime.ingest.observer import Observer
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics.registry import Metrics

__all__ = ["MetricsObserver", "attach_metrics"]


class MetricsObserver(Observer):
    """Feeds :class:`Metrics`, then forwards every event to ``inner`` (the observer it replaced)."""

    def __init__(self, metrics: Metrics, inner: Observer | None = None) -> None:
        self.metrics = metrics
        self.inner = inner or Observer()

    def consumed(self, tp: TopicPartition, n: int) -> None:
        self.metrics.on_consumed(tp, n)
        self.inner.consumed(tp, n)

    def batch_written(self, table: str, region: str, server: str, rows: int, size: int, seconds: float) -> None:
        self.metrics.on_batch(table, region, server, rows, size, seconds)
        self.inner.batch_written(table, region, server, rows, size, seconds)

    def retried(self, table: str, reason: str) -> None:
        self.metrics.retries.labels(table, reason).inc()
        self.inner.retried(table, reason)

    def dead_lettered(self, reason: str) -> None:
        self.metrics.dead.labels(reason).inc()
        self.inner.dead_lettered(reason)

    def committed(self, tp: TopicPartition, offset: int) -> None:
        self.inner.committed(tp, offset)

    def skipped(self, tp: TopicPartition, n: int) -> None:
        self.metrics.skipped.labels(tp.topic, str(tp.partition)).inc(n)
        self.inner.skipped(tp, n)

    def in_flight(self, nbytes: int) -> None:
        self.inner.in_flight(nbytes)  # the gauge reads worker.in_flight when scraped

    def assigned(self, tps: list[TopicPartition]) -> None:
        self.metrics.on_assigned(tps)
        self.inner.assigned(tps)

    def revoked(self, tps: list[TopicPartition]) -> None:
        self.metrics.on_revoked(tps)
        self.inner.revoked(tps)


def attach_metrics(worker: Worker, *, skew_window_s: float = 60.0) -> Metrics:
    """Create the worker's :class:`Metrics` and install its observer (wrapping the current one).
    Call before ``worker.run`` starts: the batch writer keeps the observer it was given."""
    if isinstance(worker.observer, MetricsObserver):
        return worker.observer.metrics
    metrics = Metrics(worker, skew_window_s=skew_window_s)
    worker.observer = MetricsObserver(metrics, worker.observer)
    return metrics
