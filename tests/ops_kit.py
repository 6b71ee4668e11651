"""The operations kit in ``docs/ops`` as data, for its tests: the alert rules and the Grafana
dashboard's queries, and the metric names a PromQL expression reads.

:func:`metric_names` is a small scanner, not a PromQL parser: it blanks out string literals, label
matchers (``{...}``), range and subquery brackets (``[5m]``, ``[$__rate_interval]``, ``[1h:5m]``)
and label lists (``by (...)``, ``without``, ``on``, ``ignoring``, ``group_left``, ``group_right``),
then keeps the identifiers that are neither called (functions, aggregations), nor keywords, nor part
of a number, a duration or a Grafana variable. A ``{__name__="..."}`` matcher counts as a name.
:func:`check_balanced` raises :class:`ValueError` for brackets that do not pair up or a string left
open.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "docs" / "ops"
RULES = OPS / "alerts.yml"
DASHBOARD = OPS / "grafana-dashboard.json"

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME_MATCHER = re.compile(r'__name__\s*=\s*(?:"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\')')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
# not preceded by a word character, ':', '.' (a number's digits) or '$' (a Grafana variable)
_IDENTIFIER = re.compile(r"(?<![\w:.$])[A-Za-z_:][\w:]*")
_KEYWORDS = frozenset({"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                       "bool", "offset", "inf", "nan"})
_PAIRS = {")": "(", "]": "[", "}": "{"}
_GRAFANA_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((.*),\s*[A-Za-z_]\w*\s*\)\s*$", re.DOTALL)
_GRAFANA_QUERY_RESULT = re.compile(r"^\s*query_result\s*\((.*)\)\s*$", re.DOTALL)


def check_balanced(expr: str) -> None:
    """Raise ValueError naming the position of an unpaired ``(``, ``[``, ``{`` or an open string."""
    stack: list[tuple[str, int]] = []
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            m = _STRING.match(expr, i)
            if m is None:
                raise ValueError(f"string opened at {i} is not closed: {expr!r}")
            i = m.end()
            continue
        if c in "([{":
            stack.append((c, i))
        elif c in ")]}":
            if not stack or stack[-1][0] != _PAIRS[c]:
                raise ValueError(f"{c!r} at {i} closes nothing it opened: {expr!r}")
            stack.pop()
        i += 1
    if stack:
        c, at = stack[-1]
        raise ValueError(f"{c!r} at {at} is not closed: {expr!r}")


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` (PromQL, Grafana variables allowed) reads. Raises ValueError when
    its brackets do not balance or it reads no metric at all."""
    check_balanced(expr)
    names: set[str] = set()
    for m in _NAME_MATCHER.finditer(expr):
        names.add(m.group(1) if m.group(1) is not None else m.group(2))
    text = _STRING.sub('""', expr)
    for pattern in (_BRACES, _BRACKETS):
        while True:  # innermost first, until none is left (a subquery may hold a range)
            text, n = pattern.subn(" ", text)
            if not n:
                break
    text = _LABEL_LIST.sub(" ", text)
    for m in _IDENTIFIER.finditer(text):
        word = m.group(0)
        if word.lower() in _KEYWORDS or text[m.end():].lstrip().startswith("("):
            continue
        names.add(word)
    if not names:
        raise ValueError(f"no metric name in {expr!r}")
    return names


def grafana_query_names(query: str) -> set[str]:
    """Metric names of a Grafana template variable's query: ``label_values(selector, label)``,
    ``query_result(expr)``, or a plain expression."""
    for pattern in (_GRAFANA_LABEL_VALUES, _GRAFANA_QUERY_RESULT):
        m = pattern.match(query)
        if m is not None:
            return metric_names(m.group(1))
    return metric_names(query)


def load_rules() -> list[dict[str, Any]]:
    """Every rule of ``docs/ops/alerts.yml``, in file order."""
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def load_dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those nested in collapsed rows too."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """The PromQL of every panel's targets."""
    return [t["expr"] for p in dashboard_panels(dashboard) for t in p.get("targets", []) if "expr" in t]


def dashboard_variable_queries(dashboard: dict[str, Any]) -> list[str]:
    """The queries of the dashboard's query variables (Grafana keeps them as a string or an object)."""
    out = []
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]
            out.append(q["query"] if isinstance(q, dict) else q)
    return out


def used_metric_names() -> dict[str, set[str]]:
    """Metric name -> where the kit reads it (an alert's name or a panel's title)."""
    used: dict[str, set[str]] = {}
    for rule in load_rules():
        for name in metric_names(rule["expr"]):
            used.setdefault(name, set()).add(f"alert {rule['alert']}")
    dashboard = load_dashboard()
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            for name in metric_names(target["expr"]):
                used.setdefault(name, set()).add(f"panel {panel['title']!r}")
    for query in dashboard_variable_queries(dashboard):
        for name in grafana_query_names(query):
            used.setdefault(name, set()).add(f"variable query {query!r}")
    return used


def substitute_grafana_variables(expr: str) -> str:
    """``expr`` as Prometheus would get it from Grafana: interval variables become ``5m``, the
    others (label values) ``.*``."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: "5m" if "interval" in m.group(1) else ".*", expr)
