"""Re-driving dead letters into the route that refused them (``backfill --route``): which dead letters
a re-drive takes, and that each is routed as the record it was."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipeline.core.model import TopicPartition
from pipeline.core.records.deadletters import dead_letter_source
from pipeline.core.routes.router import Router
from pipeline.errors import ConfigError
from pipeline.runtime.backfill.redrive import redrive_settings
from pipeline.settings import load_settings
from tests.unit.core.routing_support import route_all

DLQ = "orders-dead"
TP = TopicPartition(DLQ, 0)


@dataclass
class Rec:
    offset: int
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    key: bytes | None = None
    timestamp: int = 9_999


def _dead(route: str | None, offset: int, topic: str = "orders", reason: str = "contains_delimiter",
          ts: bytes | None = b"1234") -> tuple[tuple[str, bytes | None], ...]:
    h: list[tuple[str, bytes | None]] = [("trace", b"t1"), ("hbase-ingest.source.topic", topic.encode()),
                                         ("hbase-ingest.source.partition", b"2"),
                                         ("hbase-ingest.source.offset", str(offset).encode())]
    if ts is not None:
        h.append(("hbase-ingest.source.timestamp", ts))
    if route is not None:
        h.append(("hbase-ingest.route", route.encode()))
    return (*h, ("hbase-ingest.reason", reason.encode()), ("hbase-ingest.error", b"..."))


def _settings(by_k_rowkey: str = "[k][#][id]") -> object:
    routes = [
        {"name": "main", "topic": "orders", "table": "main", "rowkey": "[id]", "columns": {"d:v": "v"}},
        {"name": "by_k", "topic": "orders", "table": "by_k", "rowkey": by_k_rowkey, "timestamp_field": "$offset",
         "columns": {"d:v": "v", "d:t": {"field": "$header.trace", "required": False},
                     "d:s": {"field": "$partition", "encoding": "long"}}},
    ]
    return load_settings(None, routes=routes, kafka={"dead_letter_topic": DLQ})


def test_a_redrive_takes_the_route_s_dead_letters_as_the_records_they_were() -> None:
    settings = redrive_settings(_settings(), "by_k", DLQ)  # type: ignore[arg-type]
    assert [r.name for r in settings.routes] == ["by_k"] and settings.topic(DLQ).redrive_of == "orders"
    router = Router(settings.routes, topics=settings.topics)
    records = [
        Rec(0, b'{"id": "1", "k": "a_b", "v": "x"}', _dead("by_k", 70)),  # the route's: re-driven
        Rec(1, b'{"id": "2", "k": "a", "v": "y"}', _dead("main", 71)),  # another route's: skipped
        Rec(2, b'{"id": "3", "k": "c", "v": "z"}', _dead(None, 72, reason="bad_type")),  # the record's, from orders
        Rec(3, b'{"id": "4", "k": "d", "v": "w"}', _dead(None, 73, topic="other")),  # another topic's: skipped
        Rec(4, b'{"table": "by_k"}', _dead(None, 74, reason="hbase_rejected")),  # no record to re-drive
        Rec(5, b'{"id": "6", "k": "e", "v": "u"}', ()),  # not a dead letter of ours: skipped
        Rec(6, b'{"id": "7", "k": "f#", "v": "u"}', _dead("by_k", 76, ts=None)),  # refused again
    ]
    mutations, counts, refused = route_all(router, TP, records)
    assert counts == [1, 0, 1, 0, 0, 0, 0]
    assert [(m.table, m.row, m.timestamp, m.origin.offset) for m in mutations] == [
        ("by_k", b"a_b#1", 70, 0), ("by_k", b"c#3", 72, 2)]  # stamped with the source offset
    assert mutations[0].cells == {b"d:v": b"x", b"d:t": b"t1", b"d:s": (2).to_bytes(8, "big")}
    assert [(off, name, e.reason) for off, name, e in refused] == [(6, None, "contains_delimiter")]


def test_a_redrive_needs_the_dead_letter_topic_and_a_known_route() -> None:
    with pytest.raises(ConfigError, match=r"must be \[kafka\]\.dead_letter_topic"):
        redrive_settings(_settings(), "by_k", "orders")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no route named 'nope'"):
        redrive_settings(_settings(), "nope", DLQ)  # type: ignore[arg-type]


def test_dead_letter_headers_parse_or_say_none() -> None:
    got = dead_letter_source(_dead("by_k", 70))
    assert got is not None and (got.topic, got.partition, got.offset, got.timestamp, got.route, got.reason) == (
        "orders", 2, 70, 1234, "by_k", "contains_delimiter")
    assert dead_letter_source([("hbase-ingest.source.topic", b"t")]) is None
    assert dead_letter_source([("hbase-ingest.source.topic", b"t"), ("hbase-ingest.source.partition", b"x"),
                               ("hbase-ingest.source.offset", b"1")]) is None
