"""Routing: one Kafka record -> the mutations of every route its topic feeds. Compiled once from the
route specs; the per-record path is plain attribute access and prebuilt encoder closures.

Contract of :meth:`Router.route`:

- The record value must be a JSON object (parsed by orjson; integers beyond 64 bits are kept exact,
  see :func:`loads`). Anything else raises :class:`EventError` with
  reason ``undecodable`` / ``not_an_object``.
- Every route of the topic must accept the event. If any route rejects it (missing/wrong-typed field,
  value too long for its fixed width, key over ``max_key_bytes``, cell over ``max_cell_bytes``), the
  whole record is rejected and nothing is written: the caller sends it to the dead-letter topic.
- Cell timestamps come from the route's ``timestamp_field`` (epoch ms), so a replay rewrites the same
  cell versions. Without one HBase assigns server time (not replay-safe; ``explain`` warns).

Column encodings: ``text`` (UTF-8; ints/floats in decimal, booleans ``true``/``false``, other values
as JSON), ``json`` (orjson of the value), ``long`` (8-byte big-endian two's complement, as Java's
``Bytes.toBytes(long)``; also what HBase counters hold).

Counters (``RouteSpec.counter``): ``increment`` mode emits an atomic INCREMENT (re-applied on replay);
``tally`` mode emits a PUT of one cell per event identity (``id_field`` or ``topic/partition/offset``)
holding the 8-byte amount: a replay rewrites the same cell, and the count is the sum of the row's cells.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline import compiled
from pipeline.core.changes import ChangeRoute, ChangeTopic, MetaRecord, build_row
from pipeline.core.decode import dumps, loads
from pipeline.core.encodings import ENCODINGS
from pipeline.core.fields import MISSING as _MISSING
from pipeline.core.fields import encode_long, encoder, getter, text
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.putgen import MutationFn, generate_put
from pipeline.core.schemas import SCHEMA_TYPES, SchemaCache, registry_decoder
from pipeline.errors import ConfigError, EventError
from pipeline.rowkey import RowKey, RowKeyError, compile_rowkey
from pipeline.rowkey.segments_dist import KeySalt, Salt
from pipeline.rowkey.segments_num import ReverseTs
from pipeline.rowkey.segments_text import Literal, Text
from pipeline.settings import RouteSpec, TopicSpec
from pipeline.settings_specs import DEBEZIUM_FIELDS, METADATA_FIELDS, metadata_root

#: the compiled plain-topic loop (:mod:`pipeline.compiled`), or None: :func:`_route_plain` runs
_ROUTERUN = compiled.load("pipeline.core._routerun", Path(__file__).with_name("_routerun.c"))

__all__ = ["CompiledRoute", "Record", "RoutedRun", "Router", "compile_route", "decode_value", "dumps", "encode_long",
           "encoder", "getter", "loads", "text"]



def decode_value(encoding: str, raw: bytes) -> Any:
    """A cell's value from its bytes (:data:`~pipeline.core.encodings.ENCODINGS`; ``ValueError`` for
    bytes the encoding cannot have written)."""
    return ENCODINGS[encoding].decode(raw)


@dataclass(frozen=True)
class _Column:
    name: bytes
    field: str
    get: Callable[[Mapping[str, Any]], Any]
    encode: Callable[[Any], bytes]
    required: bool


class CompiledRoute:
    """One route, compiled: its rowkey, column getters/encoders, timestamp and counter rules."""

    def __init__(self, spec: RouteSpec, max_key_bytes: int, max_cell_bytes: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.table = spec.table
        try:
            self.rowkey: RowKey = compile_rowkey(spec.rowkey)
        except RowKeyError as exc:
            raise ConfigError(f"route {spec.name!r}: rowkey {spec.rowkey!r} is invalid: {exc}") from exc
        allowed = METADATA_FIELDS + (DEBEZIUM_FIELDS if spec.envelope == "debezium" else ())
        for field in self.rowkey.fields:
            root = metadata_root(field)
            if root is not None and root not in allowed:
                raise ConfigError(f"route {spec.name!r}: rowkey field {field!r} names no record metadata; a field "
                                  f"starting with '$' is one of {', '.join(allowed)}")
        self.columns = [_Column(c.encode(), cs.field, getter(cs.field), encoder(cs), cs.required)
                        for c, cs in spec.columns.items()]
        self.families = sorted(spec.families)
        self._ts = getter(spec.timestamp_field) if spec.timestamp_field else None
        self._max_key = max_key_bytes
        self._max_cell = max_cell_bytes
        c = spec.counter
        self._counter_column = c.column.encode() if c else b""
        self._counter_family = c.column.split(":", 1)[0].encode() + b":" if c else b""
        self._amount = getter(c.amount_field) if c and c.amount_field else None
        self._id = getter(c.id_field) if c and c.id_field else None
        #: ``mutation(event, origin)``: the route's mutation for one event, or :class:`EventError`.
        #: A put route's is generated (:mod:`pipeline.core.putgen`) and returns what
        #: :meth:`mutation_reference` returns; a counter route's is the reference itself.
        self.mutation: MutationFn = self.mutation_reference if c is not None or spec.changelog else generate_put(
            route=spec.name, table=spec.table, build=self.rowkey.builder, columns=spec.columns,
            timestamp_field=spec.timestamp_field, max_key_bytes=max_key_bytes, max_cell_bytes=max_cell_bytes,
            slow=self.mutation_reference)
        #: the general path's form of the route (metadata fields, deletes, null rules): None for a
        #: plain route, which the generated :attr:`mutation` serves
        self.change: ChangeRoute | None = ChangeRoute(spec, self.rowkey, self.families, max_key_bytes,
                                                      max_cell_bytes) if spec.changelog else None

    def __repr__(self) -> str:
        return f"CompiledRoute({self.name!r} -> {self.table!r}, {self.spec.rowkey!r})"

    def _timestamp(self, event: Mapping[str, Any]) -> int | None:
        if self._ts is None:
            return None
        ts = self._ts(event)
        if ts is _MISSING or ts is None:
            raise EventError("missing_field", f"route {self.name!r}: timestamp field "
                                              f"{self.spec.timestamp_field!r} is missing")
        if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
            raise EventError("bad_type", f"route {self.name!r}: timestamp field {self.spec.timestamp_field!r} "
                                         f"must be a non-negative integer (epoch ms), got {ts!r}")
        return ts

    def mutation_reference(self, event: Mapping[str, Any], origin: Origin) -> Mutation:
        """The route's mutation for one event, step by step: the reference the generated
        :attr:`mutation` matches, and the path that diagnoses a refused event (:class:`EventError`
        with its reason and a message naming the route and what is wrong)."""
        row = build_row(self.rowkey, event, self.name, self._max_key)
        ts = self._timestamp(event)
        if self.spec.counter is not None:
            return self._counter(event, origin, row, ts)
        cells: dict[bytes, bytes] = {}
        size = len(row) + 16
        max_cell = self._max_cell
        for col in self.columns:
            value = col.get(event)
            if value is _MISSING or value is None:
                if col.required:
                    raise EventError("missing_field", f"route {self.name!r}: field {col.field!r} "
                                                      f"(column {col.name.decode()}) is missing")
                continue
            raw = col.encode(value)
            if len(raw) > max_cell:
                raise EventError("value_too_large", f"route {self.name!r}: column {col.name.decode()} value is "
                                                    f"{len(raw)} bytes; the cell limit is {max_cell}")
            cells[col.name] = raw
            size += len(col.name) + len(raw) + 8
        return Mutation(self.table, row, MutationKind.PUT, cells, ts, origin, 0, size)

    def _counter(self, event: Mapping[str, Any], origin: Origin, row: bytes, ts: int | None) -> Mutation:
        c = self.spec.counter
        assert c is not None
        amount: Any = c.amount
        if self._amount is not None:
            amount = self._amount(event)
            if amount is _MISSING or not isinstance(amount, int) or isinstance(amount, bool):
                shown = "nothing" if amount is _MISSING else repr(amount)
                raise EventError("bad_type", f"route {self.name!r}: counter amount field {c.amount_field!r} "
                                             f"must be an integer, got {shown}")
        if c.mode == "increment":
            return Mutation(self.table, row, MutationKind.INCREMENT, {self._counter_column: b""}, None, origin,
                            amount=amount)
        ident: Any
        if self._id is not None:
            ident = self._id(event)
            if ident is _MISSING or ident is None:
                raise EventError("missing_field", f"route {self.name!r}: counter id field {c.id_field!r} is missing")
            ident_b = text(ident)
        else:
            ident_b = f"{origin.tp.topic}/{origin.tp.partition}/{origin.offset}".encode()
        return Mutation(self.table, row, MutationKind.PUT, {self._counter_family + ident_b: encode_long(amount)},
                        ts, origin)


_MAX_KEY_BYTES = 32767
_MAX_CELL_BYTES = 10 * 1024 * 1024


def compile_route(spec: RouteSpec, max_key_bytes: int = _MAX_KEY_BYTES,
                  max_cell_bytes: int = _MAX_CELL_BYTES) -> CompiledRoute:
    """The one compiled form of a route, shared by the writer (:class:`Router`), the reader, table
    creation and the keyspace analysis: a route's rowkey spec is compiled here and nowhere else.
    Cached per route spec and bounds (the 256 most recently used). Raises
    :class:`~pipeline.errors.ConfigError` naming the route when its rowkey is invalid."""
    return _compiled(spec.model_dump_json(), max_key_bytes, max_cell_bytes)


@functools.lru_cache(maxsize=256)
def _compiled(spec_json: str, max_key_bytes: int, max_cell_bytes: int) -> CompiledRoute:
    return CompiledRoute(RouteSpec.model_validate_json(spec_json), max_key_bytes, max_cell_bytes)


class Router:
    """All routes, grouped by topic. A topic whose routes are all plain (no record metadata, no
    deletes, no null rules) and whose values are JSON, or in a registry format (decoded first), is
    routed by the generated put builders, one mutation per route and record; any other topic by the
    general path (:mod:`pipeline.core.changes`),
    any number per route and record. ``topics``: the ``[[topics]]`` entries (a topic not in it is
    JSON with text keys)."""

    def __init__(self, routes: Iterable[RouteSpec], max_key_bytes: int = _MAX_KEY_BYTES,
                 max_cell_bytes: int = _MAX_CELL_BYTES, topics: Iterable[TopicSpec] = (),
                 schema_cache_size: int = 1000) -> None:
        self.routes = [compile_route(r, max_key_bytes, max_cell_bytes) for r in routes]
        if not self.routes:
            raise ConfigError("the configuration declares no routes")
        self.by_topic: dict[str, list[CompiledRoute]] = {}
        for r in self.routes:
            self.by_topic.setdefault(r.spec.topic, []).append(r)
        self._builders = {topic: tuple(r.mutation for r in routes) for topic, routes in self.by_topic.items()}
        #: per topic, what the compiled loop runs for each route: its plan, or its mutation
        self._plans = {topic: tuple(_plan(r) or r.mutation for r in routes) for topic, routes in self.by_topic.items()}
        self._env = (orjson.loads, self._route_one, EventError, Origin, Mutation, MutationKind.PUT)
        specs = {t.name: t for t in topics}
        #: writer schemas of the topics in a registry format (the runtime fills it before routing: :meth:`framed`)
        self.schemas = SchemaCache(schema_cache_size)
        self.general: dict[str, ChangeTopic] = {}
        #: plain topics in a registry format: their values' decoder (then the generated put builders)
        self._decoders: dict[str, tuple[Callable[[bytes], Any], str]] = {}
        for topic, rs in self.by_topic.items():
            spec = specs.get(topic) or TopicSpec(name=topic)
            if spec.value_format in SCHEMA_TYPES and not any(r.change for r in rs):
                self._decoders[topic] = (registry_decoder(spec.value_format, self.schemas, "value"), rs[0].name)
            elif spec.value_format != "json" or spec.key_format != "text" or any(r.change for r in rs):
                self.general[topic] = ChangeTopic(spec, [r.change or _as_change(r, max_key_bytes, max_cell_bytes)
                                                         for r in rs], self.schemas)

    def framed(self, topic: str) -> tuple[bool, bool]:
        """Whether ``topic``'s values, and its keys as its routes read them, are in the Confluent wire
        format: the schema ids they name must be in :attr:`schemas` before :meth:`route_run`."""
        general = self.general.get(topic)
        if general is not None:
            return general.framed_values, general.framed_keys
        return topic in self._decoders, False

    def __repr__(self) -> str:
        return f"Router({len(self.routes)} routes over topics {sorted(self.by_topic)})"

    @property
    def topics(self) -> list[str]:
        return sorted(self.by_topic)

    @property
    def tables(self) -> list[str]:
        return sorted({r.table for r in self.routes})

    def route(self, topic: str, value: bytes | None, origin: Origin) -> list[Mutation]:
        """The mutations for one record of a plain topic; raises :class:`EventError` when the record
        cannot be written. A topic on the general path needs the whole record (key, headers,
        timestamp): :meth:`route_run`; here it is a ``ValueError``."""
        if topic in self.general:
            raise ValueError(f"topic {topic!r} is routed by the general path (record metadata, deletes or its "
                             "format): route whole records with route_run")
        event = _event(value)
        builders = self._builders.get(topic, ())
        if len(builders) == 1:
            return [builders[0](event, origin)]
        return [build(event, origin) for build in builders]

    def route_run(self, tp: TopicPartition, records: Sequence[Record], start: int, stop: int) -> RoutedRun:
        """Route ``records[start:stop]`` (records of ``tp``, in offset order) up to the first one that
        cannot be written: what :meth:`route` does for each in turn, in one call.

        The result's ``mutations`` are those of ``records[start:result.stop]``, in record order and,
        per record, in route order (a record is routed whole or not at all): exactly one per route of
        the topic when ``result.counts`` is None (a plain topic), else ``counts[j]`` for record
        ``start + j`` (the general path). When ``result.stop < stop``, ``records[result.stop]`` was
        refused and ``result.error`` says why; nothing of it is in ``mutations``.
        """
        general = self.general.get(tp.topic)
        if general is not None:
            return _route_general(general, tp, records, start, stop)
        builders = self._builders.get(tp.topic, ())
        decoded = self._decoders.get(tp.topic)
        if decoded is not None:
            return _route_decoded(*decoded, builders, tp, records, start, stop)
        if _ROUTERUN is not None:
            got, mutations, error = _ROUTERUN.route_run(records, start, stop, tp, self._plans.get(tp.topic, ()),
                                                        self._env)
            return RoutedRun(got, mutations, error)
        return _route_plain(builders, tp, records, start, stop)

    def _route_one(self, rec: Record, tp: TopicPartition) -> list[Mutation]:
        """One record of a plain JSON topic, as :func:`_route_plain` routes it (the compiled loop's
        path for any record it does not parse itself); :class:`EventError` when it is refused."""
        event = _plain_event(rec.value)
        origin = Origin(tp, rec.offset)
        return [build(event, origin) for build in self._builders.get(tp.topic, ())]


def _plan(route: CompiledRoute) -> tuple[Any, ...] | None:
    """A put route's plan for the compiled loop (:mod:`pipeline.core._routerun`: the route's mutation,
    key builder, table, timestamp path, columns as ``(name, path, required)``, key and cell limits),
    when all its columns are ``text``; None for any other route (the loop calls its mutation)."""
    spec = route.spec
    if spec.counter is not None or spec.changelog or any(c.encoding != "text" for c in spec.columns.values()):
        return None
    ts = tuple(spec.timestamp_field.split(".")) if spec.timestamp_field else None
    columns = tuple((name.encode(), tuple(c.field.split(".")), c.required) for name, c in spec.columns.items())
    key = _key_plan(route.rowkey) or route.rowkey.builder
    return (route.mutation, key, route.table, ts, columns, route._max_key, route._max_cell)


def _key_plan(rowkey: RowKey) -> tuple[tuple[Any, ...], ...] | None:
    """The ops by which the compiled loop builds ``rowkey`` (its ``planned_key``), when every segment is
    text (with the delimiter guard of the layout), a literal, a murmur3 salt over fields, a reverse
    timestamp, or a leading murmur3 salt of the rest of the key; None for any other key (the loop
    calls the key's generated builder). Each op gives the bytes the generated builder's code for that
    segment gives (:mod:`pipeline.rowkey.generate`)."""
    ops: list[tuple[Any, ...]] = []
    for i, seg in enumerate(rowkey.segments):
        kind, term = type(seg), rowkey.layout.terminator[i]
        if term is not None and kind is not Text:
            return None
        if kind is KeySalt and i == 0 and seg.hash == "murmur3":  # type: ignore[attr-defined]
            ops.append((4, seg.buckets))  # type: ignore[attr-defined]
        elif kind is Text:
            ops.append((0, seg.paths[0], term))
        elif kind is Literal:
            ops.append((1, seg.data))  # type: ignore[attr-defined]
        elif kind is Salt and seg.hash == "murmur3":  # type: ignore[attr-defined]
            ops.append((2, seg.paths, seg.buckets))  # type: ignore[attr-defined]
        elif kind is ReverseTs:
            ops.append((3, seg.paths[0], seg.text))  # type: ignore[attr-defined]
        else:
            return None
    return tuple(ops)


def _route_plain(builders: tuple[MutationFn, ...], tp: TopicPartition, records: Sequence[Record], start: int,
                 stop: int) -> RoutedRun:
    """:meth:`Router.route_run` on a plain JSON topic, in Python: the reference of the compiled loop
    (:mod:`pipeline.core._routerun`), and the path when it is not built."""
    mutations: list[Mutation] = []
    append, extend = mutations.append, mutations.extend
    single = builders[0] if len(builders) == 1 else None
    for i in range(start, stop):
        rec = records[i]
        try:
            event = _plain_event(rec.value)
        except EventError as exc:
            return RoutedRun(i, mutations, exc)
        origin = Origin(tp, rec.offset)
        try:
            if single is not None:
                append(single(event, origin))
            else:
                extend([build(event, origin) for build in builders])
        except EventError as exc:
            return RoutedRun(i, mutations, exc)
    return RoutedRun(stop, mutations, None)


Record = MetaRecord  # what Router.route_run reads of a consumed record (the plain path: offset, value)


@dataclass(frozen=True, slots=True)
class RoutedRun:
    """What :meth:`Router.route_run` routed: ``records[start:stop]`` gave ``mutations``; ``error`` is
    why ``records[stop]`` was refused (None when the run reached the end it was given); ``counts``:
    the mutations of each record routed, when they are not one per route (the general path)."""

    stop: int
    mutations: list[Mutation]
    error: EventError | None
    counts: list[int] | None = None


def _route_general(topic: ChangeTopic, tp: TopicPartition, records: Sequence[Record], start: int,
                   stop: int) -> RoutedRun:
    mutations: list[Mutation] = []
    counts: list[int] = []
    for i in range(start, stop):
        try:
            got = topic.mutations(tp, records[i])
        except EventError as exc:
            return RoutedRun(i, mutations, exc, counts)
        mutations += got
        counts.append(len(got))
    return RoutedRun(stop, mutations, None, counts)


def _route_decoded(decode: Callable[[bytes], Any], first_route: str, builders: Sequence[MutationFn],
                   tp: TopicPartition, records: Sequence[Record], start: int, stop: int) -> RoutedRun:
    """The plain path of a topic in a registry format: each value decoded by ``decode``, then the
    generated put builders; the same mutations and refusals as the general path would give for these
    routes (``first_route`` names the route a tombstone is refused by, as there)."""
    mutations: list[Mutation] = []
    for i in range(start, stop):
        rec = records[i]
        try:
            event = _decoded(decode, rec.value, first_route)
            origin = Origin(tp, rec.offset)
            mutations += [build(event, origin) for build in builders]
        except EventError as exc:
            return RoutedRun(i, mutations, exc)
    return RoutedRun(stop, mutations, None)


def _decoded(decode: Callable[[bytes], Any], value: bytes | None, first_route: str) -> dict[str, Any]:
    if value is None:
        raise EventError("tombstone", f"record has no value (tombstone); route {first_route!r} does not take "
                                      "tombstones (on_tombstone = 'skip' or 'delete' would)")
    event = decode(value)
    if event.__class__ is not dict:
        raise EventError("not_an_object", f"value is {type(event).__name__}, expected an object")
    return event


def _as_change(route: CompiledRoute, max_key_bytes: int, max_cell_bytes: int) -> ChangeRoute:
    """A plain route sharing a topic with general ones, in its general form (the same puts)."""
    return ChangeRoute(route.spec, route.rowkey, route.families, max_key_bytes, max_cell_bytes)


def _plain_event(value: bytes | None) -> dict[str, Any]:
    """A plain topic's record value as its event: :func:`loads`, and :func:`_event`'s diagnosis
    (:class:`EventError`) when that does not give an object."""
    try:
        event = loads(value)  # type: ignore[arg-type]  # None: TypeError, diagnosed by _event
    except (orjson.JSONDecodeError, TypeError):
        event = None
    if event.__class__ is not dict:
        event = _event(value)
    return event  # type: ignore[no-any-return]


def _event(value: bytes | None) -> dict[str, Any]:
    """A record value as a JSON object (:func:`loads`); :class:`EventError` (``undecodable``,
    ``not_an_object``) when it is none."""
    if value is None:
        raise EventError("undecodable", "record has no value (tombstone)")
    try:
        event = loads(value)
    except orjson.JSONDecodeError as exc:
        raise EventError("undecodable", f"value is not valid JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise EventError("not_an_object", f"value is JSON {type(event).__name__}, expected an object")
    return event
