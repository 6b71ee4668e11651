"""Dynamic columns (``"d:*" = "$value"``), pure: every field of an object as a cell, typed by the
record's writer schema or by its value, with exclude, flatten, null rules and declared columns first;
and 32-bit floats read as their shortest text, checked against an independent formatter (numpy's)."""

from __future__ import annotations

import base64
import io
import struct
from decimal import Decimal
from typing import Any

import fastavro
import numpy as np
import orjson
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.model import MutationKind, Origin, TopicPartition
from pipeline.core.records.float32 import shortest_float32
from pipeline.core.records.schemas import RegisteredSchema, SchemaCache, registry_decoder
from pipeline.core.records.wire import frame
from pipeline.core.routes.router import Router
from pipeline.errors import ConfigError
from pipeline.settings import RouteSpec, TopicSpec

from .routing_support import route_all

TP = TopicPartition("t", 0)
LONG = struct.Struct(">q").pack


def _route(columns: dict[str, Any], **extra: Any) -> RouteSpec:
    return RouteSpec.model_validate({"name": "r", "topic": "t", "table": "tb", "rowkey": "[id]",
                                     "columns": columns, **extra})


def _cells(columns: dict[str, Any], event: dict[str, Any], **extra: Any) -> dict[bytes, bytes]:
    [m] = Router([_route(columns, **extra)]).route("t", orjson.dumps(event), Origin(TP, 0))
    return m.cells


@given(st.integers(0, 2**32 - 1))
def test_shortest_float32_reads_back_and_equals_numpy_shortest(bits: int) -> None:
    x = struct.unpack("<f", struct.pack("<I", bits))[0]
    got = shortest_float32(x)
    if x != x:
        assert got != got
        return
    assert struct.unpack("<f", struct.pack("<f", got))[0] == x  # reads back as the same float32
    if abs(x) != float("inf"):
        assert got == float(np.format_float_scientific(np.float32(x), unique=True))


def test_shortest_float32_examples() -> None:
    assert shortest_float32(0.10000000149011612) == 0.1
    assert [shortest_float32(v) for v in (1.0, -2.5, 3.4028234663852886e38, 1e-45)] == [1.0, -2.5, 3.4028235e38, 1e-45]
    assert shortest_float32(2.0**-12) == 0.00024414062  # a tie between two shortest: the even digit


def test_every_field_by_its_value_type_declared_columns_first() -> None:
    event = {"id": "a", "n": 5, "f": 0.5, "b": True, "s": "x", "o": {"k": [1]}, "l": [1, "2"], "nil": None}
    cells = _cells({"d:*": "$value", "d:n": {"field": "n", "encoding": "text"}}, event)
    assert cells == {b"d:n": b"5", b"d:id": b"a", b"d:f": b"0.5", b"d:b": b"true", b"d:s": b"x",
                     b"d:o": b'{"k":[1]}', b"d:l": b'[1,"2"]'}


def test_prefix_exclude_flatten_and_a_path() -> None:
    event = {"id": "a", "meta": {"a": {"b": 1, "c": "z"}, "secret": 2, "x": None}, "top": 1}
    cells = _cells({"m:p_*": {"field": "meta", "nested": "flatten", "separator": "/", "exclude": ["secret", "a/c"],
                              "null": "empty"}}, event)
    assert cells == {b"m:p_a/b": LONG(1), b"m:p_x": b""}
    assert _cells({"m:*": {"field": "meta", "encoding": "text", "exclude": ["a"]}}, event) == {
        b"m:secret": b"2"}


def test_refusals_name_the_column() -> None:
    router = Router([_route({"d:*": "$value"}), _route({"o:*": "meta"}, name="r2"), _route({"d:i": "id"}, name="ok")])
    _, _, refused = route_all(router, TP, [_Rec(0, b'{"id":"a","big":1180591620717411303424,"meta":3}')])
    by_route = {route: err for _, route, err in refused}
    assert by_route["r"].reason == "out_of_range" and "dynamic column d:big (long)" in str(by_route["r"])
    assert by_route["r2"].reason == "bad_type" and "'meta' is int, not an object" in str(by_route["r2"])


def test_a_debezium_null_deletes_its_cell() -> None:
    spec = _route({"o:*": {"exclude": ["id"]}}, envelope="debezium", timestamp_field="$source.ts_ms")
    change = {"op": "u", "before": {"id": 1, "note": "x", "qty": 2}, "after": {"id": 1, "note": None, "qty": 3},
              "source": {"ts_ms": 7}}
    out = Router([spec]).route_record(TP, _Rec(0, orjson.dumps(change))).mutations
    assert [(m.kind, m.cells, m.timestamp) for m in out] == [
        (MutationKind.DELETE, {b"o:note": b""}, 7), (MutationKind.PUT, {b"o:qty": LONG(3)}, 7)]


def test_the_writer_schema_types_the_cells() -> None:
    v1 = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "string"}, {"name": "ratio", "type": "float"},
        {"name": "either", "type": ["null", "long", "string"]},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "n", "type": "int"}]}}]}
    router = Router([_route({"d:*": {"nested": "flatten"}})], topics=[TopicSpec(name="t", value_format="avro")])
    router.schemas.add(RegisteredSchema(1, "AVRO", orjson.dumps(v1).decode()))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(v1), {"id": "k", "ratio": 0.1, "either": 3,
                                                                "amount": Decimal("1.50"), "inner": {"n": 4}})
    mutations, _, refused = route_all(router, TP, [_Rec(0, frame(1, buf.getvalue()))])
    assert not refused
    assert mutations[0].cells == {b"d:id": b"k", b"d:ratio": b"0.1", b"d:either": LONG(3),
                                  b"d:amount": b"\x00\x00\x00\x02\x00\x96", b"d:inner.n": LONG(4)}


def test_json_schema_number_is_text_even_when_whole() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string"}, "v": {"type": "number"}}}
    router = Router([_route({"d:*": "$value"})], topics=[TopicSpec(name="t", value_format="json_schema")])
    router.schemas.add(RegisteredSchema(2, "JSON", orjson.dumps(schema).decode()))
    mutations, _, _ = route_all(router, TP, [_Rec(0, frame(2, b'{"id":"k","v":3}'))])
    assert mutations[0].cells == {b"d:id": b"k", b"d:v": b"3"}


@pytest.mark.parametrize(("columns", "problem"), [
    ({"d:a*b": "$value"}, "must be 'family:*'"),
    ({"d:*": "$key"}, "must be '$value'"),
])
def test_bad_dynamic_columns_are_named(columns: dict[str, Any], problem: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=problem.replace("$", r"\$").replace("*", r"\*")):
        _route(columns)


class _Rec:
    def __init__(self, offset: int, value: bytes | None) -> None:
        self.offset, self.value, self.key, self.timestamp, self.headers = offset, value, None, 0, ()


def test_avro_floats_are_read_as_their_shortest_text_at_any_depth() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "float"}, {"name": "d", "type": "double"}, {"name": "next", "type": ["null", "Node"]},
        {"name": "xs", "type": {"type": "array", "items": "float"}},
        {"name": "m", "type": {"type": "map", "values": ["null", "float"]}}]}
    cache = SchemaCache()
    cache.add(RegisteredSchema(3, "AVRO", orjson.dumps(node).decode()))
    value = {"v": 0.1, "d": 0.1, "xs": [0.7], "m": {"a": 1.1, "b": None},
             "next": {"v": 0.2, "d": 0.2, "xs": [], "m": {}, "next": {"v": 0.3, "d": 0.3, "xs": [], "m": {},
                                                                       "next": None}}}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(node), value)
    assert registry_decoder("avro", cache, "value")(frame(3, buf.getvalue())) == value


def test_a_ttl_field_gives_an_expiring_put_or_a_refusal() -> None:
    router = Router([_route({"d:v": "v"}, ttl_field="t.ms")])
    ttls: list[dict[str, Any]] = [{"t": {"ms": 60_000}}, {}, {"t": {"ms": None}}, {"t": {"ms": 0}}, {"t": {"ms": "60"}},
                                  {"t": {"ms": 1.5}}]
    records = [_Rec(i, orjson.dumps({"id": "a", "v": "x", **extra})) for i, extra in enumerate(ttls)]
    mutations, _, refused = route_all(router, TP, records)
    assert [(m.__class__.__name__, m.ttl) for m in mutations] == [("ExpiringPut", 60_000), ("Mutation", None),
                                                                   ("Mutation", None)]
    assert [(offset, err.reason) for offset, _, err in refused] == [(3, "bad_type"), (4, "bad_type"), (5, "bad_type")]
    assert "ttl field 't.ms' must be an integer number of milliseconds" in str(refused[0][2])
    with pytest.raises(ValueError, match="ttl_field is for puts"):
        _route({}, ttl_field="t", counter={"column": "c:n"})


def test_protobuf_floats_and_shapes() -> None:
    f = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="m.proto", package="p", syntax="proto3",
                                             dependency=["google/protobuf/wrappers.proto"])
    m = fdp.message_type.add(name="M")
    for number, (name, kind) in enumerate([("ratio", f.TYPE_FLOAT), ("wide", f.TYPE_DOUBLE), ("n", f.TYPE_SINT32),
                                           ("big", f.TYPE_UINT64), ("raw", f.TYPE_BYTES)], start=1):
        m.field.add(name=name, number=number, type=kind, label=f.LABEL_OPTIONAL)
    m.field.add(name="boxed", number=6, type=f.TYPE_MESSAGE, type_name=".google.protobuf.FloatValue",
                label=f.LABEL_OPTIONAL)
    m.field.add(name="xs", number=7, type=f.TYPE_FLOAT, label=f.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    cls: Any = message_factory.GetMessageClass(pool.FindMessageTypeByName("p.M"))
    cache = SchemaCache()
    compiled = cache.add(RegisteredSchema(4, "PROTOBUF", base64.b64encode(fdp.SerializeToString()).decode()))
    assert compiled.shape == {"ratio": "text", "wide": "text", "n": "long", "big": "text", "raw": "bytes",
                              "boxed": "text", "xs": "json"}
    msg = cls(ratio=0.1, wide=0.1, n=-3, big=2**64 - 1, raw=b"\x00", xs=[1.1, 2.2])
    msg.boxed.value = 0.3
    assert registry_decoder("protobuf", cache, "value")(frame(4, msg.SerializeToString(), [0])) == {
        "ratio": 0.1, "wide": 0.1, "n": -3, "big": 2**64 - 1, "raw": b"\x00", "boxed": 0.3, "xs": [1.1, 2.2]}
