"""Writer schemas from a schema registry, compiled once per id, and the decoders that read framed
records with them (pure: the runtime fetches, this module compiles and decodes).

A :class:`SchemaCache` holds the schemas a worker has fetched, by id, compiled. The runtime asks it
which ids of a batch it lacks (:meth:`SchemaCache.missing`), fetches those, adds them, then routes: a
decoder never does I/O, and an id the cache lacks when a record is decoded is a bug, not bad input.
The cache is bounded: :meth:`SchemaCache.trim` drops the oldest schemas beyond ``capacity``, except
those the batch in hand needs.

How a decoded record becomes an event (the same rule for values and keys):

- **Avro** (fastavro, the writer schema only): records are dicts (nested records too), arrays are
  lists, maps are dicts, enums their symbol (``str``), a union the value of its branch (``None`` for
  ``null``), ``bytes`` and ``fixed`` are ``bytes``. Logical types keep the number they are on the wire --
  ``timestamp-millis`` (epoch milliseconds: a ``timestamp_field`` as it is), ``timestamp-micros``
  (epoch microseconds), ``date`` (days since the epoch), ``time-millis``/``-micros`` -- and ``uuid``
  its text; ``decimal`` becomes a :class:`decimal.Decimal` of the schema's scale. A ``float``
  (32-bit) is the shortest decimal that reads back as the same float32
  (:mod:`pipeline.core.records.float32`: ``0.1``, not ``0.10000000149011612``).
- **JSON Schema**: the body is read as JSON (:func:`pipeline.core.records.decode.json_value`) and validated
  against the schema; a body that does not validate is ``schema_mismatch``.
- **Protobuf**: see :mod:`pipeline.core.records.protobufs`.

Where those values go (:mod:`pipeline.core.routes.encodings`): ``bytes`` feed a rowkey segment as they are
and a ``bytes`` column as they are; a ``Decimal`` feeds a rowkey segment and a ``text`` column as its
plain decimal text (no exponent, its scale kept: ``12.50``), a ``decimal`` column as HBase's
``Bytes.toBytes(BigDecimal)``, a ``json`` column as an exact JSON number.

Errors (:class:`~pipeline.errors.EventError`): ``undecodable`` (not framed: :mod:`pipeline.core.records.wire`),
``unknown_schema`` (the registry has no schema of that id, or the schema cannot be compiled; the
message quotes the registry's answer), ``schema_mismatch`` (the body does not match its schema, e.g.
a truncated body, or bytes left over after the record).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import fastavro
import jsonschema
import orjson
from referencing import Registry, Resource

from pipeline.core.records.decode import loads, unwrap
from pipeline.core.records.schematypes import (
    DEFAULT_SCHEMA_TYPE,
    SCHEMA_TYPES,
    CompiledSchema,
    RegisteredSchema,
    SchemaReference,
    SchemaType,
)
from pipeline.core.records.shapes import avro_float32, avro_shape, json_schema_shape
from pipeline.core.records.wire import HEADER_BYTES, schema_id
from pipeline.errors import EventError

# the schema types live in pipeline.core.records.schematypes (Protobuf's compiler needs them too); named here as well
__all__ = ["DEFAULT_SCHEMA_TYPE", "SCHEMA_TYPES", "CompiledSchema", "RegisteredSchema", "SchemaCache",
           "SchemaReference", "SchemaType", "registry_decoder"]

_LOGICAL_KEPT = frozenset({"decimal"})


def compile_schema(schema: RegisteredSchema) -> CompiledSchema:
    """Compile ``schema``; a schema that cannot be compiled gives a :class:`CompiledSchema` whose
    ``problem`` says why (records framed with its id are dead letters, the worker goes on)."""
    if schema.problem is not None:
        return unusable(schema.id, f"schema id {schema.id} ({schema.schema_type}), which cannot be used: "
                                   f"{schema.problem}", schema.schema_type)
    try:
        if schema.schema_type == "AVRO":
            return _avro(schema)
        if schema.schema_type == "JSON":
            return _json_schema(schema)
        from pipeline.core.records.protobufs import compile_protobuf  # only a Protobuf schema needs protobuf
        return compile_protobuf(schema)
    except Exception as exc:  # a registry can hold anything; this schema is unusable, the worker goes on
        return unusable(schema.id, f"schema id {schema.id} ({schema.schema_type}) cannot be compiled: "
                                   f"{type(exc).__name__}: {exc}", schema.schema_type)


def unusable(ident: int, problem: str, schema_type: SchemaType | None = None) -> CompiledSchema:
    """A cache entry for an id whose records cannot be decoded (``unknown_schema``)."""
    def decode(raw: bytes, what: str) -> Any:
        raise EventError("unknown_schema", f"{what} is framed with {problem}")
    return CompiledSchema(ident, schema_type, decode, problem)


def _strip_logical(node: Any) -> Any:
    """The Avro schema with its logical types removed, except :data:`_LOGICAL_KEPT` (module docstring)."""
    if isinstance(node, dict):
        out = {k: _strip_logical(v) for k, v in node.items()}
        if out.get("logicalType") not in (None, *_LOGICAL_KEPT):
            del out["logicalType"]
        return out
    if isinstance(node, list):
        return [_strip_logical(v) for v in node]
    return node


def _avro(schema: RegisteredSchema) -> CompiledSchema:
    named: dict[str, Any] = {}
    for ref in schema.references:
        fastavro.parse_schema(_strip_logical(_avro_json(ref.text)), named)
    parsed = fastavro.parse_schema(_strip_logical(_avro_json(schema.text)), named)
    name = parsed.get("name", parsed.get("type", "")) if isinstance(parsed, dict) else str(parsed)
    ident, reader = schema.id, fastavro.schemaless_reader
    floats = avro_float32(parsed, named)

    def decode(raw: bytes, what: str) -> Any:
        fo = io.BytesIO(raw)
        fo.seek(HEADER_BYTES)
        try:
            value = reader(fo, parsed, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeDecodeError...
            raise EventError("schema_mismatch", f"{what} does not match its Avro schema (id {ident}, {name}): "
                                                f"{type(exc).__name__}: {exc}") from exc
        left = len(raw) - fo.tell()
        if left:
            raise EventError("schema_mismatch", f"{what} does not match its Avro schema (id {ident}, {name}): "
                                                f"{left} bytes left over after the record")
        return value if floats is None else floats(value)
    return CompiledSchema(ident, "AVRO", decode, name=str(name), shape=avro_shape(parsed, named))


def _avro_json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text  # a primitive type spelled bare: "string"


def _json_schema(schema: RegisteredSchema) -> CompiledSchema:
    document = orjson.loads(schema.text)
    resources = [(ref.name, Resource.from_contents(orjson.loads(ref.text))) for ref in schema.references]
    validator_cls = jsonschema.validators.validator_for(document)
    validator_cls.check_schema(document)
    validator = validator_cls(document, registry=Registry().with_resources(resources))
    ident, title = schema.id, str(document.get("title", "")) if isinstance(document, dict) else ""

    def decode(raw: bytes, what: str) -> Any:
        body = raw[HEADER_BYTES:]
        try:
            value = unwrap(loads(body))
        except orjson.JSONDecodeError as exc:
            raise EventError("schema_mismatch", f"{what} is framed with JSON Schema id {ident} but its body is "
                                                f"not valid JSON: {exc}") from exc
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the root)"
            raise EventError("schema_mismatch", f"{what} does not match its JSON Schema (id {ident}"
                                                f"{', ' + title if title else ''}) at {where}: {error.message}")
        return value
    return CompiledSchema(ident, "JSON", decode, name=title, shape=json_schema_shape(document))


class SchemaCache:
    """Compiled writer schemas by id (module docstring), at most ``capacity`` of them beyond those a
    batch in hand needs. Not thread-safe: one worker's event loop owns it."""

    def __init__(self, capacity: int = 1000) -> None:
        if capacity < 1:
            raise ValueError("a schema cache holds at least one schema")
        self.capacity = capacity
        self._compiled: dict[int, CompiledSchema] = {}

    def __repr__(self) -> str:
        return f"SchemaCache({len(self._compiled)}/{self.capacity} schemas)"

    def __len__(self) -> int:
        return len(self._compiled)

    def __contains__(self, ident: object) -> bool:
        return ident in self._compiled

    def missing(self, ids: Iterable[int]) -> list[int]:
        """Those of ``ids`` not in the cache, ascending."""
        return sorted(i for i in set(ids) if i not in self._compiled)

    def trim(self, keep: Iterable[int] = ()) -> list[int]:
        """Drop the oldest schemas until ``capacity`` are left, never one of ``keep``; the dropped ids."""
        excess = len(self._compiled) - self.capacity
        if excess <= 0:
            return []
        kept = set(keep)
        dropped = [i for i in self._compiled if i not in kept][:excess]
        for i in dropped:
            del self._compiled[i]
        return dropped

    def add(self, schema: RegisteredSchema) -> CompiledSchema:
        """Compile ``schema`` and keep it (a schema that cannot be compiled is kept as unusable)."""
        compiled = self._compiled[schema.id] = compile_schema(schema)
        return compiled

    def add_unknown(self, ident: int, answer: str) -> None:
        """Remember that the registry has no schema ``ident`` (``answer``: what it said)."""
        self._compiled[ident] = unusable(ident, f"schema id {ident}, which the registry does not have ({answer})")

    def get(self, ident: int) -> CompiledSchema | None:
        return self._compiled.get(ident)

    def lookup(self) -> Callable[[int], CompiledSchema | None]:
        """:meth:`get` without a method call of its own, for a per-record loop: the live mapping's bound
        ``get`` (it sees schemas added and trimmed later)."""
        return self._compiled.get

    def problems(self) -> Mapping[int, str]:
        """Id -> why its records are dead letters, for the ids that cannot be decoded."""
        return {i: c.problem for i, c in self._compiled.items() if c.problem is not None}


def registry_decoder(fmt: str, cache: SchemaCache, what: str) -> Callable[[bytes], Any]:
    """The decoder of ``value_format``/``key_format`` ``fmt`` (a key of :data:`SCHEMA_TYPES`) reading
    ``cache``: framing checked, the schema's type checked against the format, the body decoded.
    ``what`` ("value" or "key") names the part in errors."""
    expected = SCHEMA_TYPES[fmt]
    lookup = cache.lookup()

    def decode(raw: bytes) -> Any:
        ident = schema_id(raw, what)
        schema = lookup(ident)
        if schema is None:
            raise RuntimeError(f"schema id {ident} was not fetched before decoding (SchemaCache.missing)")
        if schema.schema_type != expected and schema.problem is None:
            raise EventError("schema_mismatch", f"{what} is framed with schema id {ident}, a {schema.schema_type} "
                                                f"schema, but the topic's {what}_format is {fmt!r}")
        return schema.decode(raw, what)
    return decode
