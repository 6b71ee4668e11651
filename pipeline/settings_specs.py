"""The tables and routes of a profile (``[[tables]]``, ``[[routes]]``): families, columns, counters and
rowkey designs. See :mod:`pipeline.settings` for how a profile is loaded and checked."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from pipeline.names import (
    family_name_problem,
)
from pipeline.settings_base import (
    INT32_MAX,
    RouteName,
    Section,
    TableName,
    TopicName,
)

__all__ = ["METADATA_FIELDS", "REGISTRY_FORMATS", "WHOLE_VALUE", "ColumnSpec", "CounterSpec", "DynamicColumnsSpec",
           "FamilySpec", "RouteSpec", "TableSpec", "TopicSpec", "metadata_root"]

#: what a field name starting with ``$`` may name: the record's metadata, addressable wherever an
#: event field is (rowkey designs, columns, ``timestamp_field``). ``$key`` is the decoded key (a path
#: goes on into a JSON key: ``$key.id``), ``$header.NAME`` a header's value as text, ``$timestamp``
#: the record's timestamp (epoch ms), ``$topic``, ``$partition``, ``$offset`` where it was read. In a
#: Debezium route also ``$op`` (c, r, u, d) and ``$source`` (the change's source block:
#: ``$source.lsn``, ``$source.ts_ms``, ``$source.txId``...).
METADATA_FIELDS = ("$key", "$header", "$timestamp", "$topic", "$partition", "$offset")
#: a record-metadata name in a rowkey design (``[$key.id]``); a ``$`` alone (``[$]``) is a delimiter
_METADATA_IN_ROWKEY = re.compile(r"\$[A-Za-z_]")
DEBEZIUM_FIELDS = ("$op", "$source")


def metadata_root(path: str) -> str | None:
    """The metadata name a field path starts with (``$key.id`` -> ``$key``), or None for an event field."""
    return path.split(".", 1)[0] if path.startswith("$") else None


class FamilySpec(Section):
    versions: int = Field(default=1, ge=1, le=INT32_MAX)
    ttl_s: int | None = Field(default=None, ge=1, le=INT32_MAX)
    compression: Literal["NONE", "GZ", "SNAPPY", "LZ4", "ZSTD"] | None = None
    in_memory: bool = False


class TableSpec(Section):
    name: TableName
    families: dict[str, FamilySpec] = Field(default_factory=lambda: {"d": FamilySpec()})
    regions: int | None = Field(default=None, ge=1, le=4096,
                                description="pre-split into this many regions (default: from the rowkey design)")

    @field_validator("families")
    @classmethod
    def _families(cls, value: dict[str, FamilySpec]) -> dict[str, FamilySpec]:
        if not value:
            raise ValueError("a table needs at least one column family")
        for family in value:
            problem = family_name_problem(family)
            if problem is not None:
                raise ValueError(f"family {family!r}: {problem}")
        return value


#: the ``value_format``/``key_format`` names that read the Confluent wire format through ``[registry]``
REGISTRY_FORMATS = ("avro", "protobuf", "json_schema")


class TopicSpec(Section):
    """How one topic's records become events (``[[topics]]``; a topic not listed is JSON with text keys).

    ``value_format``: how a value is decoded (``json``: a JSON object, or a Kafka Connect
    ``{"schema": ..., "payload": ...}`` envelope whose payload is one; ``avro``, ``protobuf``,
    ``json_schema``: the Confluent wire format, its writer schema fetched from ``[registry]`` by the id
    in each record: :mod:`pipeline.core.records.schemas`). ``key_format``: how the key behind ``$key`` is
    decoded: ``text`` (UTF-8), ``json`` (a JSON value, a Connect envelope unwrapped likewise), ``bytes``
    (as is), or one of the registry formats."""

    name: TopicName
    value_format: Literal["json", "avro", "protobuf", "json_schema"] = "json"
    key_format: Literal["text", "json", "bytes", "avro", "protobuf", "json_schema"] = "text"
    on_route_error: Literal["dead_letter_route", "dead_letter_record"] = Field(
        default="dead_letter_route",
        description="when one route cannot take a record: dead_letter_route (the default) sends the record to the "
                    "dead-letter topic for that route, with the route's name in a header, and writes its other "
                    "routes; dead_letter_record sends it once and writes none of its routes (all or nothing)")
    redrive_of: TopicName | None = Field(
        default=None,
        description="this topic holds dead letters to re-drive (what `hbase-ingest backfill --route` sets up): each "
                    "record whose hbase-ingest.route header names one of the topic's routes, or names none and "
                    "came from this source topic, is routed as the record it was (its source topic, partition, "
                    "offset and timestamp as record metadata); any other is skipped")


class ColumnSpec(Section):
    """One cell of a route: value taken from ``field`` (a dotted path, or record metadata such as
    ``$key.id``: :data:`METADATA_FIELDS`) and encoded as ``text`` (UTF-8; numbers in decimal),
    ``json`` (orjson of the value), ``long`` (8-byte big-endian), ``bytes`` (as they are) or ``decimal``
    (Java's ``Bytes.toBytes(BigDecimal)``): :mod:`pipeline.core.routes.encodings`.

    ``required``: a field that is absent is an error (the record goes to the dead-letter topic);
    otherwise the cell is left out. ``null`` says what a JSON null does: ``error`` (a dead letter),
    ``skip`` (no cell), ``empty`` (a cell of zero bytes) or ``delete`` (the cell's versions up to the
    event's timestamp are deleted: a changelog's "this column is now NULL"). Unset: ``error`` for a
    required column, ``skip`` otherwise, and ``delete`` in a Debezium route."""

    field: str
    encoding: Literal["text", "json", "long", "bytes", "decimal"] = "text"
    required: bool = True
    null: Literal["error", "skip", "empty", "delete"] | None = None


#: the field of dynamic columns that names the whole event (a Debezium route: the row image), its
#: record metadata left out
WHOLE_VALUE = "$value"


class DynamicColumnsSpec(Section):
    """Every field of an object as a column of one family (``columns = { "d:*" = "$value" }``): the key
    ``family:PREFIX*`` gives each field the qualifier ``PREFIX`` + its name; ``field`` is the object,
    ``$value`` for the whole event (in a Debezium route the row image), or a dotted path to one.

    Per field (:mod:`pipeline.core.routes.reference` is the contract): its encoding is ``encoding``, or
    with ``auto`` the one its registry schema gives its type, else the one its value's type gives
    (``docs/columns.md``); a nested object is one ``json`` cell (``nested = "json"``) or its fields
    flattened under ``name`` + ``separator`` (``"flatten"``); a field in ``exclude`` (by its flattened
    name, or a name of an object it is in) is no column; a field named by a declared column is that
    column's. A null field follows ``null`` (unset: ``delete`` in a Debezium route, ``skip`` otherwise);
    an absent field writes nothing (a schema that loses a field leaves its old cells as they were)."""

    field: str = WHOLE_VALUE
    exclude: list[str] = Field(default_factory=list)
    nested: Literal["json", "flatten"] = "json"
    separator: str = Field(default=".", min_length=1)
    encoding: Literal["auto", "text", "json"] = "auto"
    null: Literal["skip", "empty", "delete"] | None = None


class CounterSpec(Section):
    """Pre-aggregation on a counter cell ``column`` (``family:qualifier``).

    ``mode = "increment"``: an atomic HBase increment by ``amount`` (or the value of ``amount_field``).
    Not replay-safe: re-delivered events (after a crash or a backfill) are counted again.

    ``mode = "tally"``: replay-safe. Each event writes one cell in ``family`` whose qualifier is the
    event's identity (``id_field``, or topic/partition/offset when unset) and whose value is the amount;
    the count is the sum over the row's cells (the reader does that). A replay rewrites the same cells.
    """

    column: str
    mode: Literal["increment", "tally"] = "increment"
    amount: int = Field(default=1, ge=-(2**63), le=2**63 - 1, description="an HBase long")
    amount_field: str | None = None
    id_field: str | None = None


class RouteSpec(Section):
    """Where one topic's events go: a table, a rowkey design, columns, and the event-time field."""

    name: RouteName
    topic: TopicName
    table: TableName
    rowkey: str
    columns: dict[str, ColumnSpec] = Field(default_factory=dict)
    dynamic_columns: dict[str, DynamicColumnsSpec] = Field(
        default_factory=dict, description="every field of an object as a column: written in columns as "
                                          "'family:*' (or 'family:prefix*') = '$value' or a path")
    timestamp_field: str | None = Field(
        default=None, description="epoch-ms field used as the cell timestamp (replays rewrite the same cells); "
                                  "a Debezium route defaults to $source.lsn")
    counter: CounterSpec | None = None
    envelope: Literal["none", "debezium"] = Field(
        default="none", description="debezium: values are Debezium change events; c/r/u write 'after', d "
                                    "deletes the row 'before' addresses, an update that moves the row deletes "
                                    "the old one")
    on_tombstone: Literal["dead_letter", "skip", "delete"] | None = Field(
        default=None, description="what a record with no value does: dead_letter (the default), skip (the "
                                  "default of a Debezium route: its delete event did the delete), or delete "
                                  "the row its key addresses")
    deleted_field: str | None = Field(
        default=None, description="a field that marks a delete when true or 'true' (Debezium's flattened "
                                  "form: __deleted): the row the event addresses is deleted")
    delete_versions: Literal["all", "latest"] = Field(
        default="all", description="a delete removes every version up to the event's timestamp (all), or "
                                   "only the version at that timestamp (latest)")
    ttl_field: str | None = Field(
        default=None, description="a field holding the put's cell TTL in milliseconds, counted from the cell "
                                  "timestamp (HBase's per-cell TTL): the cells expire on their own time; absent "
                                  "or null: no TTL beyond the family's")
    null_key: Literal["skip", "dead_letter"] | None = Field(
        default=None, description="what a null rowkey field (JSON null, SQL NULL) does: skip (the default of a "
                                  "Debezium route: no row, as a sparse index; an update to NULL deletes the old "
                                  "row) or dead_letter (the default of any other route, reason null_key)")

    @model_validator(mode="before")
    @classmethod
    def _short_columns(cls, data: Any) -> Any:
        # `"d:h" = "hostname"` is shorthand for `"d:h" = { field = "hostname" }`; a column ending in `*`
        # is dynamic columns (`"d:*" = "$value"`)
        if isinstance(data, dict) and isinstance(data.get("columns"), dict):
            data = dict(data)
            columns = {k: ({"field": v} if isinstance(v, str) else v) for k, v in data["columns"].items()}
            dynamic = {k: v for k, v in columns.items() if isinstance(k, str) and "*" in k}
            if dynamic:
                given = data.get("dynamic_columns")
                data["dynamic_columns"] = {**(given if isinstance(given, dict) else {}), **dynamic}
            data["columns"] = {k: v for k, v in columns.items() if k not in dynamic}
        return data

    @model_validator(mode="after")
    def _check(self) -> RouteSpec:
        for column in self.columns:
            if column.count(":") != 1 or column.startswith(":"):
                raise ValueError(f"column {column!r} must be 'family:qualifier'")
        for column, dyn in self.dynamic_columns.items():
            if ":" not in column or column.startswith(":") or not column.endswith("*") or "*" in column[:-1]:
                raise ValueError(f"dynamic columns {column!r} must be 'family:*' or 'family:prefix*'")
            if self.counter is not None:
                raise ValueError("a counter route has no dynamic columns")
            if dyn.field != WHOLE_VALUE and dyn.field.startswith("$"):
                raise ValueError(f"dynamic columns {column!r}: field {dyn.field!r} must be {WHOLE_VALUE!r} (the "
                                 "whole event) or a path to an object in it")
        if self.counter is None and not self.columns and not self.dynamic_columns:
            raise ValueError("a route needs columns, or a counter")
        if self.counter is not None and self.counter.column.count(":") != 1:
            raise ValueError(f"counter column {self.counter.column!r} must be 'family:qualifier'")
        for column in [*self.columns, *self.dynamic_columns,
                       *([self.counter.column] if self.counter is not None else [])]:
            problem = family_name_problem(column.split(":", 1)[0])
            if problem is not None:
                raise ValueError(f"column {column!r}: {problem}")
        allowed = METADATA_FIELDS + (DEBEZIUM_FIELDS if self.envelope == "debezium" else ())
        named = [(f"column {c}", spec.field) for c, spec in self.columns.items()]
        for what, path in [*named, ("timestamp_field", self.timestamp_field), ("deleted_field", self.deleted_field),
                           ("ttl_field", self.ttl_field)]:
            root = metadata_root(path) if path else None
            if root is not None and root not in allowed:
                raise ValueError(f"{what}: {path!r} names no record metadata; a field starting with '$' is one of "
                                 f"{', '.join(allowed)}")
        changes = self.envelope == "debezium" or self.deleted_field is not None or self.on_tombstone == "delete"
        if self.ttl_field is not None and self.counter is not None:
            raise ValueError("ttl_field is for puts; a counter route's cells cannot expire on their own")
        if changes and self.counter is not None:
            raise ValueError("a counter route cannot take deletes (envelope, deleted_field, on_tombstone = 'delete')")
        if self.envelope == "debezium" and self.deleted_field is not None:
            raise ValueError("deleted_field is for the flattened form; a Debezium envelope says deletes by its op")
        if self.on_tombstone == "delete":
            ts = self.timestamp_field
            if ts not in ("$timestamp", "$offset"):
                raise ValueError(
                    "on_tombstone = 'delete' needs timestamp_field = '$offset' or '$timestamp': a tombstone has "
                    "no value, so its delete can only be ordered against the puts by the record's own position or "
                    f"time (timestamp_field is {ts!r})")
        nulls = [c.null for c in self.columns.values()] + [d.null for d in self.dynamic_columns.values()]
        deletes_cells = "delete" in nulls
        if self.delete_versions == "latest" and not (changes or deletes_cells):
            raise ValueError("delete_versions is for routes that delete (envelope, deleted_field, on_tombstone, "
                             "null = 'delete')")
        return self

    @property
    def families(self) -> list[str]:
        """The column families the route writes, in the order its columns (then its counter) name them."""
        columns = [*self.columns, *self.dynamic_columns, *([self.counter.column] if self.counter is not None else [])]
        return list(dict.fromkeys(c.split(":", 1)[0] for c in columns))

    @property
    def tombstones(self) -> Literal["dead_letter", "skip", "delete"]:
        """What a tombstone does, the default applied."""
        if self.on_tombstone is not None:
            return self.on_tombstone
        return "skip" if self.envelope == "debezium" else "dead_letter"

    @property
    def null_key_rule(self) -> Literal["skip", "dead_letter"]:
        """What a null rowkey field does, the default applied."""
        if self.null_key is not None:
            return self.null_key
        return "skip" if self.envelope == "debezium" else "dead_letter"

    @property
    def cell_timestamp(self) -> str | None:
        """The field the cell timestamp comes from, the default applied."""
        if self.timestamp_field is None and self.envelope == "debezium":
            return "$source.lsn"
        return self.timestamp_field

    @property
    def changelog(self) -> bool:
        """Whether the route reads record metadata, or can delete: it is routed by the general path
        (:mod:`pipeline.core.routes.reference`), not the generated put builders."""
        fields = [c.field for c in self.columns.values()] + [self.cell_timestamp or ""]
        return (self.envelope != "none" or self.deleted_field is not None or self.tombstones != "dead_letter"
                or any(c.null is not None for c in self.columns.values())
                or any(d.null is not None for d in self.dynamic_columns.values())
                or any(f.startswith("$") for f in fields)
                or _METADATA_IN_ROWKEY.search(self.rowkey) is not None)


