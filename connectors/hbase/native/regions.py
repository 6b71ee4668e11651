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
from pathlib import Path
from typing import Protocol

from connectors.hbase.native.cells import Cell
from connectors.hbase.native.messages import decode_region_info
from pipeline import compiled

__all__ = ["COMPILED_GROUP", "META_REGION", "Region", "RegionCache", "group_python", "meta_scan_range",
           "parse_meta_row"]


class _Keyed(Protocol):
    @property
    def row(self) -> bytes: ...


#: (region index -> positions, in first-seen order; positions in no region)
Grouped = tuple[dict[int, list[int]], list[int]]

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
        self._ends: dict[str, list[bytes]] = {}
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
        self._ends[region.table] = [r.end_key for r in kept]
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
        self._ends.pop(table, None)

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

    def group(self, table: str, mutations: Sequence[_Keyed],
              pending: Sequence[int]) -> tuple[list[tuple[Region, list[int]]], list[int]]:
        """``pending`` (positions in ``mutations``) by the cached region holding each one's row, as
        :meth:`locate` finds it: ``(region, positions)`` in the order the regions are first met, positions in
        ``pending`` order; and the positions no cached region holds. By the compiled form
        (``_multiwire.c``'s ``group``) when it is in use, else :func:`group_python` (its reference)."""
        starts, ends = self._starts.get(table, []), self._ends.get(table, [])
        got = None if COMPILED_GROUP is None else COMPILED_GROUP(starts, ends, mutations, pending)
        found, holes = got if got is not None else group_python(starts, ends, mutations, pending)
        regions = self._regions.get(table, [])
        return [(regions[k], positions) for k, positions in found.items()], holes

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


def group_python(starts: Sequence[bytes], ends: Sequence[bytes], mutations: Sequence[_Keyed],
                 pending: Sequence[int]) -> Grouped:
    """The reference of ``_multiwire.c``'s ``group``: each position ``i`` of ``pending`` goes to the region
    ``k = bisect_right(starts, mutations[i].row) - 1`` when ``k >= 0`` and the row is below ``ends[k]``
    (``b""``: an open end), else to the holes. Returns ``({k: positions}, holes)``, the dict in first-seen
    order. A position outside ``mutations`` raises IndexError."""
    found: dict[int, list[int]] = {}
    holes: list[int] = []
    for i in pending:
        if not 0 <= i < len(mutations):
            raise IndexError(f"position {i} is outside the {len(mutations)} mutations")
        row = mutations[i].row
        k = bisect.bisect_right(starts, row) - 1
        if k >= 0 and (not ends[k] or row < ends[k]):
            found.setdefault(k, []).append(i)
        else:
            holes.append(i)
    return found, holes


_MULTIWIRE = compiled.load("connectors.hbase.native._multiwire", Path(__file__).with_name("_multiwire.c"))
#: the compiled grouping (``_multiwire.c``'s ``group``), None when it is not in use
COMPILED_GROUP = None if _MULTIWIRE is None else _MULTIWIRE.group
