"""What a writer schema says its fields are, as the column encoding each gets (pure).

Dynamic columns (:class:`~pipeline.settings.DynamicColumnsSpec`, ``encoding = "auto"``) encode each
field as its writer schema types it, where the topic has one, so that a column's cells share one
encoding whatever value a record holds. A :data:`Shape` maps a field name to one of:

- an encoding name of :data:`~pipeline.core.routes.encodings.ENCODINGS` (``text``, ``long``,
  ``bytes``, ``decimal``, ``json``);
- a nested :data:`Shape` (a record, a message, an object with ``properties``);
- ``None``: the schema does not settle it (a union of several types, a ``$ref``): the value's type
  decides, as for a field with no schema.

The mapping (``docs/columns.md``): integers (Avro ``int``/``long``, its logical types on them such
as ``timestamp-millis``, JSON Schema ``integer``, Protobuf's signed and 32-bit integers) are
``long``; strings, enums, booleans and floating point numbers are ``text``; Avro ``bytes``/``fixed``
are ``bytes``, ``decimal`` ``decimal``; arrays and maps ``json``. A union with ``null`` is its other
branch; ``null`` alone is left out. Protobuf's shapes are :func:`pipeline.core.records.protobufs`'s.

:func:`avro_float32` is the other thing a schema settles: where its ``float`` (32-bit) values are,
made readable by :func:`~pipeline.core.records.float32.shortest_float32` as they are decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.core.records.float32 import shortest_float32

__all__ = ["Shape", "avro_float32", "avro_shape", "json_schema_shape"]

Shape = Mapping[str, Any]  # field name -> encoding name | Shape | None (module docstring)

_AVRO_LEAVES = {"boolean": "text", "int": "long", "long": "long", "float": "text", "double": "text",
                "string": "text", "bytes": "bytes", "fixed": "bytes", "enum": "text", "array": "json",
                "map": "json"}
_JSON_LEAVES = {"integer": "long", "number": "text", "string": "text", "boolean": "text", "array": "json"}
#: deeper than this, a nested record is one ``json`` value (a recursive schema ends somewhere)
_DEPTH = 16


def avro_shape(parsed: Any, named: Mapping[str, Any]) -> Shape | None:
    """The shape of a parsed Avro schema (``named``: its named types by full name); None when it is
    not a record."""
    node = _avro_node(parsed, named, 0)
    return node if isinstance(node, dict) else None


def _avro_node(schema: Any, named: Mapping[str, Any], depth: int) -> Any:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):  # a union: its one branch besides null, else the value decides
        branches = [b for b in schema if b != "null"]
        return _avro_node(branches[0], named, depth) if len(branches) == 1 else None
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            if depth >= _DEPTH:
                return "json"
            return {f["name"]: _avro_node(f["type"], named, depth + 1) for f in schema.get("fields", ())
                    if f.get("type") != "null"}
        if schema.get("logicalType") == "decimal":
            return "decimal"
        return _avro_node(kind, named, depth) if isinstance(kind, str | list) else None
    return _AVRO_LEAVES.get(schema) if isinstance(schema, str) else None


def json_schema_shape(document: Any) -> Shape | None:
    """The shape of a JSON Schema document; None when its root declares no ``properties``."""
    node = _json_node(document, 0)
    return node if isinstance(node, dict) else None


def _json_node(schema: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if (kind == "object" or kind is None) and isinstance(schema.get("properties"), Mapping):
        if depth >= _DEPTH:
            return "json"
        return {name: _json_node(sub, depth + 1) for name, sub in schema["properties"].items()}
    if kind == "object":
        return "json"
    return _JSON_LEAVES.get(kind) if isinstance(kind, str) else None


Fix = Callable[[Any], Any]


def avro_float32(parsed: Any, named: Mapping[str, Any]) -> Fix | None:
    """A function that gives a decoded value with each of its schema's ``float`` values made
    :func:`~pipeline.core.records.float32.shortest_float32` (records, arrays, maps, recursive types,
    and a union whose one branch besides null holds floats, are walked); None when the schema has no
    ``float`` there."""
    return _Floats(named).fix(parsed)


class _Floats:
    """The float fixers of one schema's types, each named type's built once (a recursive type's
    fixer calls itself through its memo entry)."""

    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named
        self.memo: dict[str, list[Fix | None]] = {}

    def fix(self, schema: Any) -> Fix | None:
        if isinstance(schema, str) and schema in self.named:
            return self._named(schema)
        if schema == "float":
            return _float
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            inner = self.fix(branches[0]) if len(branches) == 1 else None
            return None if inner is None else _nullable(inner)
        if not isinstance(schema, dict):
            return None
        kind = schema.get("type")
        if kind == "record":
            name = schema.get("name")
            return self._named(name) if isinstance(name, str) and name in self.named else self._record(schema)
        if kind == "array":
            item = self.fix(schema.get("items"))
            return None if item is None else (lambda values: [item(v) for v in values])
        if kind == "map":
            value = self.fix(schema.get("values"))
            return None if value is None else (lambda values: {k: value(v) for k, v in values.items()})
        return self.fix(kind) if isinstance(kind, str | list) else None

    def _named(self, name: str) -> Fix | None:
        box = self.memo.get(name)
        if box is None:
            if not _has_float(self.named[name], self.named, set()):
                self.memo[name] = [None]
                return None
            box = self.memo[name] = []
            schema = self.named[name]
            box.append(self._record(schema) if isinstance(schema, dict) and schema.get("type") == "record"
                       else self.fix(schema))
        if box:
            return box[0]
        return lambda value: box[0](value) if box[0] is not None else value  # itself, while being built

    def _record(self, schema: Mapping[str, Any]) -> Fix | None:
        fixes = [(f["name"], fix) for f in schema.get("fields", ()) if (fix := self.fix(f["type"])) is not None]
        return _record(fixes) if fixes else None


def _has_float(schema: Any, named: Mapping[str, Any], seen: set[str]) -> bool:
    if isinstance(schema, str):
        if schema in named:
            if schema in seen:
                return False
            seen.add(schema)
            return _has_float(named[schema], named, seen)
        return schema == "float"
    if isinstance(schema, list):
        return any(_has_float(b, named, seen) for b in schema)
    if isinstance(schema, dict):
        if isinstance(schema.get("name"), str):
            seen.add(schema["name"])
        return any(_has_float(schema.get(k), named, seen) for k in ("type", "items", "values")) or any(
            _has_float(f.get("type"), named, seen) for f in schema.get("fields", ()))
    return False


def _float(value: Any) -> Any:
    return shortest_float32(value) if value.__class__ is float else value


def _nullable(inner: Fix) -> Fix:
    return lambda value: None if value is None else inner(value)


def _record(fixes: list[tuple[str, Fix]]) -> Fix:
    def fix(record: Any) -> Any:
        for name, one in fixes:
            if name in record:
                record[name] = one(record[name])
        return record
    return fix
