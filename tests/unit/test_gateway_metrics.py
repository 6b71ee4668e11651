"""The per-gateway series the worker's metrics read from ``hbase.statistics()`` at scrape time."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from connectors.memory import MemoryBroker, MemoryHBase
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.metrics import Metrics
from pipeline.settings import load_settings


class _GatewayHBase(MemoryHBase):
    def __init__(self) -> None:
        super().__init__()
        self.gateways: dict[str, dict[str, Any]] = {}

    def statistics(self) -> dict[str, Any]:
        return {**super().statistics(), "gateways": self.gateways}


def _samples(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("gateway", "")): float(s.value)
            for family in text_string_to_metric_families(metrics.render().decode())
            for s in family.samples if s.name.startswith("hbase_ingest_gateway_")}


def test_gateway_state_calls_and_errors_are_read_when_scraped() -> None:
    settings = load_settings(None, routes=[{"name": "r", "topic": "t", "table": "tbl", "rowkey": "[id]",
                                            "columns": {"d:v": "v"}}])
    hbase = _GatewayHBase()
    metrics = Metrics(Worker(settings, hbase, MemoryBroker()))
    assert _samples(metrics) == {}  # a client without gateway statistics (the twin): no series
    hbase.gateways = {"h:9090": {"state": "up", "calls": 7, "errors": 0},
                      "h:9190": {"state": "down", "calls": 3, "errors": 2}}
    assert _samples(metrics) == {
        ("hbase_ingest_gateway_up", "h:9090"): 1, ("hbase_ingest_gateway_up", "h:9190"): 0,
        ("hbase_ingest_gateway_calls_total", "h:9090"): 7, ("hbase_ingest_gateway_calls_total", "h:9190"): 3,
        ("hbase_ingest_gateway_errors_total", "h:9090"): 0, ("hbase_ingest_gateway_errors_total", "h:9190"): 2}
    hbase.gateways["h:9190"] |= {"state": "up", "calls": 4}
    got = _samples(metrics)
    assert got[("hbase_ingest_gateway_up", "h:9190")] == 1 and got[("hbase_ingest_gateway_calls_total", "h:9190")] == 4


def test_the_native_clients_counters_are_read_when_scraped() -> None:
    settings = load_settings(None, routes=[{"name": "r", "topic": "t", "table": "tbl", "rowkey": "[id]",
                                            "columns": {"d:v": "v"}}])
    hbase = _GatewayHBase()
    metrics = Metrics(Worker(settings, hbase, MemoryBroker()))

    def native() -> dict[str, float]:
        return {s.name: float(s.value) for family in text_string_to_metric_families(metrics.render().decode())
                for s in family.samples if s.name.startswith("hbase_ingest_native_")}
    assert native() == {}
    hbase.statistics = lambda: {"native": {"multi_calls": 12, "actions_sent": 900, "actions_failed": 3,  # type: ignore[method-assign]
                                           "retries": 1, "region_refreshes": 2}}
    assert native() == {"hbase_ingest_native_multi_calls_total": 12, "hbase_ingest_native_actions_failed_total": 3,
                        "hbase_ingest_native_retries_total": 1, "hbase_ingest_native_region_refreshes_total": 2}
