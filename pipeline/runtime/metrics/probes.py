"""The metrics server's background work: the HBase probe behind ``/readyz``, log offsets for lag, and
:func:`serve_metrics`, which runs them with the HTTP server."""

from __future__ import annotations

import anyio
import structlog
from anyio.abc import TaskStatus

from pipeline.errors import HBaseIngestError
from pipeline.ports import OffsetReader
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics.observer import attach_metrics
from pipeline.runtime.metrics.registry import Metrics
from pipeline.runtime.metrics.server import MetricsServer
from pipeline.settings import MetricsSettings

__all__ = ["serve_metrics"]

log = structlog.get_logger("hbase_ingest.metrics")


async def _probe_hbase(metrics: Metrics, interval_s: float) -> None:
    while True:
        try:
            with anyio.fail_after(max(interval_s, 1.0) * 3):
                await metrics.worker.hbase.ping()
        except (HBaseIngestError, TimeoutError) as exc:  # "not ready"; the reason goes to /readyz
            metrics.hbase_ok = False
            metrics.hbase_error = str(exc) or type(exc).__name__
        else:
            metrics.hbase_ok = True
            metrics.hbase_error = None
        await anyio.sleep(interval_s)


async def _refresh(metrics: Metrics, reader: OffsetReader) -> None:
    tps = sorted(metrics.assigned | set(metrics.worker.stop_at or {}), key=lambda tp: (tp.topic, tp.partition))
    if not tps:
        return
    metrics.end_offsets = await reader.log_offsets(tps, "end")
    missing = [tp for tp in tps if tp not in metrics.worker.stats.committed and tp not in metrics.start_offsets]
    if missing:
        metrics.start_offsets.update(await reader.log_offsets(missing, "start"))


async def _refresh_offsets(metrics: Metrics, interval_s: float) -> None:
    """Log end (and, for partitions without a commit, log start) offsets through a group-less
    connection of its own, so the worker's consumer is never shared; a broker hiccup logs a warning
    and the next interval opens a new connection."""
    while True:
        try:
            async with metrics.worker.kafka.offset_reader() as reader:
                while True:
                    await _refresh(metrics, reader)
                    await anyio.sleep(interval_s)
        except HBaseIngestError as exc:  # Kafka's errors, translated by the adapter
            log.warning("end_offsets_refresh_failed", error=str(exc))
        await anyio.sleep(interval_s)


async def serve_metrics(
    settings: MetricsSettings,
    worker: Worker,
    *,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
    lag_interval_s: float = 3.0,
    probe_interval_s: float = 3.0,
) -> None:
    """Add the metrics observer to ``worker`` (before or while it runs), serve ``/metrics``,
    ``/healthz`` and ``/readyz`` on ``settings.host:settings.port`` (0: an ephemeral port), refresh
    lag and the HBase probe in the background, until cancelled. ``task_status.started(port)``
    reports the bound port."""
    metrics = attach_metrics(worker, skew_window_s=settings.skew_window_s)
    server = MetricsServer(metrics, settings.host, settings.port)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        tg.start_soon(_refresh_offsets, metrics, lag_interval_s, name="metrics-offsets")
        tg.start_soon(_probe_hbase, metrics, probe_interval_s, name="metrics-hbase-probe")
        task_status.started(port)
