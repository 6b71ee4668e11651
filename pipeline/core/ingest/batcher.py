"""Batching of mutations per region server (or per region): decide when a batch is ready; the
caller writes it.

One batch is open per ``(table, group)``, where the group is the region server hosting the row's
region (``by="server"``, the default: one batch may hold rows of many regions, and HBase's client in
the gateway splits a ``putMultiple`` into one call per server anyway) or the region itself
(``by="region"``, keyed by its start key). Per server, a batch's size does not shrink as a table's
region count grows. A batch is sealed and handed back when:

- it holds ``max_rows`` mutations (``ROWS``);
- it holds ``max_bytes`` bytes (``Mutation.size``), or the next mutation would push it past
  ``max_bytes`` (``BYTES``); a single mutation larger than ``max_bytes`` travels alone;
- a mutation for a row already in the batch has a different kind (``CONFLICT``): HBase gives
  unpredictable results for a put and a delete of the same row in one batch (happybase docs), so the
  open batch is sealed first and the mutation starts a new one;
- the table's region map was replaced (``REGION_CHANGED``): every open batch of the table is sealed,
  in creation order, before the first mutation located by the new map is added (so that no batch
  names a server its rows left);
- it is ``max_age_ms`` old (``AGE``, via :meth:`RegionBatcher.due`), or the batcher is drained
  (``DRAIN``).

Guarantees: every mutation added comes out in exactly one batch; a batch never holds more than
``max_rows`` mutations, nor more than ``max_bytes`` bytes unless it holds exactly one mutation;
within a batch, mutations keep their arrival order; across batches, a row's changes are sealed in
their arrival order (a batch holding a row is sealed before any later batch holding it). Batch ids
increase with creation. A writer that never starts a batch before an earlier-sealed batch holding
one of its rows is written keeps every row's changes in order (a sealed put lands before the delete
that sealed it): :mod:`pipeline.runtime.ingest.writer` does.

Same-kind mutations of one row stay together. Two puts to the same cell without an explicit
timestamp may collapse into one version in HBase; give cells timestamps (event time) when every
version matters.

Time is passed in (``now_ms``, milliseconds); it must not go backwards: a smaller value than one
seen before is treated as the latest value seen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import attrgetter

from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import Mutation, MutationKind, Origin
from pipeline.settings import BatchBy

__all__ = ["Batch", "BatchBy", "BatcherStatistics", "RegionBatcher", "SealReason"]


_ORIGIN = attrgetter("origin")

class SealReason(Enum):
    """Why a batch was sealed (a metrics label)."""

    ROWS = "rows"
    BYTES = "bytes"
    CONFLICT = "conflict"
    REGION_CHANGED = "region_changed"
    AGE = "age"
    DRAIN = "drain"
    CAUGHT_UP = "caught_up"


@dataclass(frozen=True, slots=True)
class Batch:
    """A sealed batch of one table for one group. Treat ``mutations`` and ``regions`` as read-only.

    ``group`` is what the batcher grouped by: the region server (``host:port``) or the region's start
    key; ``server`` is the region server of its rows when sealed (by the worker's region map);
    ``regions`` counts its mutations per region name (one entry when batched by region). ``size`` is
    the sum of ``Mutation.size``; ``created_ms`` is when its first mutation arrived; ``cells`` is the
    number of cells of its mutations (the sum of ``len(m.cells)``; counted by the batcher as
    mutations arrive, so that per-batch accounting need not walk them again; 0 when a batch is built
    by hand).
    """

    id: int
    table: str
    server: str
    mutations: list[Mutation]
    size: int
    created_ms: int
    reason: SealReason
    cells: int = 0
    regions: Mapping[str, int] = field(default_factory=dict)
    group: str | bytes = ""

    @property
    def rows(self) -> int:
        """The number of mutations (a row may appear more than once)."""
        return len(self.mutations)

    def origins(self) -> Iterator[Origin]:
        """The origin of each mutation, one per mutation (feed it to ``OffsetTracker.ack_many``)."""
        return map(_ORIGIN, self.mutations)

    def __repr__(self) -> str:
        return (
            f"Batch(id={self.id}, table={self.table}, server={self.server}, regions={len(self.regions)}, "
            f"rows={len(self.mutations)}, size={self.size}, reason={self.reason.value})"
        )


@dataclass(frozen=True, slots=True)
class BatcherStatistics:
    """A snapshot: open batches, what they hold, and how many batches were sealed for each reason
    since the batcher was created."""

    open_batches: int
    pending_rows: int
    pending_bytes: int
    oldest_created_ms: int | None
    sealed: dict[SealReason, int]


class _Open:
    """An open batch. ``kind`` is the kind of all its mutations while they share one (no same-row
    conflict is then possible); ``kinds`` (row -> kind) is kept only once they do not."""

    __slots__ = ("cells", "created_ms", "id", "kind", "kinds", "mutations", "regions", "server", "size")

    def __init__(self, batch_id: int, server: str, created_ms: int, kind: MutationKind) -> None:
        self.id = batch_id
        self.server = server
        self.created_ms = created_ms
        self.mutations: list[Mutation] = []
        self.regions: dict[str, int] = {}
        self.kind: MutationKind | None = kind
        self.kinds: dict[bytes, MutationKind] = {}
        self.size = 0
        self.cells = 0

    def conflicts(self, mutation: Mutation) -> bool:
        """True when the batch holds ``mutation``'s row with another kind. Called only when
        ``mutation``'s kind is not the batch's one kind: from then on the batch keeps ``kinds``."""
        if self.kind is not None:
            self.kinds = {m.row: m.kind for m in self.mutations}
            self.kind = None
        held = self.kinds.get(mutation.row)
        return held is not None and held is not mutation.kind


class RegionBatcher:
    """Accumulates mutations per region server (``by="server"``) or per region (``by="region"``)
    and seals batches on rows, bytes, conflicts, layout changes and age.

    Raises ``ValueError`` for ``max_rows < 1``, ``max_bytes < 1``, ``max_age_ms < 0`` or another ``by``.
    """

    def __init__(self, max_rows: int, max_bytes: int, max_age_ms: int, by: BatchBy = "server") -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if max_age_ms < 0:
            raise ValueError(f"max_age_ms must be >= 0, got {max_age_ms}")
        if by not in ("server", "region"):
            raise ValueError(f"by must be 'server' or 'region', got {by!r}")
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.max_age_ms = max_age_ms
        self.by: BatchBy = by
        # Insertion order is creation order (a key is re-inserted when its batch is replaced) and
        # creation times never decrease, so the first entry is always the oldest batch.
        self._open: dict[tuple[str, str | bytes], _Open] = {}
        #: table -> the region map that located its open batches' rows
        self._layouts: dict[str, RegionMap] = {}
        self._next_id = 1
        self._now_ms: int | None = None
        self._pending_rows = 0
        self._pending_bytes = 0
        self._sealed: dict[SealReason, int] = dict.fromkeys(SealReason, 0)

    def __repr__(self) -> str:
        return (
            f"RegionBatcher(by={self.by}, open={len(self._open)}, rows={self._pending_rows}, "
            f"bytes={self._pending_bytes})"
        )

    @property
    def pending_rows(self) -> int:
        """Mutations held in open batches."""
        return self._pending_rows

    @property
    def pending_bytes(self) -> int:
        """Bytes (sum of ``Mutation.size``) held in open batches."""
        return self._pending_bytes

    def add(self, mutation: Mutation, rmap: RegionMap, now_ms: int) -> list[Batch]:
        """Add ``mutation``, located by ``rmap`` (its table's current map), and return the batches
        that became ready, in the order they must be written.

        Raises ``ValueError`` when ``rmap`` is another table's.
        """
        if mutation.table != rmap.table:
            raise ValueError(f"{mutation.table}:{mutation.row!r} located with the region map of {rmap.table!r}")
        return self._add(rmap, (mutation,), (rmap.locate(mutation.row),), now_ms)

    def add_many(self, mutations: Sequence[Mutation], maps: Mapping[str, RegionMap], now_ms: int) -> list[Batch]:
        """:meth:`add` each of ``mutations`` in turn, located by ``maps[mutation.table]``, all at
        ``now_ms``; return every batch that became ready, in the order they must be written. Raises
        ``KeyError`` naming a table that ``maps`` lacks, before adding anything.
        """
        if not mutations:
            return []
        table = mutations[0].table
        rmap = maps[table]
        if all(m.table == table for m in mutations):
            return self._add(rmap, mutations, rmap.locate_many([m.row for m in mutations]), now_ms)
        located = [(maps[m.table], m) for m in mutations]
        ready: list[Batch] = []
        for rmap, m in located:
            ready += self._add(rmap, (m,), (rmap.locate(m.row),), now_ms)
        return ready

    def _add(self, rmap: RegionMap, mutations: Sequence[Mutation], regions: Sequence[Region],
             now_ms: int) -> list[Batch]:
        """The one implementation of :meth:`add`: ``regions[i]``, of ``rmap``, holds ``mutations[i]``'s row."""
        now = self._clock(now_ms)
        table = rmap.table
        ready = self._follow(rmap)
        max_rows, max_bytes, opened, seal = self.max_rows, self.max_bytes, self._open, self._seal
        by_server = self.by == "server"
        rows = added = 0
        for mutation, region in zip(mutations, regions, strict=True):
            size = mutation.weight or mutation.size  # the weight, when set, is the size
            key = (table, region.server if by_server else region.start_key)
            batch = opened.get(key)
            if batch is not None:
                reason: SealReason | None = None
                if batch.kind is not mutation.kind and batch.conflicts(mutation):
                    reason = SealReason.CONFLICT
                elif batch.size + size > max_bytes:
                    reason = SealReason.BYTES
                if reason is not None:
                    self._pending_rows += rows
                    self._pending_bytes += added
                    rows = added = 0
                    ready.append(seal(key, reason))
                    batch = None
            if batch is None:
                batch = opened[key] = _Open(self._new_id(), region.server, now, mutation.kind)
            batch.mutations.append(mutation)
            if batch.kind is None:
                batch.kinds[mutation.row] = mutation.kind
            counts = batch.regions
            name = region.name
            counts[name] = counts.get(name, 0) + 1
            batch.size += size
            batch.cells += len(mutation.cells)
            rows += 1
            added += size
            if len(batch.mutations) >= max_rows:
                reason = SealReason.ROWS
            elif batch.size >= max_bytes:
                reason = SealReason.BYTES
            else:
                continue
            self._pending_rows += rows
            self._pending_bytes += added
            rows = added = 0
            ready.append(seal(key, reason))
        self._pending_rows += rows
        self._pending_bytes += added
        return ready

    def _follow(self, rmap: RegionMap) -> list[Batch]:
        """Make ``rmap`` its table's layout; when it replaces another map, seal every open batch of
        the table (oldest first). Returns the sealed batches."""
        table = rmap.table
        held = self._layouts.get(table)
        if held is rmap:
            return []
        self._layouts[table] = rmap
        if held is None:
            return []
        return [self._seal(key, SealReason.REGION_CHANGED) for key in list(self._open) if key[0] == table]

    def due(self, now_ms: int) -> list[Batch]:
        """Seal and return, oldest first, every batch with ``now_ms - created_ms >= max_age_ms``."""
        now = self._clock(now_ms)
        ready: list[Batch] = []
        while self._open:
            key, batch = next(iter(self._open.items()))
            if now - batch.created_ms < self.max_age_ms:
                break
            ready.append(self._seal(key, SealReason.AGE))
        return ready

    def next_deadline(self) -> int | None:
        """The earliest ``now_ms`` at which :meth:`due` returns a batch, or None when nothing is
        open. The caller sleeps until then (or until the next add)."""
        for batch in self._open.values():
            return batch.created_ms + self.max_age_ms
        return None

    def drain(self, reason: SealReason = SealReason.DRAIN) -> list[Batch]:
        """Seal and return every open batch, oldest first (shutdown, revocation; ``CAUGHT_UP``: the
        worker read everything Kafka delivered so far)."""
        return [self._seal(key, reason) for key in list(self._open)]

    def statistics(self) -> BatcherStatistics:
        oldest = next((b.created_ms for b in self._open.values()), None)
        return BatcherStatistics(
            open_batches=len(self._open),
            pending_rows=self._pending_rows,
            pending_bytes=self._pending_bytes,
            oldest_created_ms=oldest,
            sealed=dict(self._sealed),
        )

    def _clock(self, now_ms: int) -> int:
        if self._now_ms is None or now_ms > self._now_ms:
            self._now_ms = now_ms
        return self._now_ms

    def _new_id(self) -> int:
        batch_id = self._next_id
        self._next_id += 1
        return batch_id

    def _seal(self, key: tuple[str, str | bytes], reason: SealReason) -> Batch:
        batch = self._open.pop(key)
        self._pending_rows -= len(batch.mutations)
        self._pending_bytes -= batch.size
        self._sealed[reason] += 1
        return Batch(
            id=batch.id,
            table=key[0],
            server=batch.server,
            mutations=batch.mutations,
            size=batch.size,
            created_ms=batch.created_ms,
            reason=reason,
            cells=batch.cells,
            regions=batch.regions,
            group=key[1],
        )
