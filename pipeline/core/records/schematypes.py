"""The types of a registry schema, as fetched and as compiled (pure data): shared by
:mod:`pipeline.core.records.schemas` (Avro, JSON Schema, the cache and the decoders) and
:mod:`pipeline.core.records.protobufs` (Protobuf's compiler)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT_SCHEMA_TYPE", "SCHEMA_TYPES", "CompiledSchema", "RegisteredSchema", "SchemaReference",
           "SchemaType"]

SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
#: the registry's ``schemaType`` of each ``value_format``/``key_format`` that reads framed records
SCHEMA_TYPES: dict[str, SchemaType] = {"avro": "AVRO", "json_schema": "JSON", "protobuf": "PROTOBUF"}
#: a registry leaves ``schemaType`` out for Avro
DEFAULT_SCHEMA_TYPE: SchemaType = "AVRO"


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one imports: ``name`` as the importer spells it (an Avro full name, a
    ``.proto`` file name, a JSON Schema ``$ref`` URI), and its text."""

    name: str
    text: str
    subject: str = ""
    version: int = 0


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry returned it for ``id``: its type, its text, and the schemas it
    references, resolved (each before any schema that imports it). ``problem``: why the fetching side
    could not make it usable (e.g. ``.proto`` source that does not compile); its records are then
    ``unknown_schema`` dead letters saying so."""

    id: int
    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class CompiledSchema:
    """One id's decoder: ``decode(raw, what)`` reads a framed ``raw`` (its header already checked) into
    an event value; ``problem`` is set (and ``decode`` raises it) for an id the registry does not know or
    a schema that cannot be compiled. ``shape``: the column encoding of each field of its records
    (:mod:`pipeline.core.records.shapes`), None when the schema is no record."""

    id: int
    schema_type: SchemaType | None
    decode: Callable[[bytes, str], Any]
    problem: str | None = None
    name: str = field(default="")
    shape: Mapping[str, Any] | None = None
