"""The Prometheus exporter without Kafka or HBase: observer hooks -> series, lag, skew, readiness, HTTP."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from connectors.memory import MemoryBroker, MemoryHBase
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import TopicPartition
from pipeline.runtime.ingest.observer import Observer
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics import Metrics, MetricsObserver, MetricsServer, attach_metrics, metrics_of
from pipeline.settings import load_settings
from tests.http_get import http_get

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _worker(observer: Observer | None = None) -> Worker:
    settings = load_settings(None, routes=[{"name": "r", "topic": "t", "table": "tbl", "rowkey": "[id]",
                                            "columns": {"d:v": "v"}}])
    worker = Worker(settings, MemoryHBase(), MemoryBroker(), observer=observer)  # __init__ does no I/O
    worker.maps.replace("tbl", RegionMap(Region("tbl", s, e, "rs1:16020", f"tbl,{s.decode()},1.")
                                         for s, e in ((b"", b"b"), (b"b", b"c"), (b"c", b"d"), (b"d", b""))))
    return worker


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


class _Recorder(Observer):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def consumed(self, tp: TopicPartition, n: int) -> None:
        self.calls.append("consumed")

    def dead_lettered(self, reason: str) -> None:
        self.calls.append("dead_lettered")


def test_attach_adds_one_metrics_observer_beside_the_workers_own() -> None:
    inner = _Recorder()
    worker = _worker(observer=inner)
    metrics = attach_metrics(worker)
    assert attach_metrics(worker) is metrics is metrics_of(worker)
    assert [type(o) for o in worker.observer.members] == [_Recorder, MetricsObserver]
    worker.observer.dead_lettered("undecodable")
    worker.stats.consumed += 1
    worker.observer.consumed(TP0, 1)
    assert inner.calls == ["dead_lettered", "consumed"]
    assert _samples(metrics)[("hbase_ingest_dead_lettered_total", (("reason", "undecodable"),))] == 1


def test_hooks_become_series_and_consumed_counts_processed_records() -> None:
    clock = [100.0]
    worker = _worker()
    metrics = Metrics(worker, skew_window_s=60, clock=lambda: clock[0])
    obs = MetricsObserver(metrics)
    # the worker reports a chunk of 10 but processed only 7 (the rest lay past its stop offset)
    worker.stats.consumed += 7
    obs.consumed(TP0, 10)
    worker.stats.consumed += 5
    obs.consumed(TP1, 5)
    obs.batch_written("tbl", {"tbl,,1.": 30}, "rs1:16020", 30, 3000, 0.02)
    obs.batch_written("tbl", {"tbl,b,1.": 10}, "rs1:16020", 10, 1000, 0.01)
    obs.retried("tbl", "HBaseTimeout")
    obs.dead_lettered("undecodable")
    obs.dead_lettered("undecodable")
    obs.dead_lettered("missing_field")
    worker.progress.add_in_flight(1234)
    metrics.observe_query("tbl", 0.005)
    with metrics.time_query("tbl"):
        pass
    s = _samples(metrics)
    assert s[("hbase_ingest_events_consumed_total", (("partition", "0"), ("topic", "t")))] == 7
    assert s[("hbase_ingest_events_consumed_total", (("partition", "1"), ("topic", "t")))] == 5
    assert s[("hbase_ingest_rows_written_total", (("table", "tbl"),))] == 40
    assert s[("hbase_ingest_dead_lettered_total", (("reason", "undecodable"),))] == 2
    assert s[("hbase_ingest_dead_lettered_total", (("reason", "missing_field"),))] == 1
    assert s[("hbase_ingest_retries_total", (("reason", "HBaseTimeout"), ("table", "tbl")))] == 1
    assert s[("hbase_ingest_batch_rows_count", (("table", "tbl"),))] == 2
    assert s[("hbase_ingest_flush_seconds_sum", (("server", "rs1:16020"), ("table", "tbl")))] == 0.03
    assert s[("hbase_ingest_in_flight_bytes", ())] == 1234
    assert s[("hbase_ingest_reader_query_seconds_count", (("table", "tbl"),))] == 2
    window = {dict(k[1])["start_key"]: v for k, v in s.items() if k[0] == "hbase_ingest_region_window_rows"}
    assert window == {"": 30, "b": 10, "c": 0, "d": 0}  # idle regions show as 0
    # 4 regions, 40 rows: max 30 over mean 10
    assert s[("hbase_ingest_region_skew", (("table", "tbl"),))] == 3.0
    clock[0] += 120  # the window slides past every write
    assert metrics.skew("tbl") == 0.0


def test_event_latency_is_a_histogram_in_seconds() -> None:
    worker = _worker()
    metrics = Metrics(worker)
    worker.latency.note_run(TP0, 2, [10_000, 10_000, 9_000])
    worker.latency.settle(lambda tp: 3, 10_020)  # 20, 20 and 1,020 ms
    s = _samples(metrics)
    assert s[("hbase_ingest_event_latency_seconds_bucket", (("le", "0.01"),))] == 0
    assert s[("hbase_ingest_event_latency_seconds_bucket", (("le", "0.025"),))] == 2
    assert s[("hbase_ingest_event_latency_seconds_bucket", (("le", "1.5"),))] == 3
    assert s[("hbase_ingest_event_latency_seconds_bucket", (("le", "+Inf"),))] == 3
    assert s[("hbase_ingest_event_latency_seconds_count", ())] == 3
    assert s[("hbase_ingest_event_latency_seconds_sum", ())] == pytest.approx(1.06)


def test_lag_uses_commits_then_start_offsets_and_never_goes_negative() -> None:
    worker = _worker()
    worker.start_offsets = {TP1: 40}
    metrics = Metrics(worker)
    obs = MetricsObserver(metrics)
    obs.assigned([TP0, TP1])
    worker.stats.committed[TP0] = 90
    metrics.end_offsets = {TP0: 100, TP1: 50}
    assert metrics.lag() == {TP0: 10, TP1: 10}
    worker.stats.committed[TP1] = 50
    metrics.end_offsets = {TP0: 80, TP1: 50}  # an end offset older than the commit
    assert metrics.lag() == {TP0: 0, TP1: 0}
    obs.revoked([TP1])
    assert metrics.lag() == {TP0: 0}
    s = _samples(metrics)
    assert s[("hbase_ingest_committed_offset", (("partition", "0"), ("topic", "t")))] == 90
    assert s[("hbase_ingest_assigned_partitions", ())] == 1


def test_readiness_needs_worker_assignment_and_hbase() -> None:
    worker = _worker()
    metrics = Metrics(worker)
    server = MetricsServer(metrics)
    assert server.respond("GET", "/healthz")[0] == 200
    status, _, body = server.respond("GET", "/readyz")
    assert status == 503 and b"worker: not running" in body and b"hbase: unreachable" in body
    worker.ready = True
    MetricsObserver(metrics).assigned([])
    metrics.hbase_ok = True
    assert server.respond("GET", "/readyz?verbose=1")[0] == 200
    assert server.respond("GET", "/metrics")[1].startswith("text/plain; version=")
    assert server.respond("POST", "/metrics")[0] == 405
    assert server.respond("GET", "/nope")[0] == 404


async def test_http_server_on_an_ephemeral_port() -> None:
    metrics = Metrics(_worker())
    server = MetricsServer(metrics, "127.0.0.1", 0)
    async with anyio.create_task_group() as tg:
        port: Any = await tg.start(server.serve)
        assert port > 0 and server.port == port
        status, body = await http_get(port, "/metrics")
        assert status == 200 and b"hbase_ingest_rows_written" in body
        assert (await http_get(port, "/healthz")) == (200, b"ok\n")
        assert (await http_get(port, "/readyz"))[0] == 503
        assert (await http_get(port, "", raw=b"garbage\r\n\r\n"))[0] == 400
        tg.cancel_scope.cancel()
