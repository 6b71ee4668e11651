"""Mutations HBase refuses (pipeline.runtime.ingest.writer): written again one by one, the refused
ones rejected; when the sink says which were applied (a native ``Multi`` answers per action), only
the others are written again, and the applied ones count as written."""

from __future__ import annotations

from connectors.memory import MemoryHBase
from pipeline.core.ingest.batcher import Batch, SealReason
from pipeline.core.ingest.regions import RegionMaps
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.runtime.ingest.observer import Observer
from pipeline.runtime.ingest.writer import BatchWriter, load_region_map
from pipeline.settings import load_settings

TP = TopicPartition("events", 0)


class Counted(Observer):
    def __init__(self) -> None:
        self.rows = 0

    def batch_written(self, table: str, regions: object, server: str, rows: int, size: int, seconds: float) -> None:
        self.rows += rows


async def _write(per_action: bool) -> tuple[MemoryHBase, list[bytes], int]:
    """A batch of 10 rows, rows 3 and 7 in a family the table lacks: the twin, the rows rejected, the
    rows counted as written."""
    hbase = MemoryHBase()
    hbase.add_table("t", families=["f"])
    hbase.per_action = per_action
    ms = [Mutation("t", b"r%d" % i, MutationKind.PUT, {(b"g:q" if i in (3, 7) else b"f:q"): b"v"}, 10 + i,
                   Origin(TP, i)) for i in range(10)]
    maps = RegionMaps()
    maps.replace("t", await load_region_map(hbase, "t"))
    rejected: list[bytes] = []

    async def reject(m: Mutation, reason: str) -> None:
        assert "NoSuchColumnFamilyException" in reason
        rejected.append(m.row)

    observer = Counted()
    w = BatchWriter(hbase, load_settings(None).writer, maps, observer, reject)
    await w.write(Batch(1, "t", "s:1", ms, sum(m.size for m in ms), 0, SealReason.ROWS, 10, {"t,0": 10}, "s:1"))
    return hbase, rejected, observer.rows


async def test_a_refused_batch_is_written_again_row_by_row() -> None:
    hbase, rejected, written = await _write(per_action=False)
    assert rejected == [b"r3", b"r7"] and written == 8
    assert hbase.row_count("t") == 8
    assert hbase.writes == 1 + 10  # the batch, then each row alone


async def test_only_the_unapplied_mutations_are_written_again_when_the_sink_names_them() -> None:
    hbase, rejected, written = await _write(per_action=True)
    assert rejected == [b"r3", b"r7"] and written == 8
    assert hbase.row_count("t") == 8
    assert hbase.writes == 1 + 2  # the batch (8 applied), then the two refused ones alone
