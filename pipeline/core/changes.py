"""The general routing path: topics whose routes read record metadata (``$key.id``, ``$header.x``,
``$timestamp``...), take deletes (tombstones, Debezium change events, a ``deleted_field``), set a
column's ``null`` rule, or whose values are not in the default format. Plain JSON routes keep the
generated put builders of :mod:`pipeline.core.routing`; this path builds one record's mutations step
by step, and a record may give any number of them per route (none for a skipped tombstone, a delete
and a put when an update moves a row).

Per record (contract of :meth:`ChangeTopic.mutations`):

1. The value is decoded by the topic's value decoder (:mod:`pipeline.core.decode`); no value is a
   tombstone. The key is decoded by the key decoder only when a route reads ``$key``.
2. The event a route reads is the value (or, in a Debezium route, the row image: ``after``, or
   ``before`` for a delete) with the metadata fields added at the top level (``$key``, ``$header``
   (name -> UTF-8 text, the last header of a name wins; bytes when not UTF-8), ``$timestamp``,
   ``$topic``, ``$partition``, ``$offset``; Debezium: ``$op``, ``$source``). They shadow an event's
   own top-level field of the same name.
3. Per route, by what the record is:

   - a tombstone: ``on_tombstone`` -- ``dead_letter`` (reason ``tombstone``), ``skip``, or ``delete``
     the row its key addresses (the rowkey must read metadata only) at the record's ``$offset`` or
     ``$timestamp`` (the route's ``timestamp_field``);
   - a Debezium change (``op``): ``c``/``r`` put ``after``; ``u`` puts ``after`` and, when the row
     ``before`` addresses differs, deletes that one at the update's timestamp; ``d`` deletes the row
     ``before`` addresses. Without a ``before`` image, a route whose rowkey reads event fields cannot
     tell the row to delete: reason ``no_before_image`` (give the source table a full replica
     identity) -- unless every event field of the rowkey is in the record's key (the primary key:
     an update never moves such a row, and a delete finds it from the key). Other ops (``t``
     truncate, ``m`` message): reason ``unsupported_op``;
   - an event whose ``deleted_field`` is ``true`` or ``"true"``: a delete of the row it addresses;
   - any other event: a put, where a column whose value is null follows its ``null`` rule (``delete``:
     a delete of that column at the put's timestamp, in a second mutation).

   A delete removes the route's column families of the row, every version up to the timestamp
   (``delete_versions = "all"``), or only the version at it (``"latest"``).

4. The cell timestamp is the route's ``timestamp_field`` (a Debezium route's default is
   ``$source.lsn``: the change's position in PostgreSQL's WAL. Row locks serialise the transactions
   that change one row, so for every row the positions of its changes increase in commit order, and
   two changes of one row never share one -- unlike ``source.ts_ms``, the commit time, which every
   change of a transaction shares: a delete and a re-insert of one key in one transaction would then
   meet at one timestamp, where HBase's delete wins). With ``$source.lsn``, a snapshot read (``r``)
   is stamped :data:`SNAPSHOT_TS` (0), below every streamed change: its ``lsn`` is the snapshot's
   position, which is above the positions of changes a transaction in flight during the snapshot
   made before it, though they commit, and are streamed, after it. Stamped with that ``lsn``, a
   snapshotted row such a transaction deleted or moved would outlive its delete.

Any refusal raises :class:`~pipeline.errors.EventError` with its reason; the record is routed whole
or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pipeline.core.decode import KEY_DECODERS, VALUE_DECODERS, Decoder
from pipeline.core.fields import MISSING, encoder, getter
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.schemas import SCHEMA_TYPES, SchemaCache, registry_decoder
from pipeline.errors import ConfigError, EventError
from pipeline.rowkey import EventFieldError, RowKey
from pipeline.settings import RouteSpec, TopicSpec

__all__ = ["SNAPSHOT_TS", "ChangeRoute", "ChangeTopic", "MetaRecord", "build_row"]

_UPSERT_OPS = frozenset(("c", "r", "u"))
#: the cell timestamp of a Debezium snapshot read when the route stamps ``$source.lsn`` (contract, step 4)
SNAPSHOT_TS = 0
_LSN = "$source.lsn"


class MetaRecord(Protocol):
    """What the general path reads of a consumed record."""

    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


class _Column:
    __slots__ = ("encode", "field", "get", "name", "null", "required")

    def __init__(self, name: bytes, field: str, get: Callable[[Mapping[str, Any]], Any],
                 encode: Callable[[Any], bytes], required: bool, null: str) -> None:
        self.name, self.field, self.get, self.encode = name, field, get, encode
        self.required, self.null = required, null


def build_row(rowkey: RowKey, event: Mapping[str, Any], route: str, max_key_bytes: int) -> bytes:
    """The rowkey of ``event``, or :class:`EventError` naming ``route``: a field the design cannot
    use (its reason), a key over ``max_key_bytes`` (``key_too_long``)."""
    try:
        row = rowkey.build(event)
    except EventFieldError as exc:
        raise EventError(exc.reason, f"route {route!r}: {exc}") from exc
    if len(row) > max_key_bytes:
        raise EventError("key_too_long", f"route {route!r}: rowkey is {len(row)} bytes; "
                                         f"HBase allows at most {max_key_bytes}")
    return row


class ChangeRoute:
    """One route on the general path: its puts and deletes from an event (metadata already added)."""

    def __init__(self, spec: RouteSpec, rowkey: RowKey, families: Sequence[str], max_key_bytes: int,
                 max_cell_bytes: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.table = spec.table
        self.rowkey = rowkey
        self.tombstones = spec.tombstones
        self.debezium = spec.envelope == "debezium"
        default_null = "delete" if self.debezium else None
        self.columns = [
            _Column(c.encode(), cs.field, getter(cs.field), encoder(cs), cs.required,
                    cs.null or default_null or ("error" if cs.required else "skip"))
            for c, cs in spec.columns.items()]
        self.families = {f.encode(): b"" for f in families}
        self.ts_field = spec.cell_timestamp
        self._ts = getter(self.ts_field) if self.ts_field else None
        self._deleted = getter(spec.deleted_field) if spec.deleted_field else None
        self.delete_kind = MutationKind.DELETE if spec.delete_versions == "all" else MutationKind.DELETE_VERSION
        #: the rowkey reads record metadata only: a tombstone (or a delete without a before image)
        #: still addresses a row
        self.key_only = all(f.startswith("$") for f in rowkey.fields)
        self._event_fields = [f for f in rowkey.fields if not f.startswith("$")]
        named = [*rowkey.fields, *(c.field for c in self.columns), self.ts_field or "", spec.deleted_field or ""]
        # a Debezium route reads the key to know which rows an update without a before image keeps
        self.reads_key = self.debezium or any(f.startswith("$key") for f in named)
        self.reads_headers = any(f.startswith("$header") for f in named)
        self._max_key = max_key_bytes
        self._max_cell = max_cell_bytes
        if self.tombstones == "delete" and not self.key_only:
            fields = ", ".join(f for f in rowkey.fields if not f.startswith("$"))
            raise ConfigError(f"route {self.name!r}: on_tombstone = 'delete' needs a rowkey made of record metadata "
                              f"(such as [$key.id]): a tombstone has no value, but the rowkey reads {fields}")

    def __repr__(self) -> str:
        return f"ChangeRoute({self.name!r} -> {self.table!r})"

    def row(self, event: Mapping[str, Any]) -> bytes:
        return build_row(self.rowkey, event, self.name, self._max_key)

    def timestamp(self, event: Mapping[str, Any]) -> int | None:
        if self._ts is None:
            return None
        ts = self._ts(event)
        if ts is MISSING or ts is None:
            raise EventError("missing_field", f"route {self.name!r}: timestamp field {self.ts_field!r} is missing")
        if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 2**63:
            raise EventError("bad_type", f"route {self.name!r}: timestamp field {self.ts_field!r} must be a "
                                         f"non-negative 64-bit integer, got {ts!r}")
        return ts

    def deleted(self, event: Mapping[str, Any]) -> bool:
        """Whether the event's ``deleted_field`` marks a delete."""
        if self._deleted is None:
            return False
        flag = self._deleted(event)
        return flag is True or flag == "true"

    def upsert(self, event: Mapping[str, Any], origin: Origin, ts: int | None = None) -> list[Mutation]:
        """The put of ``event`` (and the delete of its null columns whose rule is ``delete``), at ``ts`` or the
        event's timestamp."""
        row = self.row(event)
        if ts is None:
            ts = self.timestamp(event)
        cells: dict[bytes, bytes] = {}
        gone: dict[bytes, bytes] = {}
        size = len(row) + 16
        for col in self.columns:
            value = col.get(event)
            if value is MISSING and col.required:
                raise EventError("missing_field", f"route {self.name!r}: field {col.field!r} "
                                                  f"(column {col.name.decode()}) is missing")
            if value is MISSING or value is None:
                if value is MISSING or col.null == "skip":
                    continue
                if col.null == "error":
                    raise EventError("missing_field", f"route {self.name!r}: field {col.field!r} "
                                                      f"(column {col.name.decode()}) is null")
                if col.null == "delete":
                    gone[col.name] = b""
                    continue
                raw = b""
            else:
                raw = col.encode(value)
            if len(raw) > self._max_cell:
                raise EventError("value_too_large", f"route {self.name!r}: column {col.name.decode()} value is "
                                                    f"{len(raw)} bytes; the cell limit is {self._max_cell}")
            cells[col.name] = raw
            size += len(col.name) + len(raw) + 8
        out = []
        if gone:
            self._check_delete_ts(ts)
            out.append(Mutation(self.table, row, self.delete_kind, gone, ts, origin, 0,
                                len(row) + 16 + sum(len(c) + 8 for c in gone)))
        if cells:
            out.append(Mutation(self.table, row, MutationKind.PUT, cells, ts, origin, 0, size))
        return out

    def delete(self, event: Mapping[str, Any], origin: Origin, ts: int | None = None) -> Mutation:
        """The delete of the row ``event`` addresses (the route's families), at ``ts`` or the event's
        timestamp."""
        row = self.row(event)
        if ts is None:
            ts = self.timestamp(event)
        self._check_delete_ts(ts)
        return Mutation(self.table, row, self.delete_kind, self.families, ts, origin, 0,
                        len(row) + 16 + sum(len(f) + 8 for f in self.families))

    def _check_delete_ts(self, ts: int | None) -> None:
        if ts is None and self.delete_kind is MutationKind.DELETE_VERSION:
            raise EventError("missing_field", f"route {self.name!r}: delete_versions = 'latest' needs a timestamp")

    def debezium_change(self, op: Any, after: Any, before: Any, meta: dict[str, Any], origin: Origin) -> list[Mutation]:
        """The mutations of one Debezium change (module docstring, step 3)."""
        if op in _UPSERT_OPS:
            if not isinstance(after, dict):
                raise EventError("missing_field", f"route {self.name!r}: a change with op {op!r} has no 'after' row")
            new = after | meta
            out = self.upsert(new, origin, SNAPSHOT_TS if op == "r" and self.ts_field == _LSN else None)
            if op == "u":
                if isinstance(before, dict):
                    old = before | meta
                    if self._old_row(old, op) != self.row(new):
                        out.insert(0, self.delete(old, origin, self.timestamp(new)))
                elif not self._keyed(meta):
                    raise self._no_before(op)
            return out
        if op == "d":
            if isinstance(before, dict):
                old = before | meta
                self._old_row(old, op)
                return [self.delete(old, origin)]
            if self.key_only:
                return [self.delete(meta, origin)]
            if self._keyed(meta):
                return [self.delete(meta["$key"] | meta, origin)]
            raise self._no_before(op)
        raise EventError("unsupported_op", f"route {self.name!r}: Debezium op {op!r} is not applied (c, r, u, d are)")

    def _keyed(self, meta: Mapping[str, Any]) -> bool:
        """Whether every event field the rowkey reads is a field of the record's key (Debezium's key
        is the row's primary key, which an update cannot change: ``u`` never moves such a row)."""
        key = meta.get("$key")
        return isinstance(key, dict) and all(f.split(".", 1)[0] in key for f in self._event_fields)

    def _old_row(self, old: Mapping[str, Any], op: str) -> bytes:
        """The row a ``before`` image addresses; a rowkey field it lacks (a table without a full
        replica identity sends only the primary key) is ``no_before_image``."""
        try:
            return self.row(old)
        except EventError as exc:
            if exc.reason != "missing_field":
                raise
            raise self._no_before(op) from exc

    def _no_before(self, op: str) -> EventError:
        fields = ", ".join(self._event_fields)
        return EventError("no_before_image",
                          f"route {self.name!r}: a change with op {op!r} has no 'before' row, and the rowkey reads "
                          f"{fields}, which it may have changed: the old row cannot be found (give the source table "
                          f"a full replica identity, e.g. PostgreSQL's REPLICA IDENTITY FULL)")


def _decoder(fmt: str, plain: Mapping[str, Decoder], schemas: SchemaCache | None, what: str) -> Decoder:
    if fmt in SCHEMA_TYPES:
        if schemas is None:
            raise ConfigError(f"{what}_format {fmt!r} needs a schema cache (the worker's registry)")
        return registry_decoder(fmt, schemas, what)
    return plain[fmt]


class ChangeTopic:
    """The routes of one topic on the general path. ``schemas``: where a registry format's decoder
    finds writer schemas (required when the topic's value or key format is one)."""

    def __init__(self, topic: TopicSpec, routes: Sequence[ChangeRoute], schemas: SchemaCache | None = None) -> None:
        self.topic = topic
        self.routes = tuple(routes)
        self._value = _decoder(topic.value_format, VALUE_DECODERS, schemas, "value")
        self._key = _decoder(topic.key_format, KEY_DECODERS, schemas, "key")
        self._reads_key = any(r.reads_key for r in routes)
        #: whether values / keys (as routes read them) are framed: their schema ids are fetched before routing
        self.framed_values = topic.value_format in SCHEMA_TYPES
        self.framed_keys = topic.key_format in SCHEMA_TYPES and self._reads_key
        self._reads_headers = any(r.reads_headers for r in routes)
        self._debezium = any(r.debezium for r in routes)

    def _meta(self, tp: TopicPartition, rec: MetaRecord) -> dict[str, Any]:
        meta: dict[str, Any] = {"$timestamp": rec.timestamp, "$topic": tp.topic, "$partition": tp.partition,
                                "$offset": rec.offset}
        if self._reads_headers:  # decoded only for a topic whose routes read one
            headers: dict[str, Any] = {}
            for name, raw in rec.headers or ():
                try:
                    headers[name] = raw.decode() if raw is not None else None
                except UnicodeDecodeError:
                    headers[name] = raw
            meta["$header"] = headers
        if self._reads_key:
            meta["$key"] = None if rec.key is None else self._key(rec.key)
        return meta

    def mutations(self, tp: TopicPartition, rec: MetaRecord) -> list[Mutation]:
        """Every route's mutations for one record, in route order (module docstring); raises
        :class:`EventError` when the record cannot be applied."""
        origin = Origin(tp, rec.offset)
        meta = self._meta(tp, rec)
        if rec.value is None:
            return self._tombstone(meta, origin)
        event = self._value(rec.value)
        if not isinstance(event, dict):
            raise EventError("not_an_object", f"value is {type(event).__name__}, expected an object")
        out: list[Mutation] = []
        if self._debezium:
            op, after, before = event.get("op"), event.get("after"), event.get("before")
            dbz = meta | {"$op": op, "$source": event.get("source")}
        for route in self.routes:
            if route.debezium:
                out += route.debezium_change(op, after, before, dbz, origin)
                continue
            full = event | meta
            if route.deleted(full):
                out.append(route.delete(full, origin))
            else:
                out += route.upsert(full, origin)
        return out

    def _tombstone(self, meta: dict[str, Any], origin: Origin) -> list[Mutation]:
        out: list[Mutation] = []
        for route in self.routes:
            if route.tombstones == "dead_letter":
                raise EventError("tombstone", f"record has no value (tombstone); route {route.name!r} does not take "
                                              "tombstones (on_tombstone = 'skip' or 'delete' would)")
            if route.tombstones == "delete":
                out.append(route.delete(meta, origin))
        return out
