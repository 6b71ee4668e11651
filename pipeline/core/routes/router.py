"""Routing: Kafka records -> the mutations of every route their topic feeds, by the semantics of one
reference, :meth:`pipeline.core.routes.reference.TopicReference.outcome` (one decode step for every topic:
Connect envelopes, tombstones, not-an-object; per-route outcomes; timestamps, null and NULL-key
rules, deletes, counters). Its module docstring is the contract.

The fast forms here are derived from the route specs, and each takes only what it can prove equal
to the reference, handing anything else to it:

- per route, :attr:`CompiledRoute.mutation`: a plain put route's generated builder
  (:mod:`pipeline.core.routes.putgen`), a plain counter route's single mutation of the reference; either
  gives the reference's one mutation for an event, or None;
- per plain JSON topic, the compiled loop (:mod:`pipeline.core.routes._routerun`, with the plans of
  :func:`_plan` for routes whose columns are text) or its pure-Python form :func:`_route_plain`;
  per plain topic in a registry format, :func:`_route_decoded`; per other topic, :func:`_route_general`
  (the reference itself, record by record).

:meth:`Router.route_run` routes a run of records up to the first one that a fast form does not take
(every route giving exactly its one mutation, or, on the general path, no route refusing);
:meth:`Router.route_record` gives that record's outcome by the reference. A data value never raises
out of either: a refusal is an outcome (:class:`~pipeline.core.routes.reference.Refusal`), and a raised
exception is a bug.

Column encodings: :mod:`pipeline.core.routes.encodings`. Counters (``RouteSpec.counter``): ``increment``
mode emits an atomic INCREMENT (re-applied on replay); ``tally`` mode emits a PUT of one cell per
event identity (``id_field`` or ``topic/partition/offset``) holding the 8-byte amount: a replay
rewrites the same cell, and the count is the sum of the row's cells.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipeline import compiled
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.records.decode import dumps, json_value, loads
from pipeline.core.records.schemas import SCHEMA_TYPES, SchemaCache, registry_decoder
from pipeline.core.routes.encodings import ENCODINGS
from pipeline.core.routes.fields import encode_long, encoder, getter, text
from pipeline.core.routes.putgen import MutationFn, generate_put
from pipeline.core.routes.reference import MetaRecord, Outcome, Refusal, RouteReference, TopicReference
from pipeline.errors import ConfigError, EventError
from pipeline.rowkey import RowKey, RowKeyError, compile_rowkey
from pipeline.settings import RouteSpec, TopicSpec
from pipeline.settings_specs import DEBEZIUM_FIELDS, METADATA_FIELDS, metadata_root

#: the compiled plain-topic loop (:mod:`pipeline.compiled`), or None: :func:`_route_plain` runs
_ROUTERUN = compiled.load("pipeline.core.routes._routerun", Path(__file__).with_name("_routerun.c"))

__all__ = ["CompiledRoute", "Outcome", "Record", "Refusal", "RoutedRun", "Router", "compile_route", "decode_value",
           "dumps", "encode_long", "encoder", "getter", "loads", "text"]


def decode_value(encoding: str, raw: bytes) -> Any:
    """A cell's value from its bytes (:data:`~pipeline.core.routes.encodings.ENCODINGS`; ``ValueError`` for
    bytes the encoding cannot have written)."""
    return ENCODINGS[encoding].decode(raw)


class CompiledRoute:
    """One route, compiled: its rowkey, its reference (:attr:`reference`) and its fast form
    (:attr:`mutation`)."""

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
        self.families = sorted(spec.families)
        self.max_key_bytes = max_key_bytes
        self.max_cell_bytes = max_cell_bytes
        #: the route's semantics: every other form gives what this gives
        self.reference = RouteReference(spec, self.rowkey, self.families, max_key_bytes, max_cell_bytes)
        #: ``mutation(event, origin)``: the route's one mutation for a plain topic's event, or None when
        #: the reference must decide (module docstring); for a route on the general path, unused
        self.mutation: MutationFn = _single(self.reference) if (
                spec.counter is not None or spec.changelog or spec.dynamic_columns or spec.ttl_field) else (
            generate_put(route=spec.name, table=spec.table, build=self.rowkey.builder, columns=spec.columns,
                         timestamp_field=spec.timestamp_field, max_key_bytes=max_key_bytes,
                         max_cell_bytes=max_cell_bytes))

    def __repr__(self) -> str:
        return f"CompiledRoute({self.name!r} -> {self.table!r}, {self.spec.rowkey!r})"


def _single(reference: RouteReference) -> MutationFn:
    """A fast form that is the reference itself: its mutation when it gives exactly one, else None."""
    apply = reference.apply

    def mutation(event: Mapping[str, Any], origin: Origin) -> Mutation | None:
        try:
            got = apply(event, origin)
        except EventError:
            return None
        return got[0] if len(got) == 1 else None
    return mutation


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
    """All routes, grouped by topic (module docstring). A topic whose routes are all plain (no record
    metadata, no deletes, no null rules) and whose values are JSON, or in a registry format, is routed
    by the fast forms; any other topic (and a re-drive of dead letters) by the reference, record by
    record. ``topics``: the ``[[topics]]`` entries (a topic not in it is JSON with text keys)."""

    def __init__(self, routes: Iterable[RouteSpec], max_key_bytes: int = _MAX_KEY_BYTES,
                 max_cell_bytes: int = _MAX_CELL_BYTES, topics: Iterable[TopicSpec] = (),
                 schema_cache_size: int = 1000) -> None:
        self.routes = [compile_route(r, max_key_bytes, max_cell_bytes) for r in routes]
        if not self.routes:
            raise ConfigError("the configuration declares no routes")
        self.by_topic: dict[str, list[CompiledRoute]] = {}
        for r in self.routes:
            self.by_topic.setdefault(r.spec.topic, []).append(r)
        self._fast = {topic: tuple(r.mutation for r in routes) for topic, routes in self.by_topic.items()}
        #: per topic, what the compiled loop runs for each route: its plan, or its fast form
        self._plans = {topic: tuple(_plan(r) or r.mutation for r in routes) for topic, routes in self.by_topic.items()}
        self._env = (orjson.loads, self._fast_record, Origin, Mutation, MutationKind.PUT)
        specs = {t.name: t for t in topics}
        #: writer schemas of the topics in a registry format (the runtime fills it before routing: :meth:`framed`)
        self.schemas = SchemaCache(schema_cache_size)
        #: every topic's routes in their reference form
        self.reference: dict[str, TopicReference] = {}
        #: the topics routed by the reference, record by record
        self.general: set[str] = set()
        #: plain topics in a registry format: their values' decoder (then the fast forms)
        self._decoders: dict[str, Callable[[bytes], Any]] = {}
        for topic, rs in self.by_topic.items():
            spec = specs.get(topic) or TopicSpec(name=topic)
            self.reference[topic] = TopicReference(spec, [r.reference for r in rs], self.schemas)
            # a route whose cells follow the writer schema's shape reads the schema id of each record
            general = (any(r.spec.changelog for r in rs) or spec.redrive_of is not None
                       or (spec.value_format in SCHEMA_TYPES and any(r.reference.shaped for r in rs)))
            if spec.value_format in SCHEMA_TYPES and not general:
                self._decoders[topic] = registry_decoder(spec.value_format, self.schemas, "value")
            elif spec.value_format != "json" or spec.key_format != "text" or general:
                self.general.add(topic)

    def framed(self, topic: str) -> tuple[bool, bool]:
        """Whether ``topic``'s values, and its keys as its routes read them, are in the Confluent wire
        format: the schema ids they name must be in :attr:`schemas` before :meth:`route_run`."""
        reference = self.reference.get(topic)
        if reference is None:
            return False, False
        return reference.framed_values, reference.framed_keys

    def __repr__(self) -> str:
        return f"Router({len(self.routes)} routes over topics {sorted(self.by_topic)})"

    @property
    def topics(self) -> list[str]:
        return sorted(self.by_topic)

    @property
    def tables(self) -> list[str]:
        return sorted({r.table for r in self.routes})

    def route(self, topic: str, value: bytes | None, origin: Origin) -> list[Mutation]:
        """The mutations of a record of ``origin.tp`` with this value (no key, headers or timestamp), as
        the worker routes it (:meth:`route_run`, else :meth:`route_record`); raises the first
        refusal's :class:`EventError` when a route refuses it. ``origin.tp`` must be of ``topic``."""
        if origin.tp.topic != topic:
            raise ValueError(f"origin {origin} is not of topic {topic!r}")
        rec = _ValueRecord(origin.offset, value)
        run = self.route_run(origin.tp, (rec,), 0, 1)
        if run.stop == 1:
            return run.mutations
        got = self.route_record(origin.tp, rec)
        if got.refusals:
            raise got.refusals[0].error
        return got.mutations

    def route_record(self, tp: TopicPartition, rec: Record) -> Outcome:
        """One record's outcome by the reference: the mutations of every route that takes it and the
        refusals of the others (:meth:`~pipeline.core.routes.reference.TopicReference.outcome`)."""
        reference = self.reference.get(tp.topic)
        if reference is None:
            return Outcome([], [])
        return reference.outcome(tp, rec)

    def route_run(self, tp: TopicPartition, records: Sequence[Record], start: int, stop: int) -> RoutedRun:
        """Route ``records[start:stop]`` (records of ``tp``, in offset order) up to the first one the fast
        forms do not take: the mutations of ``records[start:result.stop]`` in record order and, per
        record, in route order, each exactly what :meth:`route_record` gives for it. Exactly one per
        route of the topic and record when ``result.counts`` is None, else ``counts[j]`` for record
        ``start + j``. When ``result.stop < stop``, ``records[result.stop]`` is for
        :meth:`route_record` (it may be refused by a route, give no mutation, or just be one the fast
        forms do not take)."""
        topic = tp.topic
        if topic in self.general:
            return _route_general(self.reference[topic], tp, records, start, stop)
        fast = self._fast.get(topic)
        if fast is None:
            return RoutedRun(stop, [])  # no route reads this topic: every record gives nothing
        decoder = self._decoders.get(topic)
        if decoder is not None:
            return _route_decoded(decoder, fast, tp, records, start, stop)
        if _ROUTERUN is not None:
            got, mutations = _ROUTERUN.route_run(records, start, stop, tp, self._plans[topic], self._env)
            return RoutedRun(got, mutations)
        return _route_plain(fast, tp, records, start, stop)

    def _fast_record(self, rec: Record, tp: TopicPartition) -> list[Mutation] | None:
        """One record of a plain JSON topic by its fast forms, as :func:`_route_plain` takes it (the
        compiled loop's path for any record it does not parse itself); None when they do not take it."""
        event = _json_event(rec.value)
        if event is None:
            return None
        origin = Origin(tp, rec.offset)
        out = []
        for fast in self._fast[tp.topic]:
            m = fast(event, origin)
            if m is None:
                return None
            out.append(m)
        return out


def _plan(route: CompiledRoute) -> tuple[Any, ...] | None:
    """A put route's plan for the compiled loop (:mod:`pipeline.core.routes._routerun`: the route's fast form,
    key builder, table, timestamp path, columns as ``(name, path, required)``, key and cell limits),
    when all its columns are ``text``; None for any other route (the loop calls its fast form). The
    plan states what the generated fast form (:mod:`pipeline.core.routes.putgen`) does for these columns."""
    spec = route.spec
    if (spec.counter is not None or spec.changelog or spec.dynamic_columns or spec.ttl_field
            or any(c.encoding != "text" for c in spec.columns.values())):
        return None
    ts = tuple(spec.timestamp_field.split(".")) if spec.timestamp_field else None
    columns = tuple((name.encode(), tuple(c.field.split(".")), c.required) for name, c in spec.columns.items())
    key = _key_plan(route.rowkey) or route.rowkey.builder
    return (route.mutation, key, route.table, ts, columns, route.max_key_bytes, route.max_cell_bytes)


def _key_plan(rowkey: RowKey) -> tuple[tuple[Any, ...], ...] | None:
    """The ops by which the compiled loop builds ``rowkey`` (its ``planned_key``): each segment's
    :meth:`~pipeline.rowkey.segments.Segment.key_op`; None when one segment has none (the loop calls
    the key's generated builder)."""
    ops = [seg.key_op(i, rowkey.layout.terminator[i]) for i, seg in enumerate(rowkey.segments)]
    return None if any(op is None for op in ops) else tuple(ops)  # type: ignore[arg-type]  # no None


def _route_plain(fast: tuple[MutationFn, ...], tp: TopicPartition, records: Sequence[Record], start: int,
                 stop: int) -> RoutedRun:
    """:meth:`Router.route_run` on a plain JSON topic, in Python: the reference of the compiled loop
    (:mod:`pipeline.core.routes._routerun`), and the path when it is not built."""
    mutations: list[Mutation] = []
    append, extend = mutations.append, mutations.extend
    single = fast[0] if len(fast) == 1 else None
    for i in range(start, stop):
        rec = records[i]
        event = _json_event(rec.value)
        if event is None:
            return RoutedRun(i, mutations)
        origin = Origin(tp, rec.offset)
        if single is not None:
            m = single(event, origin)
            if m is None:
                return RoutedRun(i, mutations)
            append(m)
        else:
            ms = [form(event, origin) for form in fast]
            if any(m is None for m in ms):
                return RoutedRun(i, mutations)
            extend(ms)  # type: ignore[arg-type]  # no None: checked above
    return RoutedRun(stop, mutations)


Record = MetaRecord  # what Router.route_run reads of a consumed record (the plain path: offset, value)


@dataclass(frozen=True, slots=True)
class _ValueRecord:
    """A record of a value alone (:meth:`Router.route`)."""

    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class RoutedRun:
    """What :meth:`Router.route_run` routed: ``records[start:stop]`` gave ``mutations``; ``counts``:
    the mutations of each record routed, when they are not one per route (the general path)."""

    stop: int
    mutations: list[Mutation]
    counts: list[int] | None = None


def _route_general(topic: TopicReference, tp: TopicPartition, records: Sequence[Record], start: int,
                   stop: int) -> RoutedRun:
    """The reference, record by record, up to the first record a route refuses."""
    mutations: list[Mutation] = []
    counts: list[int] = []
    for i in range(start, stop):
        got = topic.outcome(tp, records[i])
        if got.refusals:
            return RoutedRun(i, mutations, counts)
        mutations += got.mutations
        counts.append(len(got.mutations))
    return RoutedRun(stop, mutations, counts)


def _route_decoded(decode: Callable[[bytes], Any], fast: Sequence[MutationFn], tp: TopicPartition,
                   records: Sequence[Record], start: int, stop: int) -> RoutedRun:
    """The fast path of a plain topic in a registry format: each value decoded by ``decode``, then the
    routes' fast forms, up to the first record they do not take."""
    mutations: list[Mutation] = []
    for i in range(start, stop):
        value = records[i].value
        if value is None:
            return RoutedRun(i, mutations)
        try:
            event = decode(value)
        except EventError:
            return RoutedRun(i, mutations)
        if event.__class__ is not dict:
            return RoutedRun(i, mutations)
        origin = Origin(tp, records[i].offset)
        ms = [form(event, origin) for form in fast]
        if any(m is None for m in ms):
            return RoutedRun(i, mutations)
        mutations += ms  # type: ignore[arg-type]  # no None: checked above
    return RoutedRun(stop, mutations)


def _json_event(value: bytes | None) -> dict[str, Any] | None:
    """A plain JSON topic's value as its event, decoded as the reference decodes it
    (:func:`~pipeline.core.records.decode.json_value`: Connect envelopes unwrapped); None when it is no JSON
    object (the reference says why)."""
    if value is None:
        return None
    try:
        event = json_value(value)
    except EventError:
        return None
    return event if event.__class__ is dict else None
