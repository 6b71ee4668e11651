"""Registry formats, pure: the wire format's framing, Avro / JSON Schema / Protobuf bodies decoded with
their writer schemas (bodies written by the formats' own libraries, not by our code), and the cache."""

from __future__ import annotations

import base64
import io
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import orjson
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.records.schemas import RegisteredSchema, SchemaCache, SchemaReference, registry_decoder
from pipeline.core.records.wire import frame, framed_ids, message_indexes, schema_id
from pipeline.errors import EventError

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "seller", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "lines", "type": {"type": "array", "items": {
            "type": "record", "name": "Line",
            "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "blob", "type": "bytes"},
    ],
}
REF = uuid.UUID("12345678-1234-5678-1234-567812345678")
RECORD: dict[str, Any] = {"id": 2**40, "seller": "s-1", "note": None, "status": "PAID", "amount": Decimal("12.50"),
                          "at": 1_700_000_000_123, "day": 19_000, "ref": str(REF),
                          "lines": [{"sku": "a", "qty": 2}], "attrs": {"k": "v"}, "blob": b"\x00\xff"}


def _avro_body(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def _cache(*schemas: RegisteredSchema) -> SchemaCache:
    cache = SchemaCache()
    for s in schemas:
        cache.add(s)
    return cache


def test_framing_round_trips_and_names_what_is_wrong() -> None:
    raw = frame(258, b"body")
    assert raw[:5] == b"\x00\x00\x00\x01\x02" and schema_id(raw) == 258
    with pytest.raises(EventError, match=r"magic byte 0 \(found 0x7b\).*plain JSON") as info:
        schema_id(b'{"id": 1}')
    assert info.value.reason == "undecodable"
    with pytest.raises(EventError, match="key is 3 bytes, shorter than the Confluent wire format's 5-byte header"):
        schema_id(b"\x00\x00\x01", "key")
    assert framed_ids([frame(1, b""), frame(2, b"x"), b"{}", None, b"\x00\x01"]) == {1, 2}


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=6), st.binary(max_size=20))
def test_protobuf_message_indexes_round_trip(path: list[int], body: bytes) -> None:
    raw = frame(7, body, path)
    indexes, start = message_indexes(raw)
    assert list(indexes) == path and raw[start:] == body
    if path == [0]:
        assert raw[5] == 0 and start == 6  # Confluent's short form for the first message


def test_avro_record_becomes_an_event_by_the_documented_rule() -> None:
    cache = _cache(RegisteredSchema(5, "AVRO", orjson.dumps(ORDER).decode()))
    decode = registry_decoder("avro", cache, "value")
    event = decode(frame(5, _avro_body(ORDER, {**RECORD, "ref": str(REF)})))
    # wire numbers for timestamps and dates, uuid as text, decimal as Decimal, bytes as bytes
    assert event == RECORD
    assert isinstance(event["amount"], Decimal) and str(event["amount"]) == "12.50"


def test_avro_truncated_or_overlong_body_is_schema_mismatch() -> None:
    cache = _cache(RegisteredSchema(5, "AVRO", orjson.dumps(ORDER).decode()))
    decode = registry_decoder("avro", cache, "value")
    body = _avro_body(ORDER, RECORD)
    with pytest.raises(EventError, match=r"value does not match its Avro schema \(id 5, shop.Order\)") as info:
        decode(frame(5, body[:-4]))
    assert info.value.reason == "schema_mismatch"
    with pytest.raises(EventError, match="3 bytes left over after the record"):
        decode(frame(5, body + b"abc"))


def test_avro_schema_evolution_each_record_read_with_its_writer_schema() -> None:
    v1 = {"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"name": "tenant", "type": "string", "default": "none"}]}
    cache = _cache(RegisteredSchema(1, "AVRO", orjson.dumps(v1).decode()),
                   RegisteredSchema(2, "AVRO", orjson.dumps(v2).decode()))
    decode = registry_decoder("avro", cache, "value")
    assert decode(frame(1, _avro_body(v1, {"id": "a"}))) == {"id": "a"}
    assert decode(frame(2, _avro_body(v2, {"id": "b", "tenant": "t"}))) == {"id": "b", "tenant": "t"}


def test_avro_references_resolve_named_types() -> None:
    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "shop.Money"}]}
    cache = _cache(RegisteredSchema(9, "AVRO", orjson.dumps(order).decode(),
                                    (SchemaReference("shop.Money", orjson.dumps(money).decode(), "money", 1),)))
    full = {**order, "fields": [order["fields"][0], {"name": "total", "type": money}]}
    decode = registry_decoder("avro", cache, "value")
    record = {"id": "o1", "total": {"cents": 1250, "currency": "EUR"}}
    assert decode(frame(9, _avro_body(full, record))) == record


def test_unknown_id_and_uncompilable_schema_are_unknown_schema() -> None:
    cache = SchemaCache()
    cache.add_unknown(40, "Schema 40 not found, error 40403")
    bad = '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}'
    cache.add(RegisteredSchema(41, "AVRO", bad))
    decode = registry_decoder("avro", cache, "value")
    with pytest.raises(EventError, match=r"schema id 40, which the registry does not have \(Schema 40 not") as info:
        decode(frame(40, b""))
    assert info.value.reason == "unknown_schema"
    with pytest.raises(EventError, match=r"schema id 41 \(AVRO\) cannot be compiled"):
        decode(frame(41, b""))
    assert set(cache.problems()) == {40, 41}


def test_a_schema_of_another_type_than_the_topic_format_is_refused() -> None:
    cache = _cache(RegisteredSchema(3, "JSON", '{"type": "object"}'))
    with pytest.raises(EventError, match="a JSON schema, but the topic's value_format is 'avro'"):
        registry_decoder("avro", cache, "value")(frame(3, b"{}"))


def test_json_schema_validates_the_body() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "seller": {"type": "string"}}, "required": ["id"]}
    cache = _cache(RegisteredSchema(8, "JSON", orjson.dumps(schema).decode()))
    decode = registry_decoder("json_schema", cache, "value")
    assert decode(frame(8, b'{"id": 18446744073709551617, "seller": "s"}')) == {"id": 2**64 + 1, "seller": "s"}
    with pytest.raises(EventError, match=r"does not match its JSON Schema \(id 8, Order\) at seller: 5 is not of "
                                         "type 'string'") as info:
        decode(frame(8, b'{"id": 1, "seller": 5}'))
    assert info.value.reason == "schema_mismatch"
    with pytest.raises(EventError, match="not valid JSON"):
        decode(frame(8, b'{"id": '))


def _order_proto() -> tuple[str, type[Any]]:
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto"])
    f = descriptor_pb2.FieldDescriptorProto
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    order.field.add(name="seller", number=2, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    order.field.add(name="at", number=3, type=f.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                    label=f.LABEL_OPTIONAL)
    order.field.add(name="tags", number=4, type=f.TYPE_STRING, label=f.LABEL_REPEATED)
    order.field.add(name="status", number=5, type=f.TYPE_ENUM, type_name=".shop.Order.Status", label=f.LABEL_OPTIONAL)
    order.field.add(name="line", number=6, type=f.TYPE_MESSAGE, type_name=".shop.Order.Line", label=f.LABEL_OPTIONAL)
    order.enum_type.add(name="Status").value.add(name="NEW", number=0)
    order.enum_type[0].value.add(name="PAID", number=1)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    return base64.b64encode(fdp.SerializeToString()).decode(), cls


def test_protobuf_message_becomes_an_event_by_the_documented_rule() -> None:
    text, cls = _order_proto()
    cache = _cache(RegisteredSchema(7, "PROTOBUF", text))
    decode = registry_decoder("protobuf", cache, "value")
    msg = cls(id=2**40, seller="s-1", tags=["a", "b"], status=1)
    msg.at.seconds, msg.at.nanos = 1_700_000_000, 123_456_789
    msg.line.sku = "x"
    assert decode(frame(7, msg.SerializeToString(), [0])) == {
        "id": 2**40, "seller": "s-1", "at": 1_700_000_000_123, "tags": ["a", "b"], "status": "PAID",
        "line": {"sku": "x"}}
    # proto3 defaults are there, unset messages are not
    assert decode(frame(7, cls().SerializeToString(), [0])) == {"id": 0, "seller": "", "tags": [], "status": "NEW"}
    nested = cls.Line(sku="n")  # message indexes [0, 0]: the first message nested in the first
    assert decode(frame(7, nested.SerializeToString(), [0, 0])) == {"sku": "n"}
    with pytest.raises(EventError, match=r"message indexes \[2\] name no message") as info:
        decode(frame(7, b"", [2]))
    assert info.value.reason == "schema_mismatch"
    with pytest.raises(EventError, match="does not match its Protobuf schema"):
        decode(frame(7, b"\xff\xff\xff", [0]))


def test_protobuf_schema_as_proto_source_is_unusable_with_a_reason() -> None:
    cache = _cache(RegisteredSchema(6, "PROTOBUF", 'syntax = "proto3"; message M { int64 id = 1; }'))
    with pytest.raises(EventError, match="not a serialized FileDescriptorProto"):
        registry_decoder("protobuf", cache, "value")(frame(6, b"", [0]))


def test_cache_is_bounded_but_keeps_what_a_batch_needs() -> None:
    cache = SchemaCache(capacity=2)
    for i in range(1, 6):
        cache.add(RegisteredSchema(i, "AVRO", '"string"'))
    assert cache.missing([1, 5, 6]) == [6]
    assert cache.trim(keep={1, 2}) == [3, 4, 5]
    assert len(cache) == 2 and 1 in cache and 2 in cache


def test_plain_routes_of_a_registry_topic_take_the_generated_builders_with_the_general_paths_results() -> None:
    """A topic in a registry format whose routes are plain is routed by the generated put builders
    after the decode; mutations and refusals (route, reason and message) are those of the reference."""
    from pipeline.core.model import TopicPartition
    from pipeline.core.routes.router import Router
    from pipeline.settings import RouteSpec, TopicSpec
    from tests.unit.core.routing_support import route_all

    routes = [RouteSpec(name="a", topic="t", table="ta", rowkey="[seller][_][long(id)]", timestamp_field="at",
                        columns={"d:n": {"field": "note", "required": False}, "d:m": {"field": "amount",
                                                                                     "encoding": "decimal"}}),
              RouteSpec(name="b", topic="t", table="tb", rowkey="[status]", columns={"d:s": {"field": "lines",
                                                                                              "encoding": "json"}})]
    router = Router(routes, topics=[TopicSpec(name="t", value_format="avro")])
    assert "t" not in router.general and router.framed("t") == (True, False)
    router.schemas.add(RegisteredSchema(5, "AVRO", orjson.dumps(ORDER).decode()))
    router.schemas.add(RegisteredSchema(6, "AVRO", '"string"'))
    router.schemas.add_unknown(7, "not found")
    body = _avro_body(ORDER, RECORD)

    class Rec:
        def __init__(self, offset: int, value: bytes | None) -> None:
            self.offset, self.value, self.key, self.timestamp, self.headers = offset, value, None, 0, ()
    values = [frame(5, body), frame(5, _avro_body(ORDER, {**RECORD, "seller": "s_2"})), frame(7, body),
              b'{"x": 1}', frame(5, body[:-2]), None, frame(6, b"\x04hi"), frame(3, b"")[:4], frame(5, body)]
    records = [Rec(i, v) for i, v in enumerate(values)]
    tp = TopicPartition("t", 0)
    mutations, counts, refused = route_all(router, tp, records)
    expected = [router.route_record(tp, rec) for rec in records]
    assert mutations == [m for got in expected for m in got.mutations]
    assert counts == [len(got.mutations) for got in expected]
    assert [(off, name, e.reason, str(e)) for off, name, e in refused] == [
        (rec.offset, x.route, x.error.reason, str(x.error)) for rec, got in zip(records, expected, strict=True)
        for x in got.refusals]
    assert counts[:2] == [2, 1]  # the seller with the delimiter costs route a only
    reasons = [(name, e.reason) for _, name, e in refused]
    assert reasons == [("a", "contains_delimiter"), (None, "unknown_schema"), (None, "undecodable"),
                       (None, "schema_mismatch"), (None, "tombstone"), (None, "not_an_object"), (None, "undecodable")]
