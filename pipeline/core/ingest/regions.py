"""Where a row lives: the region layout of one table, as reported by HBase.

A region holds the rows ``start_key <= row < end_key`` (start inclusive, end exclusive, plain
unsigned byte order). An empty ``start_key`` means "from the first row" and an empty ``end_key``
means "to the end of the table". The regions of a table tile its keyspace: the first starts at
``b""``, the last ends at ``b""``, and each region ends exactly where the next one starts.

:class:`RegionMaps` holds one worker's maps, table -> :class:`RegionMap`: everyone reads it as a
mapping (the batcher, the flush timer, the metrics); :meth:`RegionMaps.replace` is its one change.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pipeline.errors import RegionMapStale

__all__ = ["Region", "RegionMap", "RegionMaps"]


@dataclass(frozen=True, slots=True)
class Region:
    """One region of ``table``: rows in ``[start_key, end_key)``; ``end_key == b""`` is the end of
    the table. ``server`` is the region server as ``host:port``; ``name`` is HBase's region name
    (unique per region, changes on split and merge); ``region_id`` is HBase's numeric region id."""

    table: str
    start_key: bytes
    end_key: bytes
    server: str
    name: str
    region_id: int = 0

    def contains(self, row: bytes) -> bool:
        """True when ``start_key <= row`` and (``end_key == b""`` or ``row < end_key``)."""
        return self.start_key <= row and (not self.end_key or row < self.end_key)

    def __str__(self) -> str:
        return f"{self.table}[{self.start_key!r}, {self.end_key!r})@{self.server}"


class RegionMap:
    """The regions of one table, sorted by start key, with O(log n) row lookup.

    Raises ``ValueError`` when ``regions`` mix tables, and
    :class:`~pipeline.errors.RegionMapStale` (retryable: refresh, then retry) when they do not tile
    the keyspace: empty list, first start not ``b""``, last end not ``b""``, a hole or an overlap
    between neighbours, an empty ``end_key`` before the last region, or ``start_key >= end_key``.
    Such a list is typically a snapshot taken in the middle of a split or merge.
    """

    __slots__ = ("_regions", "_starts", "_table")

    def __init__(self, regions: Iterable[Region]) -> None:
        ordered = sorted(regions, key=lambda r: r.start_key)
        if not ordered:
            raise RegionMapStale("region map is empty: the table has no regions")
        table = ordered[0].table
        for region in ordered:
            if region.table != table:
                raise ValueError(
                    f"a region map holds one table: got {region.table!r} and {table!r}"
                )
        _check_tiling(table, ordered)
        self._table = table
        self._regions = tuple(ordered)
        self._starts = [r.start_key for r in ordered]

    @property
    def table(self) -> str:
        return self._table

    @property
    def regions(self) -> tuple[Region, ...]:
        """The regions in start-key order."""
        return self._regions

    @property
    def servers(self) -> frozenset[str]:
        """The distinct region servers hosting the table."""
        return frozenset(r.server for r in self._regions)

    def __len__(self) -> int:
        return len(self._regions)

    def __iter__(self) -> Iterator[Region]:
        return iter(self._regions)

    def __repr__(self) -> str:
        return (
            f"RegionMap(table={self._table!r}, regions={len(self._regions)}, "
            f"servers={len(self.servers)})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RegionMap):
            return NotImplemented
        return self._regions == other._regions

    def __hash__(self) -> int:
        return hash(self._regions)

    def locate(self, row: bytes) -> Region:
        """The region holding ``row`` (O(log n)). Every row has one, since the regions tile the
        keyspace."""
        # The first start key is b"" <= any row, so the index is never -1.
        return self._regions[bisect_right(self._starts, row) - 1]

    def locate_many(self, rows: Iterable[bytes]) -> list[Region]:
        """:meth:`locate` of each row, in order."""
        starts, regions = self._starts, self._regions
        return [regions[bisect_right(starts, row) - 1] for row in rows]

    def by_server(self) -> dict[str, tuple[Region, ...]]:
        """The regions grouped by server, each group in start-key order, servers sorted."""
        groups: dict[str, list[Region]] = {}
        for region in self._regions:
            groups.setdefault(region.server, []).append(region)
        return {server: tuple(groups[server]) for server in sorted(groups)}


def _check_tiling(table: str, ordered: list[Region]) -> None:
    def stale(message: str) -> RegionMapStale:
        return RegionMapStale(
            f"regions of {table!r} do not tile the keyspace: {message}", table=table
        )

    if ordered[0].start_key != b"":
        raise stale(f"first region starts at {ordered[0].start_key!r}, expected b''")
    if ordered[-1].end_key != b"":
        raise stale(f"last region ends at {ordered[-1].end_key!r}, expected b''")
    for i, region in enumerate(ordered):
        if i < len(ordered) - 1:
            if region.end_key == b"":
                raise stale(f"region {region.name!r} ends the table but is not the last one")
            if region.start_key >= region.end_key:
                raise stale(
                    f"region {region.name!r} is empty or inverted: "
                    f"[{region.start_key!r}, {region.end_key!r})"
                )
            following = ordered[i + 1]
            if region.end_key != following.start_key:
                kind = "hole" if region.end_key < following.start_key else "overlap"
                raise stale(
                    f"{kind} between {region.name!r} (ends {region.end_key!r}) and "
                    f"{following.name!r} (starts {following.start_key!r})"
                )


class RegionMaps(Mapping[str, RegionMap]):
    """The region maps of the tables one worker writes: a read-only mapping, table -> map, whose only
    change is :meth:`replace` (a map loaded at start-up, or refreshed after a split or a move).
    A table's map object changes only when its layout does: the batcher tells a layout change by the
    map's identity."""

    def __init__(self) -> None:
        self._maps: dict[str, RegionMap] = {}

    def __getitem__(self, table: str) -> RegionMap:
        return self._maps[table]

    def __iter__(self) -> Iterator[str]:
        return iter(self._maps)

    def __len__(self) -> int:
        return len(self._maps)

    def replace(self, table: str, new: RegionMap) -> bool:
        """Make ``new`` the map of ``table`` when it differs from the one before (or is the first), and
        return True; an equal ``new`` leaves the map object in place and returns False."""
        if self._maps.get(table) == new:
            return False
        self._maps[table] = new
        return True
