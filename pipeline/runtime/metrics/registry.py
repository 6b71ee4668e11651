"""Prometheus metrics, ``/healthz`` and ``/readyz`` for a worker (the live worker and backfill).

Each :class:`Metrics` owns a dedicated ``CollectorRegistry`` (never the global one), so several
workers can run in one process. It is fed by a :class:`MetricsObserver` installed on the worker
*before* ``worker.run`` starts (:func:`attach_metrics`; the batch writer captures the observer when
the run begins). Offsets, lag and skew are computed when scraped.

Exported series (prefix ``hbase_ingest_``):

=====================================  =========  ==================================================
name                                   type       labels / meaning
=====================================  =========  ==================================================
events_consumed_total                  counter    topic, partition: records routed (also dead)
rows_written_total                     counter    table: rows acknowledged by HBase
region_rows_written_total              counter    table, region, server
dead_lettered_total                    counter    reason
retries_total                          counter    table, reason (exception type)
offsets_skipped_total                  counter    topic, partition: offsets Kafka never delivered
                                                  (retention, compaction, transaction markers)
batch_rows / batch_bytes               histogram  table
flush_seconds                          histogram  table, server: one ``write`` round trip
reader_query_seconds                   histogram  table: the reader calls ``observe_query``
event_latency_seconds                  histogram  from a record's Kafka timestamp to done: its writes
                                                  acknowledged and every earlier record of its
                                                  partition too (:mod:`pipeline.core.ingest.latency`)
in_flight_bytes                        gauge      bytes consumed but not yet acknowledged
committed_offset                       gauge      topic, partition: the group's next offset
log_end_offset                         gauge      topic, partition: refreshed every few seconds
consumer_lag                           gauge      topic, partition: log end - committed (>= 0)
backfill_remaining                     gauge      topic, partition: stop offset - committed
region_window_rows                     gauge      table, region, start_key: rows in the skew window
region_skew                            gauge      table: max / mean rows per region over the window
                                                  (idle regions count; 1 even, N: one hot)
assigned_partitions / ready            gauge      the worker's assignment size; 1 when ready
gateway_up                             gauge      gateway (host:thrift1 port): 1 up, 0 taken out
gateway_calls_total                    counter    gateway: HBase calls started on it
gateway_errors_total                   counter    gateway: calls that failed on it (any cause)
=====================================  =========  ==================================================

HTTP (one small anyio server, ``Connection: close``): ``GET /metrics`` (Prometheus text format),
``GET /healthz`` (200 while the process serves), ``GET /readyz`` (200 when the worker joined its
group, the assignment is known and HBase answered a cheap call within the last few seconds; 503
with the failing checks otherwise).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from pipeline.core.model import TopicPartition
from pipeline.core.skew import SkewWindow
from pipeline.rowkey import format_key
from pipeline.runtime.ingest.worker import Worker

__all__ = ["Metrics"]

_ROW_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10_000)
_BYTE_BUCKETS = (1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SKEW_SLOTS = 12


class Metrics:
    """Every metric of one worker, in its own registry. Hooks are cheap and never block."""

    def __init__(
        self,
        worker: Worker,
        *,
        skew_window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.worker = worker
        self.clock = clock
        self.skew_window_s = skew_window_s
        self.registry = CollectorRegistry()
        r = self.registry
        p = "hbase_ingest_"
        self.events = Counter(
            p + "events_consumed",
            "Kafka records routed (dead-lettered ones too)",
            ["topic", "partition"],
            registry=r,
        )
        self.rows = Counter(p + "rows_written", "Rows acknowledged by HBase", ["table"], registry=r)
        self.region_rows = Counter(
            p + "region_rows_written",
            "Rows acknowledged by HBase, per region",
            ["table", "region", "server"],
            registry=r,
        )
        self.dead = Counter(
            p + "dead_lettered",
            "Records or mutations sent to the dead-letter topic",
            ["reason"],
            registry=r,
        )
        self.retries = Counter(p + "retries", "Batch write retries", ["table", "reason"], registry=r)
        self.skipped = Counter(
            p + "offsets_skipped",
            "Offsets Kafka never delivered (deleted by retention before they were read, compacted away, "
            "transaction markers)",
            ["topic", "partition"],
            registry=r,
        )
        self.batch_rows = Histogram(
            p + "batch_rows", "Rows per written batch", ["table"], buckets=_ROW_BUCKETS, registry=r
        )
        self.batch_bytes = Histogram(
            p + "batch_bytes",
            "Estimated bytes per written batch",
            ["table"],
            buckets=_BYTE_BUCKETS,
            registry=r,
        )
        self.flush_seconds = Histogram(
            p + "flush_seconds",
            "Latency of one batch write to HBase",
            ["table", "server"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.query_seconds = Histogram(
            p + "reader_query_seconds",
            "Latency of one reader query",
            ["table"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(p + "in_flight_bytes", "Bytes consumed but not yet acknowledged by HBase", registry=r)
        # read when scraped: the worker reports in-flight bytes only after a fetch, not as writes drain
        self.in_flight.set_function(lambda: float(worker.in_flight))
        self.windows: dict[str, SkewWindow] = {}
        self._region_children: dict[tuple[str, str, str], Counter] = {}  # (table, region, server) -> child
        self.assigned: set[TopicPartition] = set()
        self.assignment_known = False
        self.end_offsets: dict[TopicPartition, int] = {}
        self.start_offsets: dict[TopicPartition, int] = {}
        self.hbase_ok = False
        self.hbase_error: str | None = "not checked yet"
        self._seen_consumed = worker.stats.consumed
        r.register(_OffsetsCollector(self))
        r.register(_GatewayCollector(self))
        r.register(_LatencyCollector(worker))

    def __repr__(self) -> str:
        return f"Metrics(group={self.worker.group_id!r}, assigned={len(self.assigned)}, tables={sorted(self.windows)})"

    # -- fed by the observer ----------------------------------------------------------------------

    def on_consumed(self, tp: TopicPartition, n: int) -> None:
        # The worker reports the chunk size, which can include records past its stop offset that it
        # skipped; the delta of its own counter is what it actually processed.
        done = self.worker.stats.consumed
        processed = done - self._seen_consumed
        self._seen_consumed = done
        if processed > 0:
            self.events.labels(tp.topic, str(tp.partition)).inc(processed)

    def on_batch(self, table: str, regions: Mapping[str, int], server: str, rows: int, size: int,
                 seconds: float) -> None:
        """One written batch: ``regions`` counts its rows per region name, all on ``server``."""
        self.rows.labels(table).inc(rows)
        # A batch of a server holds rows of up to every region it serves (hundreds in a big table):
        # the labelled children are kept here, as a dict lookup costs a fraction of `labels()`.
        children = self._region_children
        for region, n in regions.items():
            child = children.get((table, region, server))
            if child is None:
                child = children[(table, region, server)] = self.region_rows.labels(table, region, server)
            child.inc(n)
        self.batch_rows.labels(table).observe(rows)
        self.batch_bytes.labels(table).observe(size)
        self.flush_seconds.labels(table, server).observe(seconds)
        window = self.windows.get(table)
        if window is None:
            window = self.windows[table] = SkewWindow(self.skew_window_s, _SKEW_SLOTS)
        window.record_many(regions, self.clock())

    def on_assigned(self, tps: Iterable[TopicPartition]) -> None:
        self.assigned.update(tps)
        self.assignment_known = True

    def on_revoked(self, tps: Iterable[TopicPartition]) -> None:
        self.assigned.difference_update(tps)

    # -- for the reader ---------------------------------------------------------------------------

    def observe_query(self, table: str, seconds: float) -> None:
        """Record one reader query's latency (the reader calls this; any thread is fine)."""
        self.query_seconds.labels(table).observe(seconds)

    @contextmanager
    def time_query(self, table: str) -> Iterator[None]:
        """``with metrics.time_query("t"): ...`` observes the block's duration."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.observe_query(table, time.perf_counter() - t0)

    # -- derived, computed when scraped -----------------------------------------------------------

    def committed(self) -> dict[TopicPartition, int]:
        """The group's next offset per assigned partition; for a partition with no commit yet, where
        the worker starts (its start offset, else the log start)."""
        out: dict[TopicPartition, int] = {}
        known = self.worker.stats.committed
        for tp in self.assigned:
            if tp in known:
                out[tp] = known[tp]
            elif tp in self.worker.start_offsets:
                out[tp] = self.worker.start_offsets[tp]
            elif tp in self.start_offsets:
                out[tp] = self.start_offsets[tp]
        return out

    def lag(self) -> dict[TopicPartition, int]:
        committed = self.committed()
        return {tp: max(0, end - committed[tp]) for tp, end in self.end_offsets.items() if tp in committed}

    def region_rows_in_window(self, table: str) -> dict[str, int]:
        """Rows per region name over the skew window; regions of the table that got none are 0."""
        window = self.windows.get(table)
        counts = window.counts(self.clock()) if window is not None else {}
        region_map = self.worker.maps.get(table)
        names = [r.name for r in region_map.regions] if region_map is not None else []
        return {**dict.fromkeys(names, 0), **counts}

    def skew(self, table: str) -> float:
        window = self.windows.get(table)
        if window is None:
            return 0.0
        region_map = self.worker.maps.get(table)
        population = [r.name for r in region_map.regions] if region_map is not None else None
        return window.skew(self.clock(), population)

    def ready(self) -> tuple[bool, dict[str, str]]:
        """Readiness and the state of each check (``ok`` or why not)."""
        checks = {
            "worker": "ok" if self.worker.ready else (self.worker.waiting or "not running"),
            "assignment": "ok" if self.assignment_known else "no assignment yet",
            "hbase": "ok" if self.hbase_ok else f"unreachable: {self.hbase_error}",
        }
        return all(v == "ok" for v in checks.values()), checks

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _LatencyCollector:
    """Scrape-time: the worker's :class:`~pipeline.core.ingest.latency.LatencyHistogram`, in seconds."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self) -> Iterator[Metric]:
        h = self.worker.latency.histogram
        family = HistogramMetricFamily(
            "hbase_ingest_event_latency_seconds",
            "From a record's Kafka timestamp until it and every earlier record of its partition are written",
        )
        buckets = [(_seconds(bound), float(n)) for bound, n in zip(h.bounds, h.cumulative, strict=True)]
        family.add_metric([], [*buckets, ("+Inf", float(h.count))], h.sum_ms / 1000)
        yield family


def _seconds(ms: int) -> str:
    return repr(ms / 1000)


class _OffsetsCollector:
    """Scrape-time series: offsets, lag, backfill progress, per-region window rows and skew."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.m
        p = "hbase_ingest_"
        committed = m.committed()
        g = GaugeMetricFamily(
            p + "committed_offset",
            "Next offset to read, committed by the group",
            labels=["topic", "partition"],
        )
        for tp, off in sorted(committed.items()):
            g.add_metric([tp.topic, str(tp.partition)], off)
        yield g
        g = GaugeMetricFamily(
            p + "log_end_offset",
            "Log end offset (refreshed periodically)",
            labels=["topic", "partition"],
        )
        for tp, off in sorted(m.end_offsets.items()):
            g.add_metric([tp.topic, str(tp.partition)], off)
        yield g
        g = GaugeMetricFamily(
            p + "consumer_lag",
            "Log end offset minus committed offset",
            labels=["topic", "partition"],
        )
        for tp, lag in sorted(m.lag().items()):
            g.add_metric([tp.topic, str(tp.partition)], lag)
        yield g
        stop_at = m.worker.stop_at
        if stop_at:
            g = GaugeMetricFamily(
                p + "backfill_remaining",
                "Records left before the stop offset",
                labels=["topic", "partition"],
            )
            for tp, end in sorted(stop_at.items()):
                base = committed.get(tp, m.worker.stats.committed.get(tp))
                if base is not None:
                    g.add_metric([tp.topic, str(tp.partition)], max(0, end - base))
            yield g
        rows = GaugeMetricFamily(
            p + "region_window_rows",
            "Rows written per region over the skew window",
            labels=["table", "region", "start_key"],
        )
        skew = GaugeMetricFamily(
            p + "region_skew",
            "Max over mean rows per region over the skew window",
            labels=["table"],
        )
        for table in sorted(set(m.windows) | set(m.worker.maps)):
            region_map = m.worker.maps.get(table)
            starts = {r.name: r.start_key for r in region_map.regions} if region_map is not None else {}
            for name, n in m.region_rows_in_window(table).items():
                rows.add_metric([table, name, format_key(starts.get(name, b""))], n)
            skew.add_metric([table], m.skew(table))
        yield rows
        yield skew
        yield GaugeMetricFamily(p + "assigned_partitions", "Partitions assigned to this worker", value=len(m.assigned))
        yield GaugeMetricFamily(p + "ready", "1 when /readyz would answer 200", value=1 if m.ready()[0] else 0)


#: ``statistics()["native"]`` counters (``client = "native"``) -> (metric name, help)
_NATIVE = {
    "multi_calls": ("native_multi_calls", "Multi requests sent to region servers over HBase's RPC"),
    "actions_failed": ("native_actions_failed", "Mutations a region server failed or refused (retried ones too)"),
    "retries": ("native_retries", "Rounds of a native write after its first (failed actions only)"),
    "region_refreshes": ("native_region_refreshes", "Reads of a table's regions from hbase:meta"),
}


class _GatewayCollector:
    """Scrape-time series per HBase gateway, from the client's ``statistics()["gateways"]``, and the
    native client's counters (``statistics()["native"]``) when it writes."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        p = "hbase_ingest_"
        stats = self.m.worker.hbase.statistics()
        for key, value in sorted(stats.get("native", {}).items()):
            if key in _NATIVE:
                name, text = _NATIVE[key]
                yield CounterMetricFamily(p + name, text, value=value)
        gateways = stats.get("gateways", {})
        up = GaugeMetricFamily(p + "gateway_up", "1 while the HBase gateway is in use, 0 while taken out",
                               labels=["gateway"])
        calls = CounterMetricFamily(p + "gateway_calls", "HBase calls started on the gateway", labels=["gateway"])
        errors = CounterMetricFamily(p + "gateway_errors", "HBase calls that failed on the gateway",
                                     labels=["gateway"])
        for name, g in sorted(gateways.items()):
            up.add_metric([name], 1 if g["state"] == "up" else 0)
            calls.add_metric([name], g["calls"])
            errors.add_metric([name], g["errors"])
        yield up
        yield calls
        yield errors
