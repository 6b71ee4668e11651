from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.batcher import Batch, RegionBatcher, SealReason
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.core.regions import Region, RegionMap

TP = TopicPartition("events", 0)
_offsets = iter(range(10**9))


def region_map(splits: list[bytes], table: str = "t") -> RegionMap:
    bounds = [b"", *splits, b""]
    return RegionMap(
        Region(table, bounds[i], bounds[i + 1], f"rs{i}:16020", f"{table},{i}")
        for i in range(len(bounds) - 1)
    )


def mut(
    row: bytes,
    kind: MutationKind = MutationKind.PUT,
    value: bytes = b"v",
    table: str = "t",
) -> Mutation:
    cells = {b"f:q": value} if kind is not MutationKind.DELETE else {}
    return Mutation(table, row, kind, cells, None, Origin(TP, next(_offsets)))


RMAP = region_map([b"m"])
LEFT, RIGHT = RMAP.regions


def test_seals_on_max_rows() -> None:
    b = RegionBatcher(max_rows=3, max_bytes=10**6, max_age_ms=1000)
    assert b.add(mut(b"a"), LEFT, 0) == []
    assert b.add(mut(b"z"), RIGHT, 0) == []
    assert b.add(mut(b"b"), LEFT, 1) == []
    (ready,) = b.add(mut(b"c"), LEFT, 2)
    assert ready.reason is SealReason.ROWS
    assert [m.row for m in ready.mutations] == [b"a", b"b", b"c"]
    assert ready.region is LEFT
    assert ready.table == "t"
    assert ready.rows == 3
    assert ready.created_ms == 0
    assert ready.size == sum(m.size for m in ready.mutations)
    assert b.pending_rows == 1
    assert b.pending_bytes == mut(b"z").size


def test_seals_before_exceeding_max_bytes_and_oversized_goes_alone() -> None:
    small = mut(b"a").size
    b = RegionBatcher(max_rows=100, max_bytes=small * 2 + 1, max_age_ms=1000)
    assert b.add(mut(b"a"), LEFT, 0) == []
    assert b.add(mut(b"b"), LEFT, 0) == []
    (first,) = b.add(mut(b"c"), LEFT, 0)  # would make 3 * small > max_bytes
    assert first.reason is SealReason.BYTES
    assert [m.row for m in first.mutations] == [b"a", b"b"]
    big = mut(b"d", value=b"x" * 1000)
    sealed_small, alone = b.add(big, LEFT, 0)
    assert [m.row for m in sealed_small.mutations] == [b"c"]
    assert alone.mutations == [big]
    assert alone.reason is SealReason.BYTES
    assert sealed_small.id < alone.id
    assert b.pending_rows == 0
    assert b.pending_bytes == 0


def test_exact_byte_fill_seals() -> None:
    m = mut(b"a")
    b = RegionBatcher(max_rows=100, max_bytes=m.size * 2, max_age_ms=1000)
    b.add(m, LEFT, 0)
    (ready,) = b.add(mut(b"b"), LEFT, 0)
    assert ready.reason is SealReason.BYTES
    assert ready.rows == 2


def test_put_then_delete_of_same_row_is_split_across_batches() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=1000)
    b.add(mut(b"a"), LEFT, 0)
    b.add(mut(b"b"), LEFT, 0)
    assert b.add(mut(b"a"), LEFT, 0) == []  # same kind, same row: stays
    (sealed,) = b.add(mut(b"a", MutationKind.DELETE), LEFT, 0)
    assert sealed.reason is SealReason.CONFLICT
    assert [m.row for m in sealed.mutations] == [b"a", b"b", b"a"]
    (rest,) = b.drain()
    assert [(m.row, m.kind) for m in rest.mutations] == [(b"a", MutationKind.DELETE)]
    assert rest.reason is SealReason.DRAIN
    assert sealed.id < rest.id


def test_region_change_seals_the_open_batch() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=1000)
    b.add(mut(b"a"), LEFT, 0)
    daughter = region_map([b"g", b"m"]).regions[0]  # same start key, new end key
    (sealed,) = b.add(mut(b"b"), daughter, 0)
    assert sealed.reason is SealReason.REGION_CHANGED
    assert sealed.region is LEFT
    (rest,) = b.drain()
    assert rest.region is daughter


def test_add_rejects_a_region_that_does_not_hold_the_row() -> None:
    b = RegionBatcher(max_rows=10, max_bytes=10**6, max_age_ms=1000)
    with pytest.raises(ValueError, match="does not belong"):
        b.add(mut(b"z"), LEFT, 0)
    with pytest.raises(ValueError, match="does not belong"):
        b.add(mut(b"a", table="other"), LEFT, 0)


def test_age_deadline_and_due() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=50)
    assert b.next_deadline() is None
    assert b.due(0) == []
    b.add(mut(b"a"), LEFT, 100)
    b.add(mut(b"z"), RIGHT, 120)
    b.add(mut(b"b"), LEFT, 130)  # does not refresh the left batch's age
    assert b.next_deadline() == 150
    assert b.due(149) == []
    (left,) = b.due(150)
    assert left.region is LEFT
    assert left.reason is SealReason.AGE
    assert left.rows == 2
    assert b.next_deadline() == 170
    (right,) = b.due(500)
    assert right.region is RIGHT
    assert b.next_deadline() is None


def test_clock_going_backwards_is_clamped() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=50)
    b.add(mut(b"a"), LEFT, 100)
    b.add(mut(b"z"), RIGHT, 90)  # treated as 100
    assert b.next_deadline() == 150
    assert len(b.due(150)) == 2


def test_drain_returns_everything_oldest_first_and_statistics() -> None:
    b = RegionBatcher(max_rows=2, max_bytes=10**6, max_age_ms=50)
    b.add(mut(b"z"), RIGHT, 1)
    b.add(mut(b"a"), LEFT, 2)
    b.add(mut(b"b"), LEFT, 3)  # seals on rows
    b.add(mut(b"c"), LEFT, 4)
    stats = b.statistics()
    assert stats.open_batches == 2
    assert stats.pending_rows == 2
    assert stats.oldest_created_ms == 1
    assert stats.sealed[SealReason.ROWS] == 1
    drained = b.drain()
    assert [bt.region for bt in drained] == [RIGHT, LEFT]
    assert b.pending_rows == 0
    assert b.drain() == []
    assert b.statistics().sealed[SealReason.DRAIN] == 2
    assert "open=0" in repr(b)
    assert "rows=1" in repr(drained[0])


def test_validation() -> None:
    with pytest.raises(ValueError, match="max_rows must be >= 1"):
        RegionBatcher(0, 1, 1)
    with pytest.raises(ValueError, match="max_bytes must be >= 1"):
        RegionBatcher(1, 0, 1)
    with pytest.raises(ValueError, match="max_age_ms must be >= 0"):
        RegionBatcher(1, 1, -1)


ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.binary(min_size=1, max_size=2),
            st.sampled_from([MutationKind.PUT, MutationKind.DELETE]),
            st.integers(min_value=0, max_value=120),  # value length
            st.integers(min_value=0, max_value=30),  # time step
        ),
        st.tuples(st.just("due"), st.integers(min_value=0, max_value=100)),
    ),
    max_size=120,
)


@settings(max_examples=150)
@given(
    splits=st.lists(st.binary(min_size=1, max_size=2), unique=True, max_size=6),
    max_rows=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=20, max_value=400),
    max_age_ms=st.integers(min_value=0, max_value=100),
    ops=ops,
)
def test_property_every_mutation_out_exactly_once_within_bounds(
    splits: list[bytes],
    max_rows: int,
    max_bytes: int,
    max_age_ms: int,
    ops: list[tuple],  # type: ignore[type-arg]
) -> None:
    rmap = region_map(sorted(splits))
    b = RegionBatcher(max_rows, max_bytes, max_age_ms)
    added: list[Mutation] = []
    out: list[Batch] = []
    now = 0
    for op in ops:
        if op[0] == "add":
            _, row, kind, vlen, step = op
            now += step
            m = Mutation("t", row, kind, {b"f:q": b"x" * vlen}, None, Origin(TP, len(added)))
            added.append(m)
            out.extend(b.add(m, rmap.locate(row), now))
        else:
            now += op[1]
            deadline = b.next_deadline()
            due = b.due(now)
            assert all(now - x.created_ms >= max_age_ms for x in due)
            assert bool(due) == (deadline is not None and deadline <= now)
            after = b.next_deadline()
            assert after is None or after > now
            out.extend(due)
        assert b.pending_rows == len(added) - sum(x.rows for x in out)
    out.extend(b.drain())
    assert b.pending_rows == 0 and b.pending_bytes == 0

    emitted = [m.origin.offset for x in out for m in x.mutations]
    assert sorted(emitted) == list(range(len(added)))
    ids = [x.id for x in out]
    assert len(set(ids)) == len(ids)
    for x in out:
        assert 1 <= x.rows <= max_rows
        assert x.size == sum(m.size for m in x.mutations)
        assert x.cells == sum(len(m.cells) for m in x.mutations)
        assert x.size <= max_bytes or x.rows == 1
        assert all(x.region.contains(m.row) for m in x.mutations)
        kinds: dict[bytes, MutationKind] = {}
        for m in x.mutations:
            assert kinds.setdefault(m.row, m.kind) is m.kind
    # Per region, batches in id order replay the arrival order.
    for region in rmap:
        in_region = sorted((x for x in out if x.region == region), key=lambda x: x.id)
        got = [m.origin.offset for x in in_region for m in x.mutations]
        assert got == [m.origin.offset for m in added if region.contains(m.row)]


def test_add_many_locates_each_row_and_seals_as_add_does() -> None:
    other = region_map([b"k"], table="u")
    maps = {"t": RMAP, "u": other}
    muts = [mut(b"a"), mut(b"z"), mut(b"a", table="u"), mut(b"b", MutationKind.DELETE), mut(b"b"), mut(b"z", table="u")]
    one, many = RegionBatcher(3, 10**6, 100), RegionBatcher(3, 10**6, 100)
    expected = [x for m in muts for x in one.add(m, maps[m.table].locate(m.row), 5)] + one.drain()
    got = many.add_many(muts, maps, 5) + many.drain()
    assert [(x.id, x.region, x.reason, x.mutations) for x in got] == \
        [(x.id, x.region, x.reason, x.mutations) for x in expected]
    assert [x.reason for x in got if x.reason is not SealReason.DRAIN] == [SealReason.CONFLICT]
    with pytest.raises(KeyError):
        many.add_many([mut(b"a", table="v")], maps, 6)
    assert many.pending_rows == 0


def test_a_second_kind_in_a_batch_conflicts_only_on_a_row_it_holds() -> None:
    b = RegionBatcher(100, 10**6, 100)
    assert b.add(mut(b"a"), LEFT, 0) == []
    assert b.add(mut(b"b", MutationKind.DELETE), LEFT, 0) == []  # another row: same batch
    assert b.add(mut(b"c", MutationKind.INCREMENT), LEFT, 0) == []
    (sealed,) = b.add(mut(b"b"), LEFT, 0)  # b is held as a delete
    assert sealed.reason is SealReason.CONFLICT and [m.row for m in sealed.mutations] == [b"a", b"b", b"c"]
    assert b.add(mut(b"b"), LEFT, 0) == []  # the new batch holds b as a put


@settings(max_examples=100)
@given(
    splits=st.lists(st.binary(min_size=1, max_size=2), unique=True, max_size=4),
    max_rows=st.integers(min_value=1, max_value=6),
    max_bytes=st.integers(min_value=20, max_value=300),
    adds=st.lists(st.tuples(st.sampled_from(["t", "u"]), st.binary(max_size=3), st.sampled_from(list(MutationKind)),
                            st.integers(min_value=0, max_value=60)), max_size=80),
    cut=st.integers(min_value=0, max_value=80),
)
def test_property_add_many_is_add_in_turn(splits: list[bytes], max_rows: int, max_bytes: int,
                                          adds: list[tuple[str, bytes, MutationKind, int]], cut: int) -> None:
    maps = {"t": region_map(sorted(splits)), "u": region_map(sorted(splits)[:1], table="u")}
    muts = [Mutation(table, row, kind, {b"f:q": b"x" * vlen}, None, Origin(TP, i))
            for i, (table, row, kind, vlen) in enumerate(adds)]
    one, many = RegionBatcher(max_rows, max_bytes, 10), RegionBatcher(max_rows, max_bytes, 10)
    expected = [x for m in muts for x in one.add(m, maps[m.table].locate(m.row), 1)]
    got = many.add_many(muts[:cut], maps, 1) + many.add_many(muts[cut:], maps, 1)
    assert (many.pending_rows, many.pending_bytes) == (one.pending_rows, one.pending_bytes)
    got += many.drain()
    expected += one.drain()
    assert [(x.id, x.region, x.reason, x.size, x.cells, x.mutations) for x in got] == \
        [(x.id, x.region, x.reason, x.size, x.cells, x.mutations) for x in expected]
