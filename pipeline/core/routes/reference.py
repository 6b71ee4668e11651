"""The reference of routing: what one record gives on every route of its topic, step by step. Every
route is defined here, whatever it reads (event fields, record metadata such as ``$key.id``,
``$header.x``, ``$timestamp``), whatever it does (puts, deletes, counters) and whatever the topic's
format; the fast forms of :mod:`pipeline.core.routes.router` (generated put builders, the compiled loop)
give what this gives, or hand the record here. A record may give any number of mutations per route
(none for a skipped tombstone or a NULL key, a delete and a put when an update moves a row).

Per record (contract of :meth:`TopicReference.outcome`):

1. The value is decoded by the topic's value decoder (:mod:`pipeline.core.records.decode`); no value is a
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
     ``before`` addresses differs, deletes that one at the update's timestamp -- also when the route
     refuses the new row (the refusal then keeps that delete); ``d`` deletes the row ``before``
     addresses. A ``before`` whose key the route cannot build (the delimiter in it, a key too long)
     addresses no row: the route never wrote one. Without a ``before`` image, a route whose rowkey
     reads event fields cannot tell the row to delete: reason ``no_before_image`` (give the source table a full replica
     identity) -- unless every event field of the rowkey is in the record's key (the primary key:
     an update never moves such a row, and a delete finds it from the key). Other ops (``t``
     truncate, ``m`` message): reason ``unsupported_op``;
   - an event whose ``deleted_field`` is ``true`` or ``"true"``: a delete of the row it addresses;
   - a counter route: an increment, or a tally cell (:class:`~pipeline.settings.CounterSpec`);
   - any other event: a put, where a column whose value is null follows its ``null`` rule (``delete``:
     a delete of that column at the put's timestamp, in a second mutation). A put with no cell left
     is no mutation (HBase has no row without cells).

   Dynamic columns (``family:PREFIX*``, :class:`~pipeline.settings.DynamicColumnsSpec`) add a cell per
   field of their object (``$value``: the event, or a Debezium route's row image, without its ``$``
   fields; a path: the object there, nothing when it is absent or null, ``bad_type`` when it is no
   object), in the object's field order, qualifier ``PREFIX`` + the field's name; a nested object is one
   ``json`` cell, or (``nested = "flatten"``) its fields under ``name`` + ``separator``, recursively. A
   field whose (flattened) name, or the name of an object it is in, is in ``exclude`` gives no cell, nor
   does one whose column a declared column names. The encoding is the spec's, or with ``auto`` the
   one the record's writer schema gives the field (:mod:`pipeline.core.records.shapes`; a Debezium
   route reads the schema of ``after``), else by the value: ``bool``, ``str``, ``float`` ``text``,
   ``int`` ``long`` (beyond 64 bits: ``out_of_range``), ``bytes`` ``bytes``, ``Decimal`` ``decimal``,
   lists and objects ``json``. A null field follows the spec's ``null`` rule as a declared column's.

   A route with ``ttl_field`` gives its put that cell TTL (an
   :class:`~pipeline.core.model.ExpiringPut`): an integer of milliseconds ``1..2**63 - 1``; absent or
   null, no TTL; anything else ``bad_type``.

   A rowkey field that is null (JSON null, SQL NULL; not an absent field, which is ``missing_field``)
   is a NULL key, which follows the route's ``null_key`` rule: ``skip`` (a Debezium route's default)
   addresses no row -- no put, no delete; an update from a value to NULL deletes the old row, from
   NULL to a value writes the new one only -- and ``dead_letter`` (any other route's default) refuses
   the route with reason ``null_key``.

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

Outcomes are per route: a route that refuses the record (its :class:`~pipeline.errors.EventError`)
is a :class:`Refusal` naming it, and the record's other routes still give their mutations. A record
that cannot be decoded at all (``undecodable``, ``not_an_object``) is one refusal of no route. A
topic with ``on_route_error = "dead_letter_record"`` is all-or-nothing: any refusal makes the
record's outcome that one refusal, of no route, and no mutation; so does a record that every route
of its topic refuses with nothing written (one dead letter, which a re-drive sends to every route).

A topic with ``redrive_of`` holds dead letters (:mod:`pipeline.core.records.deadletters`): a record whose
``hbase-ingest.route`` header names one of the topic's routes, or names none and came from the
``redrive_of`` topic, is routed as the record it was -- ``$topic``, ``$partition``, ``$offset`` and
``$timestamp`` are its source's, ``$header`` its own headers without ours -- and any other record
(another route's, another topic's, or a mutation HBase refused: ``hbase_rejected``) gives nothing.

Cell timestamps are ``0 <= ts <= 2**63 - 1`` (HBase's signed 64-bit cells); any other is ``bad_type``,
so nothing the wire encoder refuses leaves routing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from pipeline.core.model import ExpiringPut, Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.records.deadletters import dead_letter_source, own_headers
from pipeline.core.records.decode import KEY_DECODERS, VALUE_DECODERS, Decoder
from pipeline.core.records.schemas import SCHEMA_TYPES, SchemaCache, registry_decoder
from pipeline.core.records.shapes import Shape
from pipeline.core.records.wire import HEADER_BYTES
from pipeline.core.routes.encodings import ENCODINGS, LONG_MAX, LONG_MIN, encode_long, text
from pipeline.core.routes.fields import MISSING, encoder, getter
from pipeline.errors import ConfigError, EventError
from pipeline.rowkey import EventFieldError, RowKey
from pipeline.settings import DynamicColumnsSpec, RouteSpec, TopicSpec
from pipeline.settings_specs import WHOLE_VALUE

__all__ = [
    "SNAPSHOT_TS",
    "MetaRecord",
    "Outcome",
    "PartlyRefused",
    "Refusal",
    "RouteReference",
    "TopicReference",
    "check_timestamp",
]

_UPSERT_OPS = frozenset(("c", "r", "u"))
#: the cell timestamp of a Debezium snapshot read when the route stamps ``$source.lsn`` (contract, step 4)
SNAPSHOT_TS = 0
_LSN = "$source.lsn"


class MetaRecord(Protocol):
    """What routing reads of a consumed record."""

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


class Refusal(NamedTuple):
    """Why one route (``route``; None: the record as a whole) cannot take a record."""

    route: str | None
    error: EventError


class Outcome(NamedTuple):
    """One record's mutations on every route that took it, in route order, and the refusals of the
    others (module docstring)."""

    mutations: list[Mutation]
    refusals: list[Refusal]


class PartlyRefused(EventError):
    """A route's refusal that still gives some mutations: an update whose new row the route cannot
    build deletes the old one all the same (an index row must not outlive its value)."""

    def __init__(self, reason: str, message: str, mutations: list[Mutation]) -> None:
        super().__init__(reason, message)
        self.mutations = mutations


class _Column:
    __slots__ = ("encode", "field", "get", "name", "null", "required")

    def __init__(self, name: bytes, field: str, get: Callable[[Mapping[str, Any]], Any],
                 encode: Callable[[Any], bytes], required: bool, null: str) -> None:
        self.name, self.field, self.get, self.encode = name, field, get, encode
        self.required, self.null = required, null


#: the encoders of dynamic columns' cells (their errors name the column: :meth:`_Dynamic.cells`)
_ENCODE = {name: e.encoder("") for name, e in ENCODINGS.items()}
_COLUMNS_KEPT = 4096
_BY_VALUE = {str: "text", bool: "text", float: "text", int: "long", bytes: "bytes", Decimal: "decimal"}


class _Dynamic:
    """One ``family:PREFIX*`` of a route (module docstring, step 3)."""

    __slots__ = ("_columns", "encoding", "exclude", "flatten", "get", "label", "named", "null", "path", "prefix", "sep",
                 "whole")

    def __init__(self, column: str, spec: DynamicColumnsSpec, named: frozenset[bytes], debezium: bool) -> None:
        self.label = column
        self.prefix = column[:-1].encode()
        self.whole = spec.field == WHOLE_VALUE
        self.path = () if self.whole else tuple(spec.field.split("."))
        self.get = None if self.whole else getter(spec.field)
        self.exclude = frozenset(spec.exclude)
        self.flatten = spec.nested == "flatten"
        self.sep = spec.separator
        self.encoding = None if spec.encoding == "auto" else spec.encoding
        self.null = spec.null or ("delete" if debezium else "skip")
        self.named = named
        #: flattened field name -> its column, for the names that repeat (a bounded cache: a map's keys
        #: as fields could be any number)
        self._columns: dict[str, bytes] = {}

    def shape_of(self, shape: Shape | None) -> Shape | None:
        """The part of a record's shape that types this object's fields."""
        for part in self.path:
            shape = shape.get(part) if isinstance(shape, Mapping) else None
        return shape if isinstance(shape, Mapping) else None

    def cells(self, route: str, event: Mapping[str, Any], shape: Shape | None,
              cells: dict[bytes, bytes], gone: dict[bytes, bytes], max_cell: int) -> int:
        """Add this object's cells to ``cells`` (and its null fields deleted to ``gone``); their bytes."""
        if self.get is None:
            obj: Any = event
        else:
            obj = self.get(event)
            if obj is MISSING or obj is None:
                return 0
            if not isinstance(obj, Mapping):
                raise EventError("bad_type", f"route {route!r}: dynamic columns {self.label}: field "
                                             f"{'.'.join(self.path)!r} is {type(obj).__name__}, not an object")
        return self._add(route, obj, self.shape_of(shape), "", cells, gone, max_cell)

    def _add(self, route: str, obj: Mapping[str, Any], shape: Shape | None, prefix: str,
             cells: dict[bytes, bytes], gone: dict[bytes, bytes], max_cell: int) -> int:
        size = 0
        top = self.whole and not prefix
        exclude, declared, fixed, columns = self.exclude, self.named, self.encoding, self._columns
        for name, value in obj.items():
            if top and name[:1] == "$":
                continue  # record metadata, not a field of the value
            flat = prefix + name if prefix else name
            if exclude and flat in exclude:
                continue
            sub = shape.get(name) if shape is not None else None
            cls = value.__class__
            if self.flatten and (cls is dict or isinstance(value, Mapping)):
                size += self._add(route, value, sub if isinstance(sub, Mapping) else None, flat + self.sep,
                                  cells, gone, max_cell)
                continue
            column = columns.get(flat)
            if column is None:
                column = self.prefix + flat.encode()
                if len(columns) < _COLUMNS_KEPT:
                    columns[flat] = column
            if declared and column in declared:
                continue
            if value is None:
                if self.null == "skip":
                    continue
                if self.null == "delete":
                    gone[column] = b""
                    continue
                raw = b""
            elif cls is str and fixed is None and (sub is None or sub == "text"):
                raw = value.encode()  # the common case of text(), without its dispatch
            else:
                encoding = fixed or (sub if sub.__class__ is str else None) or _BY_VALUE.get(cls, "json")
                try:
                    raw = _ENCODE[encoding](value)
                except EventError as exc:
                    raise EventError(exc.reason, f"route {route!r}: dynamic column {column.decode(errors='replace')}"
                                                 f" ({encoding}): {str(exc).removeprefix('field ' + repr('') + ': ')}"
                                     ) from exc
            n = len(raw)
            if n > max_cell:
                raise EventError("value_too_large", f"route {route!r}: column {column.decode(errors='replace')} "
                                                    f"value is {n} bytes; the cell limit is {max_cell}")
            cells[column] = raw
            size += len(column) + n + 8
        return size


def check_timestamp(route: str, field: str, ts: Any) -> int:
    """A cell timestamp read from ``field``: an integer in ``[0, 2**63 - 1]`` (HBase's cells), else
    :class:`EventError` (``missing_field`` when absent or null, ``bad_type`` otherwise)."""
    if ts is MISSING or ts is None:
        raise EventError("missing_field", f"route {route!r}: timestamp field {field!r} is missing")
    if ts.__class__ is not int or not 0 <= ts <= LONG_MAX:
        raise EventError("bad_type", f"route {route!r}: timestamp field {field!r} must be an integer from 0 to "
                                     f"2**63 - 1 (epoch ms), got {ts!r}")
    return ts


class RouteReference:
    """One route's reference: its mutations from an event (metadata already added), or a refusal."""

    def __init__(self, spec: RouteSpec, rowkey: RowKey, families: Sequence[str], max_key_bytes: int,
                 max_cell_bytes: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.table = spec.table
        self.rowkey = rowkey
        self.tombstones = spec.tombstones
        self.debezium = spec.envelope == "debezium"
        self.null_key = spec.null_key_rule
        default_null = "delete" if self.debezium else None
        self.columns = [
            _Column(c.encode(), cs.field, getter(cs.field), encoder(cs), cs.required,
                    cs.null or default_null or ("error" if cs.required else "skip"))
            for c, cs in spec.columns.items()]
        declared = frozenset(col.name for col in self.columns)
        self.dynamic = [_Dynamic(c, d, declared, self.debezium) for c, d in spec.dynamic_columns.items()]
        #: whether a record's writer schema types this route's cells (dynamic columns, ``encoding = "auto"``)
        self.shaped = any(d.encoding is None for d in self.dynamic)
        self.families = {f.encode(): b"" for f in families}
        self.ts_field = spec.cell_timestamp
        self._ts = getter(self.ts_field) if self.ts_field else None
        self._deleted = getter(spec.deleted_field) if spec.deleted_field else None
        self._ttl = getter(spec.ttl_field) if spec.ttl_field else None
        self.delete_kind = MutationKind.DELETE if spec.delete_versions == "all" else MutationKind.DELETE_VERSION
        self.counter = spec.counter
        c = spec.counter
        self._counter_column = c.column.encode() if c else b""
        self._counter_family = c.column.split(":", 1)[0].encode() + b":" if c else b""
        self._amount = getter(c.amount_field) if c and c.amount_field else None
        self._id = getter(c.id_field) if c and c.id_field else None
        #: the rowkey reads record metadata only: a tombstone (or a delete without a before image)
        #: still addresses a row
        self.key_only = all(f.startswith("$") for f in rowkey.fields)
        self._event_fields = [f for f in rowkey.fields if not f.startswith("$")]
        named = [*rowkey.fields, *(col.field for col in self.columns), self.ts_field or "", spec.deleted_field or "",
                 spec.ttl_field or "",
                 *((c.amount_field or "", c.id_field or "") if c else ())]
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
        return f"RouteReference({self.name!r} -> {self.table!r})"

    def row(self, event: Mapping[str, Any]) -> bytes | None:
        """The row ``event`` addresses; None for a NULL key under ``null_key = "skip"`` (module
        docstring); :class:`EventError` when the key cannot be built."""
        try:
            row = self.rowkey.build(event)
        except EventFieldError as exc:
            if exc.value is None and exc.reason == "missing_field" and getter(exc.field)(event) is None:
                if self.null_key == "skip":
                    return None
                raise EventError("null_key", f"route {self.name!r}: rowkey field {exc.field!r} is null (null_key = "
                                             "'skip' would write no row for it)") from exc
            raise EventError(exc.reason, f"route {self.name!r}: {exc}") from exc
        if len(row) > self._max_key:
            raise EventError("key_too_long", f"route {self.name!r}: rowkey is {len(row)} bytes; "
                                             f"HBase allows at most {self._max_key}")
        return row

    def timestamp(self, event: Mapping[str, Any]) -> int | None:
        if self._ts is None:
            return None
        return check_timestamp(self.name, self.ts_field or "", self._ts(event))

    def deleted(self, event: Mapping[str, Any]) -> bool:
        """Whether the event's ``deleted_field`` marks a delete."""
        if self._deleted is None:
            return False
        flag = self._deleted(event)
        return flag is True or flag == "true"

    def apply(self, event: Mapping[str, Any], origin: Origin, shape: Shape | None = None) -> list[Mutation]:
        """The mutations of an event that is not a Debezium change (metadata already added): a delete
        (``deleted_field``), a counter's increment or tally, or a put. ``shape``: the record's writer
        schema's (dynamic columns)."""
        if self.deleted(event):
            gone = self.delete(event, origin)
            return [] if gone is None else [gone]
        if self.counter is not None:
            return self._counted(event, origin)
        return self.upsert(event, origin, None, shape)

    def upsert(self, event: Mapping[str, Any], origin: Origin, ts: int | None = None,
               shape: Shape | None = None) -> list[Mutation]:
        """The put of ``event`` (and the delete of its null columns whose rule is ``delete``), at ``ts`` or the
        event's timestamp; nothing for a NULL key that is skipped. ``shape`` types dynamic columns."""
        row = self.row(event)
        if row is None:
            return []
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
        for dyn in self.dynamic:
            size += dyn.cells(self.name, event, shape, cells, gone, self._max_cell)
        out = []
        if gone:
            self._check_delete_ts(ts)
            out.append(Mutation(self.table, row, self.delete_kind, gone, ts, origin, 0,
                                len(row) + 16 + sum(len(c) + 8 for c in gone)))
        if cells:
            ttl = None if self._ttl is None else self._ttl_of(event)
            out.append(Mutation(self.table, row, MutationKind.PUT, cells, ts, origin, 0, size) if ttl is None
                       else ExpiringPut(self.table, row, cells, ts, origin, size, ttl))
        return out

    def _ttl_of(self, event: Mapping[str, Any]) -> int | None:
        """The put's cell TTL from ``ttl_field`` (module docstring, step 3)."""
        assert self._ttl is not None
        ttl = self._ttl(event)
        if ttl is MISSING or ttl is None:
            return None
        if ttl.__class__ is not int or not 1 <= ttl <= LONG_MAX:
            raise EventError("bad_type", f"route {self.name!r}: ttl field {self.spec.ttl_field!r} must be an integer "
                                         f"number of milliseconds from 1 to 2**63 - 1, got {ttl!r}")
        return int(ttl)

    def _counted(self, event: Mapping[str, Any], origin: Origin) -> list[Mutation]:
        """A counter route's increment, or its tally cell (:class:`~pipeline.settings.CounterSpec`)."""
        c = self.counter
        assert c is not None
        row = self.row(event)
        if row is None:
            return []
        ts = self.timestamp(event)
        amount: Any = c.amount
        if self._amount is not None:
            amount = self._amount(event)
            if amount.__class__ is not int:
                shown = "nothing" if amount is MISSING else repr(amount)
                raise EventError("bad_type", f"route {self.name!r}: counter amount field {c.amount_field!r} "
                                             f"must be an integer, got {shown}")
            if not LONG_MIN <= amount <= LONG_MAX:
                raise EventError("out_of_range", f"route {self.name!r}: counter amount field {c.amount_field!r}: "
                                                 f"{amount} does not fit in 8 bytes")
        if c.mode == "increment":
            return [Mutation(self.table, row, MutationKind.INCREMENT, {self._counter_column: b""}, None, origin,
                             amount=amount)]
        if self._id is not None:
            ident = self._id(event)
            if ident is MISSING or ident is None:
                raise EventError("missing_field", f"route {self.name!r}: counter id field {c.id_field!r} is missing")
            ident_b = text(ident)
        else:
            ident_b = f"{origin.tp.topic}/{origin.tp.partition}/{origin.offset}".encode()
        return [Mutation(self.table, row, MutationKind.PUT, {self._counter_family + ident_b: encode_long(amount)},
                         ts, origin)]

    def delete(self, event: Mapping[str, Any], origin: Origin, ts: int | None = None) -> Mutation | None:
        """The delete of the row ``event`` addresses (the route's families), at ``ts`` or the event's
        timestamp; None for a NULL key that is skipped (no row to delete)."""
        row = self.row(event)
        if row is None:
            return None
        return self._delete_row(row, event, origin, ts)

    def _delete_row(self, row: bytes, event: Mapping[str, Any], origin: Origin, ts: int | None) -> Mutation:
        if ts is None:
            ts = self.timestamp(event)
        self._check_delete_ts(ts)
        return Mutation(self.table, row, self.delete_kind, self.families, ts, origin, 0,
                        len(row) + 16 + sum(len(f) + 8 for f in self.families))

    def _check_delete_ts(self, ts: int | None) -> None:
        if ts is None and self.delete_kind is MutationKind.DELETE_VERSION:
            raise EventError("missing_field", f"route {self.name!r}: delete_versions = 'latest' needs a timestamp")

    def debezium_change(self, op: Any, after: Any, before: Any, meta: dict[str, Any], origin: Origin,
                        shape: Shape | None = None) -> list[Mutation]:
        """The mutations of one Debezium change (module docstring, step 3); ``shape``: the envelope's
        writer schema's (its ``after`` types dynamic columns)."""
        if op in _UPSERT_OPS:
            if not isinstance(after, dict):
                raise EventError("missing_field", f"route {self.name!r}: a change with op {op!r} has no 'after' row")
            new = after | meta
            moved: list[Mutation] = []
            if op == "u":
                if isinstance(before, dict):
                    old_row = self._old_row(before | meta, op)
                    new_row = self._row_or_none(new)
                    if old_row is not None and old_row != new_row:
                        moved.append(self._delete_row(old_row, new, origin, self.timestamp(new)))
                elif not self._keyed(meta):
                    raise self._no_before(op)
            try:
                row_shape = shape.get("after") if shape is not None else None
                return moved + self.upsert(new, origin, SNAPSHOT_TS if op == "r" and self.ts_field == _LSN else None,
                                           row_shape if isinstance(row_shape, Mapping) else None)
            except EventError as exc:
                if moved:  # the old row is gone whatever the new one is: its delete stands
                    raise PartlyRefused(exc.reason, str(exc), moved) from exc
                raise
        if op == "d":
            if isinstance(before, dict):
                old = before | meta
                old_row = self._old_row(old, op)
                return [] if old_row is None else [self._delete_row(old_row, old, origin, None)]
            if self.key_only:
                gone = self.delete(meta, origin)
            elif self._keyed(meta):
                gone = self.delete(meta["$key"] | meta, origin)
            else:
                raise self._no_before(op)
            return [] if gone is None else [gone]
        raise EventError("unsupported_op", f"route {self.name!r}: Debezium op {op!r} is not applied (c, r, u, d are)")

    def _keyed(self, meta: Mapping[str, Any]) -> bool:
        """Whether every event field the rowkey reads is a field of the record's key (Debezium's key
        is the row's primary key, which an update cannot change: ``u`` never moves such a row)."""
        key = meta.get("$key")
        return isinstance(key, dict) and all(f.split(".", 1)[0] in key for f in self._event_fields)

    def _row_or_none(self, event: Mapping[str, Any]) -> bytes | None:
        """The row ``event`` addresses; None when there is none (a NULL key skipped) or it cannot be built."""
        try:
            return self.row(event)
        except EventError:
            return None

    def _old_row(self, old: Mapping[str, Any], op: str) -> bytes | None:
        """The row a ``before`` image addresses; None when there is none to delete: a NULL key skipped,
        or a key this route cannot build (a value holding the delimiter, a key too long...), whose row
        it never wrote. A rowkey field the image lacks (a table without a full replica identity sends
        only the primary key) is ``no_before_image``."""
        try:
            return self.row(old)
        except EventError as exc:
            if exc.reason == "null_key":
                raise EventError("null_key", f"{exc} (in a 'before' image, a table without a full replica identity "
                                             "sends NULL for every column outside its primary key)") from exc
            if exc.reason == "missing_field":
                raise self._no_before(op) from exc
            return None

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


class TopicReference:
    """The routes of one topic, in their reference form. ``schemas``: where a registry format's decoder
    finds writer schemas (required when the topic's value or key format is one)."""

    def __init__(self, topic: TopicSpec, routes: Sequence[RouteReference], schemas: SchemaCache | None = None) -> None:
        self.topic = topic
        self.routes = tuple(routes)
        self.whole = topic.on_route_error == "dead_letter_record"
        self._value = _decoder(topic.value_format, VALUE_DECODERS, schemas, "value")
        self._key = _decoder(topic.key_format, KEY_DECODERS, schemas, "key")
        self._reads_key = any(r.reads_key for r in routes)
        #: whether values / keys (as routes read them) are framed: their schema ids are fetched before routing
        self.framed_values = topic.value_format in SCHEMA_TYPES
        self.framed_keys = topic.key_format in SCHEMA_TYPES and self._reads_key
        self._reads_headers = any(r.reads_headers for r in routes)
        self._debezium = any(r.debezium for r in routes)
        #: a re-drive of dead letters of this source topic into these routes (module docstring)
        self.redrive_of = topic.redrive_of
        self._names = {r.name for r in routes}
        #: the compiled writer schema of a framed value, when a route's cells follow its shape
        self._schema = schemas.lookup() if schemas is not None and self.framed_values and any(
            r.shaped for r in routes) else None

    def _meta(self, tp: TopicPartition, rec: MetaRecord) -> dict[str, Any] | None:
        """The record's metadata fields; None for a dead letter a re-drive skips (module docstring)."""
        meta: dict[str, Any] = {"$timestamp": rec.timestamp, "$topic": tp.topic, "$partition": tp.partition,
                                "$offset": rec.offset}
        headers = rec.headers
        if self.redrive_of is not None:
            source = dead_letter_source(headers)
            if source is None or source.reason == "hbase_rejected" or (
                    source.route not in self._names if source.route is not None else source.topic != self.redrive_of):
                return None  # not ours to re-drive (a refused mutation's dead letter holds no record)
            meta = {"$timestamp": rec.timestamp if source.timestamp is None else source.timestamp,
                    "$topic": source.topic, "$partition": source.partition, "$offset": source.offset}
            headers = own_headers(headers)
        if self._reads_headers:  # decoded only for a topic whose routes read one
            decoded: dict[str, Any] = {}
            for name, raw in headers or ():
                try:
                    decoded[name] = raw.decode() if raw is not None else None
                except UnicodeDecodeError:
                    decoded[name] = raw
            meta["$header"] = decoded
        if self._reads_key:
            meta["$key"] = None if rec.key is None else self._key(rec.key)
        return meta

    def outcome(self, tp: TopicPartition, rec: MetaRecord) -> Outcome:
        """Every route's mutations for one record, in route order, and the refusals (module docstring)."""
        origin = Origin(tp, rec.offset)
        try:
            meta = self._meta(tp, rec)
            if meta is None:
                return Outcome([], [])
            event = None if rec.value is None else self._value(rec.value)
        except EventError as exc:
            return Outcome([], [Refusal(None, exc)])
        if rec.value is not None and not isinstance(event, dict):
            return Outcome([], [Refusal(None, EventError("not_an_object", f"value is {type(event).__name__}, "
                                                                          "expected an object"))])
        out: list[Mutation] = []
        refused: list[Refusal] = []
        shape = None
        if self._schema is not None and rec.value is not None:
            compiled = self._schema(int.from_bytes(rec.value[1:HEADER_BYTES], "big"))  # decoded: framed
            shape = compiled.shape if compiled is not None else None
        if event is not None and self._debezium:
            op, after, before = event.get("op"), event.get("after"), event.get("before")
            dbz = meta | {"$op": op, "$source": event.get("source")}
        for route in self.routes:
            try:
                if event is None:
                    out += route_tombstone(route, meta, origin)
                elif route.debezium:
                    out += route.debezium_change(op, after, before, dbz, origin, shape)
                else:
                    out += route.apply(event | meta, origin, shape)
            except PartlyRefused as exc:
                out += exc.mutations
                refused.append(Refusal(route.name, exc))
            except EventError as exc:
                refused.append(Refusal(route.name, exc))
        if refused and (self.whole or (not out and len(refused) == len(self.routes))):
            return Outcome([], [Refusal(None, refused[0].error)])
        return Outcome(out, refused)


def route_tombstone(route: RouteReference, meta: dict[str, Any], origin: Origin) -> list[Mutation]:
    """One route's mutations for a record with no value: its ``on_tombstone`` rule."""
    if route.tombstones == "dead_letter":
        raise EventError("tombstone", f"record has no value (tombstone); route {route.name!r} does not take "
                                      "tombstones (on_tombstone = 'skip' or 'delete' would)")
    if route.tombstones == "delete":
        gone = route.delete(meta, origin)
        return [] if gone is None else [gone]
    return []
