"""The operations kit's files (docs/ops): the alert rules are complete Prometheus rules whose
expressions parse, the dashboard's queries read only the worker's series, and the PromQL name scanner
the integration test relies on finds names where PromQL puts them. ``promtool check rules`` runs
when promtool is on PATH (or named by ``PROMTOOL``). Whether a running worker exports every name
read here is checked by tests/integration/test_ops_kit.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.ops_kit import (
    RULES,
    check_balanced,
    dashboard_exprs,
    dashboard_panels,
    dashboard_variable_queries,
    grafana_query_names,
    load_dashboard,
    load_rules,
    metric_names,
    substitute_grafana_variables,
)

_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_ISSUE_ALERTS = {  # the issue's list: lag growing, skew high, dead letters arriving, not ready, no progress
    "HBaseIngestConsumerLagGrowing",
    "HBaseIngestRegionSkewHigh",
    "HBaseIngestDeadLetters",
    "HBaseIngestNotReady",
    "HBaseIngestNoProgress",
}


def _promtool() -> str | None:
    return os.environ.get("PROMTOOL") or shutil.which("promtool")


# -- the rules ------------------------------------------------------------------------------------


def test_every_rule_is_a_complete_alert() -> None:
    rules = load_rules()
    names = [r.get("alert") for r in rules]
    assert len(names) == len(set(names)), f"repeated alert names: {names}"
    assert set(names) >= _ISSUE_ALERTS
    for rule in rules:
        where = f"rule {rule.get('alert') or rule}"
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, where
        assert isinstance(rule["expr"], str) and rule["expr"].strip(), where
        assert _DURATION.match(str(rule["for"])), f"{where}: 'for' {rule['for']!r} is not a duration"
        assert rule["labels"].get("severity") in ("warning", "critical"), where
        assert rule["annotations"].get("summary", "").strip(), where
        assert rule["annotations"].get("description", "").strip(), where


def test_rule_expressions_parse_and_read_only_the_worker_series() -> None:
    for rule in load_rules():
        names = metric_names(rule["expr"])  # raises for unbalanced brackets or no metric at all
        assert all(n.startswith("hbase_ingest_") for n in names), (rule["alert"], names)


def test_the_rules_file_is_one_group_document() -> None:
    doc = yaml.safe_load(RULES.read_text())
    assert set(doc) == {"groups"}
    assert all(set(g) == {"name", "rules"} for g in doc["groups"])


def test_promtool_accepts_the_rules() -> None:
    promtool = _promtool()
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: the prometheus package; or set PROMTOOL)")
    res = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(load_rules())} rules found" in res.stdout


# -- the dashboard --------------------------------------------------------------------------------


def test_dashboard_panels_are_well_formed() -> None:
    dashboard = load_dashboard()
    panels = list(dashboard_panels(dashboard))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        pos = p["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["expr"].strip() for t in p["targets"]), p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), p["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_dashboard_shows_what_the_issue_asks_for() -> None:
    titles = " | ".join(p["title"].lower() for p in dashboard_panels(load_dashboard()))
    for wanted in ("per second", "lag per partition", "region skew", "batch write latency", "dead letters",
                   "retries", "in-flight bytes", "committed offsets", "by region server"):
        assert wanted in titles, wanted


def test_dashboard_queries_parse_and_read_only_the_worker_series() -> None:
    dashboard = load_dashboard()
    exprs = dashboard_exprs(dashboard)
    assert len(exprs) >= 20
    for expr in exprs:
        names = metric_names(expr)
        assert all(n.startswith("hbase_ingest_") for n in names), (expr, names)
        assert "$job" in expr and "$instance" in expr, f"not filtered by the job and instance variables: {expr}"
    for query in dashboard_variable_queries(dashboard):
        assert grafana_query_names(query) == {"hbase_ingest_ready"}


def test_promtool_parses_the_dashboard_queries(tmp_path: Path) -> None:
    """Each query, its Grafana variables replaced as Grafana would, as a recording rule."""
    promtool = _promtool()
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: the prometheus package; or set PROMTOOL)")
    exprs = dashboard_exprs(load_dashboard())
    rules = [{"record": f"dashboard:query_{i}", "expr": substitute_grafana_variables(e)}
             for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard_queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    res = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout


# -- the name scanner -----------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "names"), [
    ("up", {"up"}),
    ("sum by (le, table) (rate(a_bucket{job=~\"$job\"}[$__rate_interval]))", {"a_bucket"}),
    ("histogram_quantile(0.99, sum without (instance) (rate(x_bucket[5m])))", {"x_bucket"}),
    ("a > 1000 and deriv(a[10m]) > 0", {"a"}),
    ("a > bool 0.5 unless on (job) group_left (topic) b offset -5m", {"a", "b"}),
    ("max_over_time(rate(c_total[1m])[30m:5m])", {"c_total"}),
    ('{__name__="d_total", reason="by (x)"} + e:recorded:rate5m', {"d_total", "e:recorded:rate5m"}),
    ("f / 1e3 + 0x1F - Inf * NaN", {"f"}),
    ('g{label="and or unless"} @ 1609746000', {"g"}),
])
def test_metric_names_finds_exactly_the_series(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize("expr", [
    "sum(rate(x[5m])",
    "x[5m]]",
    'x{a="b}',
    "x{a=\"b\")",
    "rate(x[5m)]",
])
def test_unbalanced_expressions_are_refused(expr: str) -> None:
    with pytest.raises(ValueError, match=r"not closed|closes nothing"):
        check_balanced(expr)


def test_an_expression_without_a_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="no metric name"):
        metric_names("vector(1) + time()")


def test_grafana_variable_queries() -> None:
    assert grafana_query_names('label_values(m{job=~"$job"}, instance)') == {"m"}
    assert grafana_query_names("query_result(topk(5, n))") == {"n"}
    assert substitute_grafana_variables('rate(m{job=~"$job"}[$__rate_interval])') == 'rate(m{job=~".*"}[5m])'
