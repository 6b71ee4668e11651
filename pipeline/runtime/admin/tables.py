"""Table admin: create each route's table pre-split from its rowkey design; describe a live table.

Planning is pure (:func:`plan_tables`); :func:`create_tables` and :func:`describe_table` do the I/O
through the :class:`~pipeline.ports.HBase` port.

How a route's table is planned:

- **Families**: the table's ``[[tables]]`` entry (versions, TTL, compression, in-memory). A table
  without an entry gets one default family (``FamilySpec()``) per family its routes write.
- **Region count**: the ``regions`` argument, else ``TableSpec.regions``, else the design's fan-out
  size (salt buckets, ``mod`` buckets, md5-prefix values) capped at :data:`MAX_DEFAULT_REGIONS`,
  else 1 (no split).
- **Split keys**: the design's own (one region per salt value for salted designs, evenly over the
  hex alphabet for md5-hex prefixes, so that every region has keys), else, for a design without a
  leading distributing segment, quantiles of the sample keys built from ``sample_events``. Such a
  design with more than one region and no sample is a :class:`~pipeline.errors.ConfigError`.
- **Shared tables**: when several routes write one table, the first route (in config order) decides
  the split keys; the other routes' families are still created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from pipeline import ports
from pipeline.core.keyspace import KeyspaceReport, length_stats
from pipeline.core.routes.router import compile_route
from pipeline.errors import ConfigError, HBaseIngestError
from pipeline.ports import HBase
from pipeline.rowkey import PlanError, RowKey, format_key
from pipeline.rowkey.splits import split_points
from pipeline.settings import FamilySpec, RouteSpec, Settings

__all__ = [
    "KEY_ONLY_FILTER",
    "MAX_DEFAULT_REGIONS",
    "CreatedTable",
    "RegionDescription",
    "SampleKeys",
    "TableDescription",
    "TablePlan",
    "boundary_label",
    "build_sample_keys",
    "count_rows",
    "create_tables",
    "default_regions",
    "describe_table",
    "plan_splits",
    "plan_tables",
]

#: Cap on the region count taken from a design's fan-out (an md5 prefix of 4 hex chars has 65536).
MAX_DEFAULT_REGIONS = 256
#: Server-side filter of a key-only scan: one cell per row, no values.
KEY_ONLY_FILTER = "FirstKeyOnlyFilter() AND KeyOnlyFilter()"

SplitMethod = Literal["none", "design", "sample"]


@dataclass(frozen=True, slots=True)
class SampleKeys:
    """Keys built from sample events, with their event times (None when the event has none) and
    how many events could not feed the key, by reason (``missing_field``, ``bad_type``, ...)."""

    keys: tuple[bytes, ...]
    times: tuple[float | None, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)


def _time_of(event: Mapping[str, Any], path: Sequence[str]) -> float | None:
    value: Any = event
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def build_sample_keys(rowkey: RowKey, events: Sequence[Mapping[str, Any]],
                      time_field: str | None = None) -> SampleKeys:
    """Build the key of each event; events the design cannot key are counted in ``skipped``."""
    keys: list[bytes] = []
    times: list[float | None] = []
    skipped: dict[str, int] = {}
    path = time_field.split(".") if time_field else None
    for event in events:
        try:
            key = rowkey.build(event)
        except HBaseIngestError as exc:
            reason = str(getattr(exc, "reason", type(exc).__name__))
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        keys.append(key)
        times.append(_time_of(event, path) if path else None)
    return SampleKeys(tuple(keys), tuple(times), skipped)


def default_regions(rowkey: RowKey, requested: int | None = None, configured: int | None = None,
                    cap: int = MAX_DEFAULT_REGIONS) -> int:
    """``requested``, else ``configured`` (``TableSpec.regions``), else the design's fan-out size
    capped at ``cap``, else 1."""
    if requested is not None:
        return requested
    if configured is not None:
        return configured
    size = rowkey.fanout_size
    return min(size, cap) if size and size > 1 else 1


def plan_splits(rowkey: RowKey, regions: int,
                sample_keys: Sequence[bytes] | None = None) -> tuple[list[bytes], SplitMethod]:
    """Split keys for ``regions`` regions and where they come from (see the module docstring).

    Raises :class:`~pipeline.rowkey.PlanError` when the design has no leading distributing segment,
    ``regions > 1`` and no sample keys are given.
    """
    if regions <= 1:
        return [], "none"
    try:
        return list(split_points(rowkey, regions)), "design"
    except PlanError:
        if not sample_keys:
            raise
    return list(split_points(rowkey, regions, sample_keys=list(sample_keys))), "sample"


@dataclass(frozen=True, slots=True)
class TablePlan:
    """What :func:`create_tables` will create for one table."""

    table: str
    route: str
    rowkey: str
    families: Mapping[str, FamilySpec]
    split_keys: tuple[bytes, ...]
    method: SplitMethod

    @property
    def regions(self) -> int:
        return len(self.split_keys) + 1


def _families(settings: Settings, table: str) -> dict[str, FamilySpec]:
    declared = [t for t in settings.tables if t.name == table]
    if declared:
        return dict(declared[0].families)
    wanted = dict.fromkeys(f for route in settings.routes if route.table == table for f in route.families)
    return {f: FamilySpec() for f in wanted} or dict(settings.table(table).families)


def plan_tables(settings: Settings, route: str | None = None, regions: int | None = None,
                sample_events: Sequence[Mapping[str, Any]] | None = None) -> list[TablePlan]:
    """One plan per distinct table of the routes (or of ``route`` only), in config order.

    Raises ConfigError for an unknown route, no routes, or an unsalted design asked for several
    regions without sample events; SpecSyntaxError for a bad rowkey spec.
    """
    routes: list[RouteSpec] = [settings.route(route)] if route else list(settings.routes)
    if not routes:
        raise ConfigError("the configuration has no [[routes]]: nothing to create")
    plans: list[TablePlan] = []
    seen: set[str] = set()
    for spec in routes:
        if spec.table in seen:
            continue  # the first route of a shared table decides its split keys
        seen.add(spec.table)
        rowkey = compile_route(spec).rowkey
        n = default_regions(rowkey, regions, settings.table(spec.table).regions)
        sample = None
        if sample_events:
            sample = build_sample_keys(rowkey, sample_events, spec.timestamp_field).keys
        try:
            splits, method = plan_splits(rowkey, n, sample)
        except PlanError as exc:
            raise ConfigError(
                f"route {spec.name!r}: {n} regions asked for table {spec.table!r} cannot be split "
                f"from its rowkey {spec.rowkey!r}: {exc}; or use fewer regions") from exc
        plans.append(TablePlan(spec.table, spec.name, spec.rowkey, _families(settings, spec.table),
                               tuple(splits), method))
    return plans


@dataclass(frozen=True, slots=True)
class CreatedTable:
    """The outcome for one table: ``created``, ``recreated`` (dropped, then created) or ``exists``
    (left alone: ``plan`` is what would have been created, ``live_regions`` what the table has)."""

    plan: TablePlan
    action: Literal["created", "recreated", "exists"]
    live_regions: int

    @property
    def table(self) -> str:
        return self.plan.table

    @property
    def split_keys(self) -> tuple[bytes, ...]:
        return self.plan.split_keys


async def create_tables(
    hb: HBase, settings: Settings, route: str | None = None, regions: int | None = None,
    recreate: bool = False, sample_events: Sequence[Mapping[str, Any]] | None = None,
) -> list[CreatedTable]:
    """Create the tables of :func:`plan_tables`. An existing table is left alone unless
    ``recreate``, which drops it (and its data) first. Raises what :func:`plan_tables` raises and
    the HBase errors of the client."""
    out: list[CreatedTable] = []
    for plan in plan_tables(settings, route, regions, sample_events):
        exists = await hb.table_exists(plan.table)
        if exists and not recreate:
            out.append(CreatedTable(plan, "exists", len(await hb.regions(plan.table))))
            continue
        if exists:
            await hb.delete_table(plan.table)
        await hb.create_table(plan.table, plan.families, plan.split_keys)
        out.append(CreatedTable(plan, "recreated" if exists else "created", plan.regions))
    return out


# -- describe ------------------------------------------------------------------------------------


def boundary_label(rowkey: RowKey | None, key: bytes) -> str | None:
    """``key`` decoded by the design (``field=value, ...``), or None when it cannot be (no design,
    an open end, bytes the design cannot produce).

    A split key is often a prefix (a bare salt byte, a bucket, a hex prefix): then the leading
    fixed-width segments it covers are labelled one by one (``salt=3``, ``md5=8``) and a trailing
    partial segment shows as ``...``.
    """
    if rowkey is None or not key:
        return None
    try:
        fields = rowkey.decode(key)
    except HBaseIngestError:
        pass
    else:
        return ", ".join(f"{k}={v}" for k, v in fields.items())
    parts: list[str] = []
    pos = 0
    try:
        for seg in rowkey.segments:
            if pos >= len(key) or seg.width is None or pos + seg.width > len(key):
                break
            chunk = key[pos:pos + seg.width]
            pos += seg.width
            if seg.distributing:
                parts.append(seg.label(chunk))
            else:
                parts.extend(f"{k}={v}" for k, v in seg.decode(chunk).items())
    except HBaseIngestError:
        return None
    if not parts:
        return None
    return ", ".join(parts) + (", ..." if pos < len(key) else "")


@dataclass(frozen=True, slots=True)
class RegionDescription:
    """One region: ``[start_key, end_key)`` (``b""`` = open end), its server and, when counted, its
    rows (``capped`` when the count stopped at the limit: a lower bound)."""

    start_key: bytes
    end_key: bytes
    server: str
    name: str
    region_id: int
    rows: int | None = None
    capped: bool = False
    start_label: str | None = None

    def __str__(self) -> str:
        return f"[{format_key(self.start_key)}, {format_key(self.end_key)})@{self.server}"


@dataclass(frozen=True, slots=True)
class TableDescription:
    table: str
    families: Mapping[str, int]
    regions: tuple[RegionDescription, ...]
    route: str | None = None

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(sorted({r.server for r in self.regions}))

    @property
    def counted(self) -> bool:
        return all(r.rows is not None for r in self.regions)

    @property
    def rows(self) -> int | None:
        """Total counted rows (a lower bound when a region is capped); None when not counted."""
        return sum(r.rows or 0 for r in self.regions) if self.counted else None

    def distribution(self) -> KeyspaceReport | None:
        """Skew figures over the counted rows (no length or recent-write figures)."""
        if not self.counted:
            return None
        return KeyspaceReport(tuple(r.start_key for r in self.regions[1:]),
                              tuple(r.rows or 0 for r in self.regions), length_stats([]), None)


async def count_rows(hb: HBase, table: str, start: bytes = b"", stop: bytes = b"",
                     max_count: int | None = None, page: int = 5000) -> tuple[int, bool]:
    """Rows in ``[start, stop)`` by key-only scans of ``page`` rows, stopping at ``max_count``.
    Returns ``(rows, capped)``; fine for small tables (every key crosses the gateway)."""
    n = 0
    cursor = start
    while True:
        limit = page if max_count is None else min(page, max_count - n)
        if limit <= 0:
            return n, True
        rows = await hb.scan_page(table, start=cursor, stop=stop, limit=limit,
                                  filter=KEY_ONLY_FILTER)
        n += len(rows)
        if len(rows) < limit:
            return n, False
        cursor = rows[-1][0] + b"\x00"  # the smallest key after the last one seen


async def describe_table(
    hb: HBase, name: str, rowkey: RowKey | None = None, count: bool = True,
    max_count: int | None = None, route: str | None = None,
) -> TableDescription:
    """The regions of ``name`` (boundaries decoded with ``rowkey`` where possible), its families
    and, when ``count``, the rows of each region (at most ``max_count`` per region). Raises
    TableNotFound for a missing table."""
    infos = list(await hb.regions(name))
    families = await hb.families(name)
    counts: dict[int, tuple[int, bool]] = {}

    async def count_one(i: int, info: ports.RegionInfo) -> None:
        counts[i] = await count_rows(hb, name, info.start_key, info.end_key, max_count)

    if count:
        async with anyio.create_task_group() as tg:
            for i, info in enumerate(infos):
                tg.start_soon(count_one, i, info)
    regions = tuple(
        RegionDescription(
            start_key=info.start_key, end_key=info.end_key, server=f"{info.server}:{info.port}",
            name=info.name, region_id=info.region_id,
            rows=counts[i][0] if i in counts else None,
            capped=counts[i][1] if i in counts else False,
            start_label=boundary_label(rowkey, info.start_key))
        for i, info in enumerate(infos))
    return TableDescription(name, families, regions, route)
