"""The writer's ordering contract (pipeline.runtime.ingest.writer): a batch waits for the earlier
batches of its table that hold one of its rows, whatever their region or server; batches with no row
in common run side by side."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel

from pipeline.core.ingest.batcher import Batch, SealReason
from pipeline.core.ingest.regions import RegionMaps
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.runtime.ingest.observer import Observer
from pipeline.runtime.ingest.writer import BatchWriter
from pipeline.settings import load_settings

TP = TopicPartition("events", 0)


class GatedHBase:
    """Records the order writes start and end in; a write of a batch whose first row is in ``gates``
    waits for that event."""

    def __init__(self) -> None:
        self.started: list[bytes] = []
        self.ended: list[bytes] = []
        self.gates: dict[bytes, anyio.Event] = {}

    async def write(self, table: str, mutations: Sequence[Mutation], server: str | None = None) -> str | None:
        row = mutations[0].row
        self.started.append(row)
        gate = self.gates.get(row)
        if gate is not None:
            await gate.wait()
        self.ended.append(row)
        return "gw"

    async def regions(self, table: str) -> list[object]:
        raise AssertionError("not asked for in these tests")


def batch(rows: list[bytes], group: str, batch_id: int) -> Batch:
    ms = [Mutation("t", row, MutationKind.PUT, {b"f:q": b"v"}, None, Origin(TP, batch_id)) for row in rows]
    return Batch(batch_id, "t", group, ms, sum(m.size for m in ms), 0, SealReason.ROWS, len(ms), {"t,0": len(ms)},
                 group)


def writer(hbase: GatedHBase) -> BatchWriter:
    async def reject(m: Mutation, reason: str) -> None:
        raise AssertionError(reason)

    return BatchWriter(hbase, load_settings(None).writer, RegionMaps(), Observer(), reject)  # type: ignore[arg-type]


async def _run(hbase: GatedHBase, batches: list[Batch], gate: anyio.Event, free: bytes) -> list[bytes]:
    """Write ``batches`` (entering in order); once ``free``'s batch is written and everything that
    may start has, open ``gate``. Returns the first rows of the batches started before the gate."""
    w = writer(hbase)
    async with anyio.create_task_group() as tg:
        for b in batches:
            tg.start_soon(w.write, b)
        with anyio.fail_after(5):
            while free not in hbase.ended:
                await anyio.sleep(0.001)
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        started = list(hbase.started)
        gate.set()
    return started


async def test_a_batch_waits_for_an_earlier_batch_holding_one_of_its_rows_whatever_its_server() -> None:
    hbase = GatedHBase()
    hbase.gates[b"a"] = gate = anyio.Event()
    batches = [batch([b"a", b"r"], "rs1", 1), batch([b"b"], "rs1", 2), batch([b"c", b"r"], "rs2", 3),
               batch([b"d"], "rs2", 4)]
    started = await _run(hbase, batches, gate, free=b"d")
    assert started == [b"a", b"b", b"d"]  # c shares r with a: held back; b and d (same servers) are not
    assert hbase.ended[:2] == [b"b", b"d"] and hbase.ended[2:] == [b"a", b"c"]


async def test_waiting_is_transitive_along_a_row_chain() -> None:
    hbase = GatedHBase()
    hbase.gates[b"a"] = gate = anyio.Event()
    batches = [batch([b"a", b"x"], "rs1", 1), batch([b"b", b"x", b"y"], "rs2", 2), batch([b"c", b"y"], "rs3", 3),
               batch([b"e"], "rs3", 4)]
    started = await _run(hbase, batches, gate, free=b"e")
    assert started == [b"a", b"e"]
    assert hbase.ended == [b"e", b"a", b"b", b"c"]


async def test_a_row_twice_in_one_batch_does_not_wait_for_itself() -> None:
    hbase = GatedHBase()
    w = writer(hbase)
    with anyio.fail_after(5):
        await w.write(batch([b"a", b"a"], "rs1", 1))
        await w.write(batch([b"a"], "rs1", 2))
    assert hbase.ended == [b"a", b"a"] and w._holders == {"t": {}}  # nothing left held


async def test_a_batch_that_finishes_keeps_held_the_rows_a_later_batch_took_over() -> None:
    """Batch 2 takes row x over from batch 1; when 1 is written it releases its other rows but not x,
    so a batch 3 holding x, entering after 1 finished, still waits for 2; a batch holding only a row
    1 released does not wait."""
    hbase = GatedHBase()
    hbase.gates[b"a"] = first = anyio.Event()
    hbase.gates[b"b"] = second = anyio.Event()
    w = writer(hbase)

    async def settle() -> None:
        for _ in range(20):
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.write, batch([b"a", b"x"], "rs1", 1))
            await settle()
            tg.start_soon(w.write, batch([b"b", b"x"], "rs1", 2))
            await settle()
            assert hbase.started == [b"a"]
            first.set()
            await settle()
            assert hbase.ended == [b"a"] and hbase.started == [b"a", b"b"]
            tg.start_soon(w.write, batch([b"c", b"x"], "rs1", 3))
            tg.start_soon(w.write, batch([b"d", b"a"], "rs1", 4))
            await settle()
            assert hbase.started == [b"a", b"b", b"d"]  # c waits for 2 (x); d holds a, released by 1
            assert w._holders["t"].keys() == {b"b", b"x", b"c"}
            second.set()
    assert hbase.ended == [b"a", b"d", b"b", b"c"]
    assert w._holders == {"t": {}}
