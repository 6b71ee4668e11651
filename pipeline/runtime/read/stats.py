"""The reader's statistics: per range, per query, and totals over a reader's life.

:class:`RangeStats` and :class:`QueryStats` are live objects the running query updates (take a
snapshot with ``Scan.statistics()``); :class:`ReaderTotals` holds the reader's running counters and
:class:`ReaderStats` is their frozen snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["QueryStats", "RangeStats", "ReaderStats", "ReaderTotals"]


@dataclass(slots=True)
class RangeStats:
    """One range of one query. ``state`` is ``pending``, ``scanning``, ``done`` (exhausted or its
    share of the limit reached), ``failed`` or ``cancelled``. ``entities``: entities walked (a
    by-time query over an entity-led design; 0 otherwise)."""

    label: str
    pages: int = 0
    entities: int = 0
    rows_scanned: int = 0
    rows_matched: int = 0
    state: str = "pending"


@dataclass(slots=True)
class QueryStats:
    """A live snapshot of one query. ``scanners_opened`` counts ``scan_cells`` calls (each opens and
    closes one HBase scanner); ``rows_scanned`` counts rows fetched from HBase, ``rows_returned``
    rows yielded. ``outcome`` is ``running``, ``done``, ``limit``, ``closed`` (the caller stopped
    early), ``failed`` or ``timeout``."""

    table: str
    ranges_planned: int = 0
    per_region: bool = False
    scanners_opened: int = 0
    rows_scanned: int = 0
    rows_returned: int = 0
    elapsed_s: float = 0.0
    first_row_s: float | None = None
    outcome: str = "running"
    ranges: list[RangeStats] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReaderStats:
    """Totals over the reader's life."""

    queries_started: int
    queries_active: int
    queries_failed: int
    scanners_opened: int
    rows_scanned: int
    rows_returned: int


@dataclass(slots=True)
class ReaderTotals:
    """The reader's running counters (one event loop updates them; no locking)."""

    started: int = 0
    active: int = 0
    failed: int = 0
    scanners: int = 0
    scanned: int = 0
    returned: int = 0

    def snapshot(self) -> ReaderStats:
        return ReaderStats(self.started, self.active, self.failed, self.scanners, self.scanned,
                           self.returned)
