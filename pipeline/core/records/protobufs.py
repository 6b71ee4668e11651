"""Protobuf writer schemas from a registry, and how a Protobuf message becomes an event (pure).

A registry holds a Protobuf schema either as ``.proto`` source or as a base64
``FileDescriptorProto`` (what Confluent's serializers register, and what a registry returns with
``?format=serialized``); the registry client asks for the serialized form, and this module compiles
that. A schema given only as ``.proto`` source cannot be compiled here: its records are dead letters
(``unknown_schema``) whose message says so.

The framed body starts with the message indexes (:func:`pipeline.core.records.wire.message_indexes`): the
path to the message type within the file (``[0]``: its first top-level message).

A message becomes a ``dict`` keyed by field name:

- a field without presence (a proto3 scalar, enum or repeated field) is always there, its default
  when unset (``0``, ``""``, ``b""``, ``False``, the enum's first value, ``[]``, ``{}``): a proto3 zero
  is indistinguishable from "not set";
- a field with presence (a message, a proto3 ``optional``, a ``oneof`` member, a proto2 field) is
  there only when set;
- integers are ``int`` (64-bit ones too), floats ``float`` (a 32-bit ``float`` the shortest decimal
  that reads back as the same float32: :mod:`pipeline.core.records.float32`), ``string`` a ``str``, ``bytes`` ``bytes``,
  an enum its value's name (its number when the schema does not name it), a map a ``dict``;
- well-known messages: ``google.protobuf.Timestamp`` is epoch **milliseconds** (nanoseconds below a
  millisecond dropped: a ``timestamp_field`` as it is), the wrappers (``Int64Value``...) their value,
  ``confluent.type.Decimal`` a :class:`decimal.Decimal`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from pipeline.core.records.float32 import shortest_float32
from pipeline.core.records.schematypes import CompiledSchema, RegisteredSchema
from pipeline.core.records.wire import message_indexes
from pipeline.errors import EventError

__all__ = ["compile_protobuf", "message_to_event", "protobuf_shape"]

_WRAPPERS = frozenset(f"google.protobuf.{n}Value" for n in
                      ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"))
#: the files a schema may import without a registry reference
_WELL_KNOWN = tuple(m.DESCRIPTOR.serialized_pb for m in (any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2,
                                                        timestamp_pb2, wrappers_pb2))


def _file_descriptor(text: str, what: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"{what} is .proto source, not a serialized FileDescriptorProto: the registry did "
                         "not return the serialized form (?format=serialized)") from None
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.ParseFromString(raw)
    return fdp


def _pool(schema: RegisteredSchema) -> tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorProto]:
    pool = descriptor_pool.DescriptorPool()
    for serialized in _WELL_KNOWN:
        pool.AddSerializedFile(serialized)
    for ref in schema.references:
        fdp = _file_descriptor(ref.text, f"reference {ref.name!r}")
        if not fdp.name:
            fdp.name = ref.name
        if not fdp.name.startswith("google/protobuf/"):
            pool.Add(fdp)
    main = _file_descriptor(schema.text, f"schema id {schema.id}")
    if not main.name:
        main.name = f"schema-{schema.id}.proto"
    pool.Add(main)
    return pool, main


def compile_protobuf(schema: RegisteredSchema) -> CompiledSchema:
    """The decoder of a Protobuf schema (module docstring); ``ValueError`` when it cannot be compiled."""
    pool, main = _pool(schema)
    prefix = f"{main.package}." if main.package else ""
    top = [pool.FindMessageTypeByName(prefix + m.name) for m in main.message_type]  # in declaration order
    if not top:
        raise ValueError(f"schema id {schema.id} declares no message")
    classes: dict[tuple[int, ...], tuple[type[Message], Callable[[Any], Any]]] = {}
    converters, ident = _Converters(), schema.id

    def resolve(path: tuple[int, ...], what: str) -> tuple[type[Message], Callable[[Any], Any]]:
        found = classes.get(path)
        if found is None:
            try:
                desc = top[path[0]]
                for i in path[1:]:
                    desc = desc.nested_types[i]
            except IndexError:
                raise EventError("schema_mismatch", f"{what}'s message indexes {list(path)} name no message of "
                                                    f"Protobuf schema id {ident}") from None
            found = classes[path] = (message_factory.GetMessageClass(desc), converters.of(desc))
        return found

    def decode(raw: bytes, what: str) -> Any:
        path, start = message_indexes(raw, what=what)
        cls, convert = resolve(path, what)
        msg = cls()
        try:
            msg.ParseFromString(raw[start:])
        except DecodeError as exc:
            raise EventError("schema_mismatch", f"{what} does not match its Protobuf schema (id {ident}, "
                                                f"{cls.DESCRIPTOR.full_name}): {exc}") from exc
        return convert(msg)
    return CompiledSchema(ident, "PROTOBUF", decode, name=top[0].full_name, shape=protobuf_shape(top[0]))


_INTEGERS = frozenset((FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT32,
                       FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64,
                       FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32))
#: well-known messages read as one value (module docstring), by the encoding of that value
_SPECIAL_SHAPES = {"google.protobuf.Timestamp": "long", "confluent.type.Decimal": "decimal",
                   "google.protobuf.Int64Value": "long", "google.protobuf.Int32Value": "long",
                   "google.protobuf.UInt32Value": "long", "google.protobuf.BytesValue": "bytes"}
_SHAPE_DEPTH = 16


def protobuf_shape(desc: Descriptor, depth: int = 0) -> dict[str, Any]:
    """The column encoding of each field of ``desc``'s messages (:mod:`pipeline.core.records.shapes`):
    signed and 32-bit integers ``long``; ``uint64``/``fixed64`` ``text`` (above a long's range);
    strings, enums, booleans, floats ``text``; ``bytes`` ``bytes``; repeated fields and maps ``json``;
    a message a nested shape (a well-known one the encoding of its value)."""
    return {f.name: _field_shape(f, depth) for f in desc.fields}


def _field_shape(f: FieldDescriptor, depth: int) -> Any:
    if f.is_repeated:
        return "json"
    if f.message_type is not None:
        special = _SPECIAL_SHAPES.get(f.message_type.full_name)
        if special is not None:
            return special
        if f.message_type.full_name in _WRAPPERS:
            return "text"
        return "json" if depth >= _SHAPE_DEPTH else protobuf_shape(f.message_type, depth + 1)
    if f.type in _INTEGERS:
        return "long"
    return "bytes" if f.type == FieldDescriptor.TYPE_BYTES else "text"


def message_to_event(msg: Message) -> dict[str, Any]:
    """``msg`` as an event (module docstring)."""
    desc: Any = msg.DESCRIPTOR  # the C (upb) or Python descriptor class
    result: dict[str, Any] = _Converters().of(desc)(msg)
    return result


def _timestamp_ms(m: Any) -> int:
    return int(m.seconds * 1000 + m.nanos // 1_000_000)


def _wrapped(m: Any) -> Any:
    return m.value


def _float32(value: float) -> float:
    return shortest_float32(value)


def _wrapped_float32(m: Any) -> float:
    return shortest_float32(m.value)


def _decimal(m: Any) -> Decimal:
    return Decimal(f"{int.from_bytes(m.value, 'big', signed=True) if m.value else 0}E{-m.scale}")


_SPECIAL: dict[str, Callable[[Any], Any]] = {"google.protobuf.Timestamp": _timestamp_ms,
                                             "confluent.type.Decimal": _decimal,
                                             **dict.fromkeys(_WRAPPERS, _wrapped),
                                             "google.protobuf.FloatValue": _wrapped_float32}


class _Converters:
    """One converter per message type of a schema, built once (recursive types included)."""

    def __init__(self) -> None:
        self._memo: dict[str, Callable[[Any], Any]] = {}

    def of(self, desc: Descriptor) -> Callable[[Any], Any]:
        found = self._memo.get(desc.full_name)
        if found is not None:
            return found
        special = _SPECIAL.get(desc.full_name)
        if special is not None:
            return special
        fields: list[tuple[str, bool, Callable[[Any], Any]]] = []

        def convert(msg: Any) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, presence, read in fields:
                if presence and not msg.HasField(name):
                    continue
                out[name] = read(getattr(msg, name))
            return out
        self._memo[desc.full_name] = convert  # before its fields: a message may contain itself
        fields += [(f.name, f.has_presence, self._field(f)) for f in desc.fields]
        return convert

    def _field(self, f: FieldDescriptor) -> Callable[[Any], Any]:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            read_value = self._scalar(f.message_type.fields_by_name["value"])
            return lambda m: {k: read_value(v) for k, v in m.items()}
        one = self._scalar(f)
        if f.is_repeated:
            return lambda values: [one(v) for v in values]
        return one

    def _scalar(self, f: FieldDescriptor) -> Callable[[Any], Any]:
        if f.message_type is not None:
            nested, memo = f.message_type, self
            return lambda m: memo.of(nested)(m)
        if f.enum_type is not None:
            names = {v.number: v.name for v in f.enum_type.values}
            return lambda n: names.get(n, n)
        return _float32 if f.type == FieldDescriptor.TYPE_FLOAT else _identity


def _identity(value: Any) -> Any:
    return value
