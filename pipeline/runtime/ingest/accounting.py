"""The worker's in-flight accounting: what a consumed mutation adds to the memory budget, and what a
batch HBase acknowledged settles (acknowledgements, the budget, statistics), once per batch.

``max_in_flight_bytes`` bounds real memory, not just the bytes on the wire: a mutation counts its
wire-size estimate (``Mutation.size``) plus Python's own cost of holding it (object, dict, bytes
headers, origin), measured with tracemalloc: about 250 bytes per mutation plus 90 per cell on
CPython 3.11.

Contract: :func:`batch_footprint` of a batch sealed by :class:`~pipeline.core.ingest.batcher.RegionBatcher`
equals the sum of :func:`footprint` over its mutations (the batcher counts its cells as they
arrive), so releasing per batch returns exactly what was added per mutation, without walking the
mutations a second time.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from pipeline.core.ingest.batcher import Batch
from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.progress import Progress
from pipeline.core.model import Mutation
from pipeline.runtime.ingest.observer import Observer, WorkerStats

__all__ = ["CELL_OVERHEAD", "MUTATION_OVERHEAD", "batch_footprint", "footprint", "footprint_of", "settle_written"]

MUTATION_OVERHEAD = 250
CELL_OVERHEAD = 90


def footprint(m: Mutation) -> int:
    """What holding ``m`` counts against the in-flight budget, in bytes."""
    return m.size + MUTATION_OVERHEAD + CELL_OVERHEAD * len(m.cells)


def footprint_of(mutations: Sequence[Mutation]) -> int:
    """The sum of :func:`footprint` over ``mutations``."""
    # C-level iteration (map): the sizes are the weights the routers set, unless one is unset (0)
    weights = list(map(_WEIGHT, mutations))
    size: int = sum(weights) if 0 not in weights else sum(map(_SIZE, mutations))
    return size + MUTATION_OVERHEAD * len(mutations) + CELL_OVERHEAD * sum(map(len, map(_CELLS, mutations)))


_WEIGHT = operator.attrgetter("weight")
_SIZE = operator.attrgetter("size")
_CELLS = operator.attrgetter("cells")


def batch_footprint(batch: Batch) -> int:
    """The sum of :func:`footprint` over the batch's mutations, from the batch's own totals."""
    return batch.size + MUTATION_OVERHEAD * len(batch.mutations) + CELL_OVERHEAD * batch.cells


def settle_written(batch: Batch, tracker: OffsetTracker, progress: Progress, stats: WorkerStats,
                   observer: Observer) -> None:
    """HBase acknowledged every mutation of ``batch`` (or it refused some, and they went to the
    dead-letter topic): acknowledge their records, release their budget, count the batch."""
    tracker.ack_many(batch.origins())
    progress.release_in_flight(batch_footprint(batch))
    stats.rows_written += len(batch.mutations)
    stats.batches_written += 1
    stats.bytes_written += batch.size
    stats.rows_by_table[batch.table] += len(batch.mutations)
    observer.in_flight(progress.in_flight)
