"""In-flight accounting: what a written batch releases equals what its mutations added when they
were consumed, and settling a batch acknowledges each of its records once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.ingest.batcher import RegionBatcher
from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.progress import Progress
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.runtime.ingest.accounting import batch_footprint, footprint, settle_written
from pipeline.runtime.ingest.observer import Observer, WorkerStats

TP = TopicPartition("events", 0)
RMAP = RegionMap([Region("t", b"", b"m", "rs:1", "left", 1), Region("t", b"m", b"", "rs:1", "right", 2)])


@settings(max_examples=100, deadline=None)
@given(shapes=st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 3), st.booleans()), min_size=1, max_size=60),
       max_rows=st.integers(1, 8), max_bytes=st.integers(1, 200))
def test_what_batches_release_is_what_mutations_added(shapes: list[tuple[bytes, int, bool]], max_rows: int,
                                                      max_bytes: int) -> None:
    batcher = RegionBatcher(max_rows, max_bytes, 100)
    tracker, progress, stats = OffsetTracker(), Progress(10**9), WorkerStats()
    batches = []
    for offset, (row, ncells, delete) in enumerate(shapes):
        cells = {b"f:%d" % i: b"v" * i for i in range(ncells)}
        m = Mutation("t", row, MutationKind.DELETE if delete else MutationKind.PUT, cells, None, Origin(TP, offset))
        tracker.register(m.origin, 1)
        progress.add_in_flight(footprint(m))
        batches += batcher.add(m, RMAP, 0)
    batches += batcher.drain()
    for b in batches:
        assert batch_footprint(b) == sum(footprint(m) for m in b.mutations)
        settle_written(b, tracker, progress, stats, Observer())
    assert progress.in_flight == 0
    assert tracker.committable() == {TP: len(shapes)}
    assert (stats.rows_written, stats.batches_written, stats.rows_by_table["t"]) == (len(shapes), len(batches),
                                                                                     len(shapes))
    assert tracker.statistics().stray_acks == 0
