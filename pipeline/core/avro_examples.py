"""Avro schemas of the example events (:mod:`pipeline.core.examples`) and the Avro body of an event
(pure). ``hbase-ingest produce --format avro`` registers a schema under ``<topic>-value`` (Confluent's
topic-name strategy) and frames each body with its id; a route reads the events it decodes exactly as it
reads the JSON examples (timestamps are ``timestamp-millis``: epoch milliseconds, as in JSON)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import fastavro

__all__ = ["AVRO_EXAMPLES", "avro_writer"]

_TS = {"type": "long", "logicalType": "timestamp-millis"}


def _record(name: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "hbase_ingest.examples",
            "fields": [{"name": n, "type": t} for n, t in fields]}


#: example name -> its Avro schema (field names and types match the JSON the generator makes)
AVRO_EXAMPLES: dict[str, dict[str, Any]] = {
    "logs": _record("Log", [
        ("hostname", "string"), ("log_event", "string"), ("timestamp", _TS), ("level", "string"),
        ("value", "double"), ("dc", "string"), ("message", "string"),
        ("tags", _record("Tags", [("service", "string"), ("pid", "int")]))]),
    "transactions": _record("Order", [
        ("order_number", "string"), ("seller_id", "string"), ("buyer_id", "string"), ("timestamp", _TS),
        ("amount_cents", "long"), ("currency", "string"), ("platform", "string"), ("city", "string"),
        ("items", {"type": "array", "items": _record("Item", [("sku", "string"), ("qty", "int")])}),
        ("note", "string")]),
    "user-orders": _record("UserOrder", [
        ("user_id", "string"), ("order_id", "string"), ("ts", _TS), ("amount_cents", "long"),
        ("status", {"type": "enum", "name": "Status", "symbols": ["paid", "shipped", "delivered", "refunded"]}),
        ("city", "string"),
        ("payment", _record("Payment", [("method", "string"), ("installments", "int")])), ("comment", "string")]),
    "logins": _record("Login", [
        ("login_id", "string"), ("user_id", "string"), ("timestamp", _TS), ("day", "string"), ("ip", "string"),
        ("agent", "string"), ("success", "boolean"), ("session", "string")]),
}


def avro_writer(schema: Any) -> Callable[[Any], bytes]:
    """``record -> Avro binary body`` for ``schema`` (no framing: :func:`pipeline.core.records.wire.frame`)."""
    parsed = fastavro.parse_schema(schema)
    write = fastavro.schemaless_writer

    def body(record: Any) -> bytes:
        out = io.BytesIO()
        write(out, parsed, record)
        return out.getvalue()
    return body
