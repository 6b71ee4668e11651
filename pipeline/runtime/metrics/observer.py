"""The observer that feeds a worker's :class:`~pipeline.runtime.metrics.registry.Metrics`."""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.core.model import TopicPartition
from pipeline.runtime.ingest.observer import Observer
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics.registry import Metrics

__all__ = ["MetricsObserver", "attach_metrics", "metrics_of"]


class MetricsObserver(Observer):
    """Feeds :class:`Metrics` from the worker's events."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def consumed(self, tp: TopicPartition, n: int) -> None:
        self.metrics.on_consumed(tp, n)

    def batch_written(self, table: str, regions: Mapping[str, int], server: str, rows: int, size: int,
                      seconds: float) -> None:
        self.metrics.on_batch(table, regions, server, rows, size, seconds)

    def retried(self, table: str, reason: str) -> None:
        self.metrics.retries.labels(table, reason).inc()

    def dead_lettered(self, reason: str) -> None:
        self.metrics.dead.labels(reason).inc()

    def skipped(self, tp: TopicPartition, n: int) -> None:
        self.metrics.skipped.labels(tp.topic, str(tp.partition)).inc(n)

    # in_flight: the gauge reads worker.in_flight when scraped; committed: read from worker.stats

    def assigned(self, tps: list[TopicPartition]) -> None:
        self.metrics.on_assigned(tps)

    def revoked(self, tps: list[TopicPartition]) -> None:
        self.metrics.on_revoked(tps)


def metrics_of(worker: Worker) -> Metrics | None:
    """The :class:`Metrics` an earlier :func:`attach_metrics` gave ``worker``, if any."""
    return next((o.metrics for o in worker.observer.members if isinstance(o, MetricsObserver)), None)


def attach_metrics(worker: Worker, *, skew_window_s: float = 60.0) -> Metrics:
    """The worker's :class:`Metrics`, made and added to its observers on the first call (before or
    while it runs); later calls return the same."""
    metrics = metrics_of(worker)
    if metrics is None:
        metrics = Metrics(worker, skew_window_s=skew_window_s)
        worker.observer.add(MetricsObserver(metrics))
    return metrics
