"""From a query to the ranges the reader scans, the scan direction and the merge order.

The rowkey design plans the key ranges (``RowKey.plan``): one range when the salt/hash/bucket is
computable from ``where``, one per salt/bucket value otherwise. When that set would be huge (a
4-hex-char md5 prefix has 65,536 values) the design returns a ``per_region`` plan and this module
cuts its ranges at the table's region boundaries instead, with ``matches`` as a client-side filter:
the number of scanners is then the number of regions, never the size of the fan-out set.

Direction rule for ``newest_first``: find the first segment that stores the design's time field in
an ordered form. When it stores time descending (``reverse_ts``, ``long(ts, desc)``, ``int(ts,
desc)``), a forward scan already yields newest first; otherwise every range is scanned in reverse
and merged descending. Without ``newest_first`` every scan is forward and the merge ascending.

Merge order (``QueryPlan.order``):

- ``logical``: each range holds one salt/bucket value, so it is sorted by ``RowKey.sort_key``
  (the key without its leading salt); a streaming k-way merge by that key.
- ``table``: per-region ranges without a limit: regions are disjoint and sorted, and a region mixes
  hash prefixes, so the rows stream in table (byte) order.
- ``top-k``: per-region ranges with a limit: the first ``limit`` rows in logical order, kept in a
  heap of ``limit`` rows while every region is read.
- ``by-time`` (``by_time=True``, a limit required): the newest (or oldest) ``limit`` rows by the
  time field across every entity, ties in logical order, kept in a heap of ``limit`` rows. On an
  entity-led design (``[salt(host, 16)][host][_][reverse_ts(ts)]``: rows ordered by host before
  time) every range is walked entity by entity and only each entity's best ``limit`` rows are read
  (:mod:`pipeline.runtime.read.entities`); ``entity`` names the fields that make an entity
  (:func:`entity_fields`). Within an entity the scan runs in the wanted time direction:
  ``reverse`` is ``newest_first`` unless the design stores time descending, and then its opposite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.ports import RegionInfo, RegionLocator
from pipeline.rowkey import RowKey, format_key
from pipeline.rowkey.errors import PlanError
from pipeline.rowkey.segments import Segment
from pipeline.runtime.read.errors import QueryError
from pipeline.settings import RouteSpec

__all__ = ["EntityBounds", "QueryPlan", "ScanRange", "clip_to_regions", "entity_bounds", "entity_fields",
           "explain_lines", "intersect", "plan_query", "time_descending"]

EntityBounds = Callable[[bytes], tuple[bytes, list[tuple[bytes, bytes]]]]
"""``bounds(key) -> (skip_to, parts)``: the exclusive end of ``key``'s entity (``b""``: the end of the
table) and the ``[start, stop)`` parts of that entity that the query reads (its time range applied)."""


@dataclass(frozen=True, slots=True)
class ScanRange:
    """Keys ``start <= k < stop`` (``stop == b""``: the end of the table), scanned as one stream."""

    start: bytes
    stop: bytes
    label: str


@dataclass(frozen=True, eq=False)
class QueryPlan:
    """Everything the reader needs to run one query, and what ``--explain`` prints.

    ``matches`` is None when every key in the ranges answers the query (an exact plan).
    ``sort_key`` is the merge key: ``RowKey.sort_key`` (as its C-level ``sort_key_fn``) for
    ``logical`` and ``top-k``, the key itself for ``table``, ``(time, RowKey.sort_key)`` for
    ``by-time``. ``reverse``: scan every range (every entity, for ``by-time``) in reverse.
    ``descending``: merge descending (``reverse``, except for ``by-time``, where it is
    ``newest_first``). ``entity`` and ``bounds``: the entity walk of a ``by-time`` plan over an
    entity-led design (empty and None otherwise).
    """

    route: str
    table: str
    spec: str
    where: Mapping[str, Any]
    time_range: tuple[int, int] | None
    time_field: str | None
    newest_first: bool
    limit: int | None
    ranges: tuple[ScanRange, ...]
    reverse: bool
    order: str
    per_region: bool
    exact: bool
    fanout_size: int
    key_order: str
    notes: tuple[str, ...]
    matches: Callable[[bytes], bool] | None
    sort_key: Callable[[bytes], Any]
    entity: tuple[str, ...] = ()
    bounds: EntityBounds | None = None

    @property
    def descending(self) -> bool:
        """Merge descending: ``reverse``, except for ``by-time`` (then ``newest_first``)."""
        return self.newest_first if self.order == "by-time" else self.reverse

    @staticmethod
    def format_key(key: bytes) -> str:
        return format_key(key)


def time_descending(rowkey: RowKey, time_field: str | None) -> bool:
    """True when the first ordered segment of ``time_field`` stores time descending."""
    if time_field is None:
        return False
    for seg in rowkey.segments:
        if seg.fields != (time_field,) or not seg.time_ordered:
            continue
        return seg.time_descending
    return False


def _identity(key: bytes) -> bytes:
    return key


def intersect(start: bytes, stop: bytes, low: bytes, high: bytes) -> tuple[bytes, bytes] | None:
    """``[start, stop) & [low, high)`` (an empty stop is the end of the table), None when empty."""
    start = max(start, low)
    if high and (not stop or stop > high):
        stop = high
    return (start, stop) if not stop or start < stop else None


def entity_fields(rowkey: RowKey, time_field: str, what: str = "a by-time query") -> tuple[str, ...]:
    """The fields of the segments before the first segment that stores ``time_field`` in order
    (salt inputs included), in key order: what names one entity of the design. Empty for a
    time-led design. A coarse time bucket of ``time_field`` may come before the time itself when no
    other field sits between them (rows then stay in time order). Raises ``PlanError`` when no
    segment stores the time in order, or when an entity field follows a time bucket (one entity's
    rows are then spread over many buckets); ``what`` names the query in those messages."""
    out: list[str] = []
    bucket: Segment | None = None
    for seg in rowkey.segments:
        if seg.time_ordered and time_field in seg.fields:
            if seg.time_bucket:
                bucket = bucket or seg
                continue
            return tuple(out)
        fields = [f for f in seg.fields if f != time_field and f not in out]
        if bucket is not None and fields:
            raise PlanError(f"{what} cannot walk the design {rowkey.spec!r} entity by entity: "
                            f"its time bucket {bucket.source} comes before {', '.join(fields)}, so one "
                            "entity's rows are spread over many buckets")
        out.extend(fields)
    raise PlanError(f"{what} needs a key that stores {time_field!r} in order, and "
                    f"{rowkey.spec!r} does not")


def entity_bounds(rowkey: RowKey, time_field: str, fields: tuple[str, ...], where: Mapping[str, Any],
                  time_range: tuple[int, int] | None,
                  decode_key: Callable[[bytes], dict[str, Any]], what: str = "a by-time query") -> EntityBounds:
    """The :data:`EntityBounds` of a query (``where``, ``time_range``) whose entity is ``fields``:
    the query planned again with the entity's values added to ``where``. Raises the rowkey's errors:
    for a key that does not decode, and ``PlanError`` when that plan does not pin the entity to one
    contiguous key range (``what`` names the query in that message)."""

    def bounds(key: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        decoded = decode_key(key)
        query = {**where, **{f: decoded[f] for f in fields}}
        whole = rowkey.plan(query, None, time_field=time_field)
        rng = whole.range_of(key) if whole.exact and not whole.per_region else None
        if rng is None:
            raise PlanError(f"{what} cannot walk the design {rowkey.spec!r} entity by entity: "
                            f"the rows of one ({', '.join(fields)}) are not one contiguous key range")
        if time_range is None:  # the part to read is the whole entity
            return rng.stop, [(rng.start, rng.stop)]
        part = rowkey.plan(query, time_range, time_field=time_field)
        parts = [p for r in part.ranges if (p := intersect(r.start, r.stop, rng.start, rng.stop))]
        return rng.stop, parts

    return bounds


def clip_to_regions(ranges: Sequence[ScanRange], regions: Sequence[RegionInfo]) -> list[ScanRange]:
    """Every non-empty intersection of a range with a region, in key order, labelled by region."""
    out: list[ScanRange] = []
    n = len(regions)
    for idx, region in enumerate(regions):
        for rng in ranges:
            clipped = intersect(rng.start, rng.stop, region.start_key, region.end_key)
            if clipped is None:
                continue
            bounds = f"[{format_key(region.start_key)}, {format_key(region.end_key)})"
            label = f"region {idx + 1}/{n} {bounds}"
            out.append(ScanRange(*clipped, label))
    out.sort(key=lambda r: r.start)
    return out


def time_field_of(rowkey: RowKey, route: RouteSpec) -> str | None:
    """The design's time field, or the route's ``timestamp_field`` when the key holds it."""
    if rowkey.time_field is not None:
        return rowkey.time_field
    if route.timestamp_field is not None and route.timestamp_field in rowkey.fields:
        return route.timestamp_field
    return None


def _walked_entity(rowkey: RowKey, route: RouteSpec, tf: str, flag: str, decodes: str,
                   what: str) -> tuple[str, ...]:
    """The entity fields a walk (``by_time``, ``skip_scan``) goes by; raises :class:`QueryError`
    when the key does not decode (the walk reads the entity, ``decodes``, from keys) and
    :func:`entity_fields`' error when the design cannot be walked."""
    if not rowkey.decodable:
        raise QueryError(f"{flag} decodes {decodes}, and the key {route.rowkey!r} does not decode",
                         table=route.table)
    return entity_fields(rowkey, tf, what)


def _walked_entities(rowkey: RowKey, route: RouteSpec, tf: str | None, where: Mapping[str, Any],
                     time_range: tuple[int, int] | None, newest_first: bool, limit: int | None, by_time: bool,
                     skip_scan: bool) -> tuple[tuple[str, ...], str]:
    """Check the flags of a query against the design: the entity fields its walk goes by (empty: no
    walk) and, for a skip scan that needs none, the note that says why. Raises :class:`QueryError`
    as :func:`plan_query` documents."""
    for wanted, flag in ((newest_first, "newest_first"), (by_time, "by_time"), (skip_scan, "skip_scan")):
        if wanted and tf is None:
            raise QueryError(f"{flag} needs a time field, and the key {route.rowkey!r} has none "
                             "that the design or the route's timestamp_field names", table=route.table)
    if by_time:
        assert tf is not None
        if limit is None:
            raise QueryError("by_time needs a limit: it returns the newest (or oldest) N rows by "
                             f"{tf} across the whole query, and reads at most N rows per entity",
                             table=route.table)
        if skip_scan:
            raise QueryError("skip_scan with by_time: a by-time query already walks entity by entity",
                             table=route.table)
        entity = _walked_entity(rowkey, route, tf, "by_time", f"{tf} from every key", "a by-time query")
        return (() if all(f in where for f in entity) else entity), ""  # one entity: already in time order
    if not skip_scan:
        return (), ""
    if time_range is None or tf is None:  # (tf is None was refused above)
        raise QueryError("skip_scan needs a time range: it reads each entity's rows in the time range "
                         "and skips the rest of the entity", table=route.table)
    entity = _walked_entity(rowkey, route, tf, "skip_scan", "each entity from its first key", "a skip scan")
    if not entity:
        return (), ("skip scan: not needed, the key leads with the time, so the ranges hold only "
                    "rows in the time range")
    if all(f in where for f in entity):
        return (), f"skip scan: not needed, where gives the whole entity ({', '.join(entity)})"
    return entity, ""


def _newest_first_note(rowkey: RowKey, tf: str, where: Mapping[str, Any]) -> str | None:
    """What newest first means on a key that orders other fields (not in ``where``) before the time."""
    before = [f for f in rowkey.ordered_before_time(tf) if f not in where]
    if not before:
        return None
    names = ", ".join(before)
    return (f"newest first is per ({names}): the key orders rows by {names} before "
            f"{tf}, so rows of different {names} come in key order, not by time; give "
            f"{names} in where for one newest-first stream, ask by_time (--by-time) "
            f"with a limit for the newest rows across every {names}, or use a design that "
            f"leads with time (for example [mod({tf}, 16)][long({tf})]...)")


async def plan_query(hbase: RegionLocator, rowkey: RowKey, route: RouteSpec, *,
                     where: Mapping[str, Any] | None, time_range: tuple[int, int] | None,
                     newest_first: bool, limit: int | None, by_time: bool = False, skip_scan: bool = False,
                     decode_key: Callable[[bytes], dict[str, Any]] | None = None) -> QueryPlan:
    """Plan one query on ``route`` (reads the region list only for a per-region plan).
    ``decode_key`` (the reader's key decoder; default ``RowKey.decode``) is what a ``by_time``
    entity walk (``by_time``, ``skip_scan``) decodes keys with.

    Raises the rowkey's ``PlanError`` for a query the design cannot answer, :class:`QueryError` for
    ``newest_first``, ``by_time`` or ``skip_scan`` on a design without a time field, ``by_time`` without a limit,
    ``skip_scan`` without a time range, with ``by_time`` or reading backward, either on a design it
    cannot walk, and HBase errors from the region list."""
    where = dict(where or {})
    tf = time_field_of(rowkey, route)
    entity, skip_note = _walked_entities(rowkey, route, tf, where, time_range, newest_first, limit, by_time,
                                         skip_scan)
    sp = rowkey.plan(where, time_range, time_field=tf)
    reverse = newest_first != time_descending(rowkey, tf) if by_time else (
        newest_first and not time_descending(rowkey, tf))
    if skip_scan and entity and reverse:
        raise QueryError(f"skip_scan walks every range forward, and newest first on {route.rowkey!r} reads "
                         f"it backward (the key stores {tf} ascending): drop newest_first, or ask by_time "
                         "with a limit for the newest rows across every entity", table=route.table)
    # the planner's generic labels (prefix, point, time, all) get the range's start key
    ranges = [ScanRange(r.start, r.stop,
                        r.label if "=" in r.label else f"{r.label} {format_key(r.start)}".rstrip())
              for r in sp.ranges]
    notes = list(sp.notes)
    if newest_first and tf is not None and not by_time and (note := _newest_first_note(rowkey, tf, where)):
        notes.append(note)
    if sp.per_region:
        regions = await hbase.regions(route.table)
        ranges = clip_to_regions(ranges, regions)
        order = "top-k" if limit is not None else "table"
        notes.append(f"the fan-out set ({rowkey.fanout_size} prefixes) is too large to enumerate: "
                     f"scanning {len(ranges)} region range(s) with a client-side filter")
    else:
        order = "logical"
    sort_key: Callable[[bytes], Any] = _identity if order == "table" else rowkey.sort_key_fn
    bounds: EntityBounds | None = None
    decode = decode_key or rowkey.decode  # what an entity walk reads the entity (and time) with
    if by_time:
        assert tf is not None
        order = "by-time"
        logical = rowkey.sort_key_fn

        def sort_key(key: bytes) -> tuple[Any, bytes]:
            return decode(key)[tf], logical(key)

        if entity:
            bounds = entity_bounds(rowkey, tf, entity, where, time_range, decode)
            notes.append(f"by time across every ({', '.join(entity)}): each range is walked entity by "
                         f"entity, reading at most {limit} row(s) of each (one or two scanner calls per entity)")
    elif entity:  # a skip scan
        assert tf is not None and time_range is not None
        bounds = entity_bounds(rowkey, tf, entity, where, time_range, decode, "a skip scan")
        notes.append(f"skip scan: each range is walked entity by entity ({', '.join(entity)}), reading only "
                     "each one's rows in the time range (one or two scanner calls per entity)")
    elif skip_note:
        notes.append(skip_note)
    return QueryPlan(
        route=route.name, table=route.table, spec=route.rowkey, where=where, time_range=time_range,
        time_field=tf, newest_first=newest_first, limit=limit, ranges=tuple(ranges),
        reverse=reverse, order=order, per_region=sp.per_region,
        exact=sp.exact and not sp.per_region,
        fanout_size=rowkey.fanout_size, key_order=sp.order, notes=tuple(notes),
        matches=None if sp.exact and not sp.per_region else sp.matches,
        sort_key=sort_key, entity=entity, bounds=bounds)


def _order_text(plan: QueryPlan) -> str:
    direction = "descending" if plan.reverse else "ascending"
    if plan.order == "table":
        return f"table (byte) order, {direction}: regions mix hash prefixes, so no logical order"
    what = "logical order (key without its salt/bucket prefix)"
    if plan.order == "by-time":
        first = "newest" if plan.newest_first else "oldest"
        return (f"the {first} {plan.limit} rows by {plan.time_field} across the query (ties in {what}), "
                "selected over every range")
    if plan.order == "top-k":
        return f"first {plan.limit} rows in {what}, {direction}, selected over full region scans"
    return f"{what}, {direction}, by a streaming k-way merge"


def explain_lines(plan: QueryPlan) -> list[str]:
    """The plan as readable lines: ranges with labels and escaped keys, per-region or not, exact
    or filtered, the scan direction and the expected order."""
    where = ", ".join(f"{k}={v!r}" for k, v in plan.where.items()) or "(none)"
    lines = [
        f"route {plan.route!r} -> table {plan.table!r}, rowkey {plan.spec}",
        f"query: where {where}; time "
        + (f"[{plan.time_range[0]}, {plan.time_range[1]}) on {plan.time_field!r}"
           if plan.time_range else "(any)")
        + f"; newest first: {'yes' if plan.newest_first else 'no'}; limit: {plan.limit}"
        + ("; by time: yes" if plan.order == "by-time" else ""),
    ]
    if plan.per_region:
        kind = f"per region ({len(plan.ranges)} region range(s))"
    elif len(plan.ranges) == 1:
        kind = "single range" + (" (salt/bucket computed from the query)" if plan.fanout_size > 1
                                 else "")
    else:
        kind = f"fan-out over {len(plan.ranges)} ranges (design has {plan.fanout_size} prefix(es))"
    lines.append(f"plan: {kind}")
    lines.append("rows: " + ("exact (every key in the ranges matches)" if plan.matches is None
                             else "filtered client-side (the ranges also hold non-matching keys)"))
    scan = "reverse" if plan.reverse else "forward"
    why = ""
    if plan.newest_first:
        why = (" (time is stored ascending)" if plan.reverse
               else " (time is stored descending: forward is newest first)")
    if plan.order == "by-time":
        why = f" (within each {'entity' if plan.entity else 'range'}, {plan.time_field} " + (
            "newest first)" if plan.newest_first else "oldest first)")
    lines.append(f"scan: {scan}{why}")
    if plan.entity and plan.order == "by-time":
        lines.append(f"walk: entity by entity, an entity being one ({', '.join(plan.entity)}); at most "
                     f"{plan.limit} row(s) read per entity")
    elif plan.entity:
        lines.append(f"walk: skip scan, entity by entity, an entity being one ({', '.join(plan.entity)}); "
                     "only its rows in the time range are read")
    lines.append(f"order: {_order_text(plan)}")
    lines.append(f"key order: {plan.key_order}")
    lines.extend(f"note: {n}" for n in plan.notes)
    lines.append(f"ranges ({len(plan.ranges)}):")
    for r in plan.ranges:
        stop = format_key(r.stop) if r.stop else "(end of table)"
        lines.append(f"  {r.label}: [{format_key(r.start)}, {stop})")
    return lines
