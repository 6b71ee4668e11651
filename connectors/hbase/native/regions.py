"""Regions as the native client sees them: a meta row parsed into a :class:`Region`, and a
:class:`RegionCache` per table. Pure: no I/O.

A row of ``hbase:meta`` is keyed by the region name ``table,start key,region id.encoded name.``;
family ``info``:

- ``info:regioninfo`` = ``b"PBUF"`` + a ``RegionInfo`` protobuf (start/end key, id, offline/split flags);
- ``info:server`` = ``b"host:port"`` of the region server holding it (absent or empty while the region
  is in transition).

Offline regions and split parents are not regions to write to and are skipped. Replica regions
(``replica_id`` > 0) are skipped too: writes go to the primary.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from connectors.hbase.native.cells import Cell
from connectors.hbase.native.messages import decode_region_info

__all__ = ["META_REGION", "Region", "RegionCache", "meta_scan_range", "parse_meta_row"]

#: the name of the (single, never split) meta region
META_REGION = b"hbase:meta,,1"
_PBUF = b"PBUF"


@dataclass(frozen=True, slots=True)
class Region:
    """One online region: ``[start_key, end_key)`` (``b""`` an open end), its full region name (what a
    ``RegionSpecifier`` carries) and the region server holding it (``host``, ``port``; ``""``/0 when
    meta names none)."""

    name: bytes
    table: str
    start_key: bytes
    end_key: bytes
    region_id: int
    host: str
    port: int

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    def holds(self, row: bytes) -> bool:
        return self.start_key <= row and (not self.end_key or row < self.end_key)

    def overlaps(self, other: Region) -> bool:
        return ((not other.end_key or self.start_key < other.end_key)
                and (not self.end_key or other.start_key < self.end_key))


def meta_scan_range(table: str) -> tuple[bytes, bytes]:
    """``[table + ",,", table + " ,,")``: every meta row of ``table``, and no row of another table.

    Meta rows are not ordered bytewise: the meta region compares keys as region names (table, then
    start key, then region id, each part split at the ``,`` delimiters). A plain ``table + ","`` start
    compares *after* the first region's row ``table,,<id>...`` there, and a key without two
    delimiters does not bound anything reliably. ``table,,`` (empty start key, empty id) sorts first in
    the table, and ``table ,,`` (a space, below every character a table name may hold) right after it."""
    name = table.encode()
    return name + b",,", name + b" ,,"


def parse_meta_row(row: bytes, cells: Iterable[Cell]) -> Region | None:
    """The :class:`Region` of one meta row, or None for an offline region, a split parent or a replica.
    Raises ``ValueError`` when ``info:regioninfo`` is missing or lacks its ``PBUF`` magic."""
    info = server = None
    for c in cells:
        if c.family != b"info":
            continue
        if c.qualifier == b"regioninfo":
            info = c.value
        elif c.qualifier == b"server":
            server = c.value
    if info is None or not info.startswith(_PBUF):
        raise ValueError(f"meta row {row!r} has no PBUF info:regioninfo")
    ri = decode_region_info(info[len(_PBUF):])
    if ri.offline or ri.split or ri.replica_id:
        return None
    host, port = "", 0
    if server:
        h, _, p = server.decode().rpartition(":")
        host, port = h, int(p)
    return Region(row, ri.table, ri.start_key, ri.end_key, ri.region_id, host, port)


class RegionCache:
    """The known regions of each table, sorted by start key; :meth:`locate` bisects. :meth:`put`
    evicts every cached region that overlaps the new one (how a split or merge is absorbed after a
    refresh)."""

    def __init__(self) -> None:
        self._starts: dict[str, list[bytes]] = {}
        self._regions: dict[str, list[Region]] = {}

    def __repr__(self) -> str:
        return f"RegionCache({ {t: len(r) for t, r in self._regions.items()} })"

    def regions(self, table: str) -> list[Region]:
        return list(self._regions.get(table, ()))

    def known(self, table: str) -> bool:
        return bool(self._regions.get(table))

    def put(self, region: Region) -> list[Region]:
        """Insert ``region``; returns the evicted overlapping regions."""
        regions = self._regions.setdefault(region.table, [])
        evicted = [r for r in regions if r.overlaps(region)]
        kept = [r for r in regions if not r.overlaps(region)]
        kept.append(region)
        kept.sort(key=lambda r: r.start_key)
        self._regions[region.table] = kept
        self._starts[region.table] = [r.start_key for r in kept]
        return evicted

    def replace(self, table: str, regions: Sequence[Region]) -> None:
        """Put every region of a fresh listing (overlapping older entries go)."""
        for r in regions:
            self.put(r)
        if not regions:
            self.forget(table)

    def forget(self, table: str) -> None:
        self._regions.pop(table, None)
        self._starts.pop(table, None)

    def locate(self, table: str, row: bytes) -> Region | None:
        """The cached region holding ``row``, or None (a hole: unknown or being refreshed)."""
        starts = self._starts.get(table)
        if not starts:
            return None
        i = bisect.bisect_right(starts, row) - 1
        if i < 0:
            return None
        region = self._regions[table][i]
        return region if region.holds(row) else None

    def last(self, table: str) -> Region | None:
        """The cached region with the open end (where a reversed scan from the end starts), or None."""
        regions = self._regions.get(table)
        return regions[-1] if regions and not regions[-1].end_key else None

    def before(self, table: str, key: bytes) -> Region | None:
        """The cached region holding the greatest row below ``key`` (not empty): where a reversed scan
        goes on once it read down to ``key``. None when the table has no row below ``key`` or the
        cache has a hole there."""
        starts = self._starts.get(table)
        if not starts:
            return None
        i = bisect.bisect_left(starts, key) - 1
        if i < 0:
            return None
        region = self._regions[table][i]
        return region if not region.end_key or region.end_key >= key else None
