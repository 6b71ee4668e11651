from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.model import Origin, TopicPartition

TP = TopicPartition("events", 0)
TP1 = TopicPartition("events", 1)


def o(offset: int, tp: TopicPartition = TP) -> Origin:
    return Origin(tp, offset)


def test_in_order_acks_advance_the_watermark() -> None:
    t = OffsetTracker()
    for off in range(3):
        t.register(o(off), 1)
    assert t.committable() == {}
    assert t.ack(o(0))
    assert t.committable() == {TP: 1}
    t.ack_many([o(1), o(2)])
    assert t.committable() == {TP: 3}


def test_done_record_behind_a_pending_one_is_not_committable() -> None:
    t = OffsetTracker()
    for off in (10, 11, 12):
        t.register(o(off), 1)
    t.ack(o(12))
    t.ack(o(10))
    # 11 still pending: commit up to 11 (the next offset to read), not past it.
    assert t.committable() == {TP: 11}
    t.ack(o(11))
    assert t.committable() == {TP: 13}


def test_gaps_in_offsets_do_not_block() -> None:
    t = OffsetTracker()
    for off in (5, 7, 9):
        t.register(o(off), 1)
    t.ack_many([o(9), o(7)])
    assert t.committable() == {}
    t.ack(o(5))
    assert t.committable() == {TP: 10}


def test_several_acks_per_record() -> None:
    t = OffsetTracker()
    t.register(o(0), 3)
    t.ack(o(0))
    t.ack(o(0))
    assert t.committable() == {}
    snap = t.pending(TP)
    assert snap is not None
    assert snap.pending_acks == 1
    assert snap.oldest_pending == 0
    t.ack(o(0))
    assert t.committable() == {TP: 1}


def test_zero_pending_is_done_at_once_even_behind_a_pending_record() -> None:
    t = OffsetTracker()
    t.register(o(0), 0)
    assert t.committable() == {TP: 1}
    t.register(o(1), 1)
    t.register(o(2), 0)
    assert t.committable() == {TP: 1}
    t.ack(o(1))
    assert t.committable() == {TP: 3}


def test_mark_committed_hides_until_the_watermark_moves_and_never_goes_back() -> None:
    t = OffsetTracker()
    t.register(o(0), 1)
    t.register(o(1), 1)
    t.ack(o(0))
    t.mark_committed(TP, 1)
    assert t.committable() == {}
    t.mark_committed(TP, 0)  # a late callback cannot move the mark back
    assert t.committable() == {}
    t.ack(o(1))
    assert t.committable() == {TP: 2}
    t.mark_committed(TP, 2)
    assert t.committable() == {}
    snap = t.pending(TP)
    assert snap is not None
    assert snap.committed == 2
    assert snap.commit_lag == 0


def test_mark_committed_at_assignment_suppresses_older_watermarks() -> None:
    t = OffsetTracker()
    t.mark_committed(TP, 100)
    t.register(o(90), 1)
    t.ack(o(90))
    assert t.committable() == {}
    t.register(o(100), 1)
    t.ack(o(100))
    assert t.committable() == {TP: 101}


def test_forget_drops_state_and_later_acks_are_ignored() -> None:
    t = OffsetTracker()
    t.register(o(0), 1)
    t.register(o(0, TP1), 1)
    snap = t.forget(TP)
    assert snap is not None
    assert snap.pending_records == 1
    assert t.forget(TP) is None
    assert not t.ack(o(0))
    assert t.committable() == {}
    assert t.pending(TP) is None
    assert t.statistics().stray_acks == 1
    # The other partition is untouched, and the forgotten one can come back.
    assert t.ack(o(0, TP1))
    assert t.committable() == {TP1: 1}
    t.register(o(0), 1)
    t.ack(o(0))
    assert t.committable() == {TP: 1, TP1: 1}


def test_stray_acks_on_a_live_partition_are_counted_not_applied() -> None:
    t = OffsetTracker()
    t.register(o(3), 1)
    assert not t.ack(o(2))
    assert t.ack(o(3))
    assert not t.ack(o(3))
    assert t.statistics().stray_acks == 2
    assert t.committable() == {TP: 4}


def test_register_rejects_bad_input() -> None:
    t = OffsetTracker()
    with pytest.raises(ValueError, match="pending"):
        t.register(o(0), -1)
    t.register(o(5), 1)
    with pytest.raises(ValueError, match="increasing"):
        t.register(o(5), 1)
    with pytest.raises(ValueError, match="increasing"):
        t.register(o(4), 1)


def test_statistics_snapshot() -> None:
    t = OffsetTracker()
    for off in range(4):
        t.register(o(off), 2)
    t.ack_many([o(0), o(0), o(2), o(2), o(3)])
    stats = t.statistics()
    part = stats.partitions[TP]
    assert part.registered == 4
    assert part.done == 2
    assert part.pending_records == 2
    assert part.pending_acks == 3
    assert part.oldest_pending == 1
    assert part.last_registered == 3
    assert part.committable == 1
    assert part.committed is None
    assert part.commit_lag is None
    assert stats.pending_records == 2
    assert stats.pending_acks == 3
    assert t.partitions == frozenset({TP})
    assert "pending_records=2" in repr(t)


def _expected_next(offsets: list[int], remaining: dict[int, int]) -> int | None:
    nxt = None
    for off in offsets:
        if remaining[off] > 0:
            break
        nxt = off + 1
    return nxt


records = st.lists(
    st.tuples(st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=3)),
    min_size=1,
    max_size=40,
)


@given(records=records, data=st.data())
def test_property_watermark_never_passes_the_first_pending_offset(
    records: list[tuple[int, int]], data: st.DataObject
) -> None:
    offsets: list[int] = []
    pending: dict[int, int] = {}
    off = data.draw(st.integers(min_value=0, max_value=1000))
    for gap, n in records:
        off += gap
        offsets.append(off)
        pending[off] = n
    t = OffsetTracker()
    remaining: dict[int, int] = {}
    registered = 0
    acks_outstanding: list[int] = []
    # Interleave registrations (in offset order) with acks of anything registered so far.
    while registered < len(offsets) or acks_outstanding:
        register = registered < len(offsets) and (not acks_outstanding or data.draw(st.booleans()))
        if register:
            offset = offsets[registered]
            t.register(Origin(TP, offset), pending[offset])
            remaining[offset] = pending[offset]
            acks_outstanding.extend([offset] * pending[offset])
            registered += 1
        else:
            i = data.draw(st.integers(min_value=0, max_value=len(acks_outstanding) - 1))
            offset = acks_outstanding.pop(i)
            assert t.ack(Origin(TP, offset))
            remaining[offset] -= 1
        done_so_far = offsets[:registered]
        expected = _expected_next(done_so_far, remaining)
        got = t.committable().get(TP)
        assert got == expected
        first_pending = next((x for x in done_so_far if remaining[x] > 0), None)
        if got is not None and first_pending is not None:
            assert got <= first_pending
    assert t.committable() == {TP: offsets[-1] + 1}
    stats = t.statistics()
    assert stats.pending_records == 0
    assert stats.pending_acks == 0
    assert stats.partitions[TP].done == len(offsets)


@given(
    a=st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=20),
    b=st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=20),
    order=st.randoms(use_true_random=False),
)
def test_property_partitions_are_independent(
    a: list[int], b: list[int], order: random.Random
) -> None:
    t = OffsetTracker()
    acks: list[Origin] = []
    for tp, counts in ((TP, a), (TP1, b)):
        for off, n in enumerate(counts):
            t.register(Origin(tp, off), n)
            acks.extend([Origin(tp, off)] * n)
    order.shuffle(acks)
    assert t.ack_many(acks) == len(acks)
    assert t.committable() == {TP: len(a), TP1: len(b)}


@given(
    runs=st.lists(st.tuples(st.lists(st.integers(min_value=1, max_value=3), max_size=6), st.integers(0, 2)),
                  max_size=6),
    order=st.randoms(use_true_random=False),
)
def test_property_a_run_registers_as_its_records_one_by_one(runs: list[tuple[list[int], int]],
                                                          order: random.Random) -> None:
    one, many = OffsetTracker(), OffsetTracker()
    off, acks = -1, []
    for gaps, pending in runs:
        offsets = []
        for gap in gaps:
            off += gap
            offsets.append(off)
            one.register(Origin(TP, off), pending)
            acks.extend([Origin(TP, off)] * pending)
        many.register_run(TP, offsets, pending)
        assert many.statistics() == one.statistics()
    order.shuffle(acks)
    for i in range(0, len(acks), 3):
        assert one.ack_many(acks[i:i + 3]) == many.ack_many(acks[i:i + 3])
        assert many.statistics() == one.statistics() and many.committable() == one.committable()


def test_a_run_out_of_order_is_refused_whole() -> None:
    t = OffsetTracker()
    t.register_run(TP, [3, 5], 1)
    for bad in ([5, 6], [6, 6], [7, 6]):
        with pytest.raises(ValueError, match="increasing order"):
            t.register_run(TP, bad, 1)
    with pytest.raises(ValueError, match="pending must be >= 0"):
        t.register_run(TP, [9], -1)
    assert t.statistics().partitions[TP].registered == 2 and t.statistics().partitions[TP].last_registered == 5


def test_register_run_takes_a_range_as_it_takes_a_list() -> None:
    a, b = OffsetTracker(), OffsetTracker()
    a.register_run(TP, range(5, 9), 2)
    b.register_run(TP, [5, 6, 7, 8], 2)
    for t in (a, b):
        t.ack_many([Origin(TP, 5), Origin(TP, 5), Origin(TP, 6)])
    assert a.pending(TP) == b.pending(TP) and a.committable() == b.committable() == {TP: 6}
    with pytest.raises(ValueError, match="increasing"):
        a.register_run(TP, range(8, 12), 1)


TP2 = TopicPartition("never-registered", 0)


@given(
    pendings=st.lists(st.tuples(st.sampled_from([TP, TP1]), st.integers(0, 3)), max_size=30),
    picks=st.lists(st.tuples(st.sampled_from([TP, TP1, TP2]), st.integers(-1, 31)), max_size=60),
    sort=st.booleans(),
    cuts=st.lists(st.integers(1, 12), min_size=1, max_size=8),
)
def test_property_ack_many_is_ack_one_by_one(pendings: list[tuple[TopicPartition, int]],
                                             picks: list[tuple[TopicPartition, int]], sort: bool,
                                             cuts: list[int]) -> None:
    """Batches of acknowledgements (runs of one partition or mixed; repeats, strays, records awaiting
    more than one, partitions never registered): :meth:`ack_many` leaves the state and returns the
    count that :meth:`ack` for each in turn gives."""
    one, many = OffsetTracker(), OffsetTracker()
    nxt = {TP: 0, TP1: 0}
    for tp, pending in pendings:
        for t in (one, many):
            t.register(Origin(tp, nxt[tp]), pending)
        nxt[tp] += 1
    acks = [Origin(tp, off) for tp, off in picks]
    if sort:  # a batch's shape: runs of one partition, offsets increasing
        acks.sort(key=lambda o: (o.tp.partition, o.tp.topic, o.offset))
    i = 0
    for cut in cuts * 8:
        batch = acks[i:i + cut]
        i += cut
        assert many.ack_many(batch) == sum(one.ack(o) for o in batch)
        assert many.statistics() == one.statistics() and many.committable() == one.committable()
