from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.ingest.batcher import Batch, BatchBy, RegionBatcher, SealReason
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition

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
    assert b.add(mut(b"a"), RMAP, 0) == []
    assert b.add(mut(b"z"), RMAP, 0) == []
    assert b.add(mut(b"b"), RMAP, 1) == []
    (ready,) = b.add(mut(b"c"), RMAP, 2)
    assert ready.reason is SealReason.ROWS
    assert [m.row for m in ready.mutations] == [b"a", b"b", b"c"]
    assert ready.regions == {LEFT.name: 3} and ready.server == LEFT.server and ready.group == LEFT.server
    assert ready.table == "t"
    assert ready.rows == 3
    assert ready.created_ms == 0
    assert ready.size == sum(m.size for m in ready.mutations)
    assert b.pending_rows == 1
    assert b.pending_bytes == mut(b"z").size


def test_seals_before_exceeding_max_bytes_and_oversized_goes_alone() -> None:
    small = mut(b"a").size
    b = RegionBatcher(max_rows=100, max_bytes=small * 2 + 1, max_age_ms=1000)
    assert b.add(mut(b"a"), RMAP, 0) == []
    assert b.add(mut(b"b"), RMAP, 0) == []
    (first,) = b.add(mut(b"c"), RMAP, 0)  # would make 3 * small > max_bytes
    assert first.reason is SealReason.BYTES
    assert [m.row for m in first.mutations] == [b"a", b"b"]
    big = mut(b"d", value=b"x" * 1000)
    sealed_small, alone = b.add(big, RMAP, 0)
    assert [m.row for m in sealed_small.mutations] == [b"c"]
    assert alone.mutations == [big]
    assert alone.reason is SealReason.BYTES
    assert sealed_small.id < alone.id
    assert b.pending_rows == 0
    assert b.pending_bytes == 0


def test_exact_byte_fill_seals() -> None:
    m = mut(b"a")
    b = RegionBatcher(max_rows=100, max_bytes=m.size * 2, max_age_ms=1000)
    b.add(m, RMAP, 0)
    (ready,) = b.add(mut(b"b"), RMAP, 0)
    assert ready.reason is SealReason.BYTES
    assert ready.rows == 2


def test_put_then_delete_of_same_row_is_split_across_batches() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=1000)
    b.add(mut(b"a"), RMAP, 0)
    b.add(mut(b"b"), RMAP, 0)
    assert b.add(mut(b"a"), RMAP, 0) == []  # same kind, same row: stays
    (sealed,) = b.add(mut(b"a", MutationKind.DELETE), RMAP, 0)
    assert sealed.reason is SealReason.CONFLICT
    assert [m.row for m in sealed.mutations] == [b"a", b"b", b"a"]
    (rest,) = b.drain()
    assert [(m.row, m.kind) for m in rest.mutations] == [(b"a", MutationKind.DELETE)]
    assert rest.reason is SealReason.DRAIN
    assert sealed.id < rest.id


@pytest.mark.parametrize("by", ["server", "region"])
def test_a_new_layout_seals_every_open_batch_of_its_table(by: BatchBy) -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=1000, by=by)
    other = region_map([b"k"], table="u")
    b.add(mut(b"z"), RMAP, 0)
    b.add(mut(b"a", table="u"), other, 1)
    b.add(mut(b"a"), RMAP, 2)
    assert b.add(mut(b"b"), RMAP, 3) == []  # the same map object: nothing sealed
    split = region_map([b"g", b"m"])  # a split: the same start keys and servers, new end keys
    right, left = b.add(mut(b"b"), split, 4)
    assert (right.reason, left.reason) == (SealReason.REGION_CHANGED, SealReason.REGION_CHANGED)
    assert [m.row for m in right.mutations] == [b"z"] and [m.row for m in left.mutations] == [b"a", b"b"]
    assert b.pending_rows == 2  # u's batch stays open; t's new batch holds the b
    rest = {x.table: x for x in b.drain()}
    assert rest["t"].regions == {"t,0": 1} and rest["u"].regions == {"u,0": 1}
    assert b.statistics().sealed[SealReason.REGION_CHANGED] == 2


def test_add_rejects_another_tables_map() -> None:
    b = RegionBatcher(max_rows=10, max_bytes=10**6, max_age_ms=1000)
    with pytest.raises(ValueError, match="located with the region map of 't'"):
        b.add(mut(b"a", table="other"), RMAP, 0)


def test_by_server_one_batch_holds_the_rows_of_every_region_of_a_server() -> None:
    shared = RegionMap(Region("t", lo, hi, "rs0:16020", f"t,{i}") for i, (lo, hi) in
                       enumerate([(b"", b"g"), (b"g", b"m"), (b"m", b"")]))
    per_server = RegionBatcher(max_rows=4, max_bytes=10**6, max_age_ms=1000)
    per_region = RegionBatcher(max_rows=4, max_bytes=10**6, max_age_ms=1000, by="region")
    rows = [b"a", b"h", b"z", b"b"]
    (batch,) = [x for r in rows for x in per_server.add(mut(r), shared, 0)]
    assert [m.row for m in batch.mutations] == rows
    assert batch.regions == {"t,0": 2, "t,1": 1, "t,2": 1} and batch.server == batch.group == "rs0:16020"
    assert [x for r in rows for x in per_region.add(mut(r), shared, 0)] == []
    drained = per_region.drain()
    assert [x.regions for x in drained] == [{"t,0": 2}, {"t,1": 1}, {"t,2": 1}]
    assert [x.group for x in drained] == [b"", b"g", b"m"]


def test_the_batch_groups() -> None:
    with pytest.raises(ValueError, match="by must be 'server' or 'region'"):
        RegionBatcher(1, 1, 1, by="table")  # type: ignore[arg-type]
    assert "by=server" in repr(RegionBatcher(1, 1, 1))


def test_age_deadline_and_due() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=50)
    assert b.next_deadline() is None
    assert b.due(0) == []
    b.add(mut(b"a"), RMAP, 100)
    b.add(mut(b"z"), RMAP, 120)
    b.add(mut(b"b"), RMAP, 130)  # does not refresh the left batch's age
    assert b.next_deadline() == 150
    assert b.due(149) == []
    (left,) = b.due(150)
    assert left.regions == {LEFT.name: 2}
    assert left.reason is SealReason.AGE
    assert left.rows == 2
    assert b.next_deadline() == 170
    (right,) = b.due(500)
    assert right.server == RIGHT.server
    assert b.next_deadline() is None


def test_clock_going_backwards_is_clamped() -> None:
    b = RegionBatcher(max_rows=100, max_bytes=10**6, max_age_ms=50)
    b.add(mut(b"a"), RMAP, 100)
    b.add(mut(b"z"), RMAP, 90)  # treated as 100
    assert b.next_deadline() == 150
    assert len(b.due(150)) == 2


def test_drain_returns_everything_oldest_first_and_statistics() -> None:
    b = RegionBatcher(max_rows=2, max_bytes=10**6, max_age_ms=50)
    b.add(mut(b"z"), RMAP, 1)
    b.add(mut(b"a"), RMAP, 2)
    b.add(mut(b"b"), RMAP, 3)  # seals on rows
    b.add(mut(b"c"), RMAP, 4)
    stats = b.statistics()
    assert stats.open_batches == 2
    assert stats.pending_rows == 2
    assert stats.oldest_created_ms == 1
    assert stats.sealed[SealReason.ROWS] == 1
    drained = b.drain()
    assert [bt.server for bt in drained] == [RIGHT.server, LEFT.server]
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
        # a new layout: other split keys, regions spread over 1 to 3 servers
        st.tuples(st.just("layout"), st.lists(st.binary(min_size=1, max_size=2), unique=True, max_size=5),
                  st.integers(min_value=1, max_value=3)),
    ),
    max_size=120,
)


def spread_map(splits: list[bytes], servers: int) -> RegionMap:
    bounds = [b"", *sorted(splits), b""]
    return RegionMap(Region("t", bounds[i], bounds[i + 1], f"rs{i % servers}:16020", f"t,{i}")
                     for i in range(len(bounds) - 1))


@settings(max_examples=200)
@given(
    splits=st.lists(st.binary(min_size=1, max_size=2), unique=True, max_size=6),
    servers=st.integers(min_value=1, max_value=3),
    by=st.sampled_from(["server", "region"]),
    max_rows=st.integers(min_value=1, max_value=8),
    max_bytes=st.integers(min_value=20, max_value=400),
    max_age_ms=st.integers(min_value=0, max_value=100),
    ops=ops,
)
def test_property_every_mutation_out_exactly_once_within_bounds_and_in_row_order(
    splits: list[bytes],
    servers: int,
    by: BatchBy,
    max_rows: int,
    max_bytes: int,
    max_age_ms: int,
    ops: list[tuple],  # type: ignore[type-arg]
) -> None:
    rmap = spread_map(splits, servers)
    used: list[RegionMap] = []  # the map of each added mutation
    b = RegionBatcher(max_rows, max_bytes, max_age_ms, by=by)
    added: list[Mutation] = []
    out: list[Batch] = []
    now = 0
    for op in ops:
        if op[0] == "add":
            _, row, kind, vlen, step = op
            now += step
            m = Mutation("t", row, kind, {b"f:q": b"x" * vlen}, None, Origin(TP, len(added)))
            added.append(m)
            used.append(rmap)
            out.extend(b.add(m, rmap, now))
        elif op[0] == "layout":
            rmap = spread_map(op[1], op[2])
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
        assert sum(x.regions.values()) == x.rows
        # every row is where the map it was added under puts it: its group, its server, its regions
        regions = [used[m.origin.offset].locate(m.row) for m in x.mutations]
        assert {r.server for r in regions} == {x.server}
        assert {r.server if by == "server" else r.start_key for r in regions} == {x.group}
        assert Counter(r.name for r in regions) == x.regions
        kinds: dict[bytes, MutationKind] = {}
        for m in x.mutations:
            assert kinds.setdefault(m.row, m.kind) is m.kind
    # A row's changes, in sealing order, replay their arrival order (the writer keeps the sealing
    # order between batches sharing a row).
    per_row: dict[bytes, list[int]] = {}
    for x in out:
        for m in x.mutations:
            per_row.setdefault(m.row, []).append(m.origin.offset)
    for row, offsets in per_row.items():
        assert offsets == [m.origin.offset for m in added if m.row == row]


def test_add_many_locates_each_row_and_seals_as_add_does() -> None:
    other = region_map([b"k"], table="u")
    maps = {"t": RMAP, "u": other}
    muts = [mut(b"a"), mut(b"z"), mut(b"a", table="u"), mut(b"b", MutationKind.DELETE), mut(b"b"), mut(b"z", table="u")]
    one, many = RegionBatcher(3, 10**6, 100), RegionBatcher(3, 10**6, 100)
    expected = [x for m in muts for x in one.add(m, maps[m.table], 5)] + one.drain()
    got = many.add_many(muts, maps, 5) + many.drain()
    assert got == expected
    assert [x.reason for x in got if x.reason is not SealReason.DRAIN] == [SealReason.CONFLICT]
    with pytest.raises(KeyError):
        many.add_many([mut(b"a", table="v")], maps, 6)
    assert many.pending_rows == 0


def test_a_second_kind_in_a_batch_conflicts_only_on_a_row_it_holds() -> None:
    b = RegionBatcher(100, 10**6, 100)
    assert b.add(mut(b"a"), RMAP, 0) == []
    assert b.add(mut(b"b", MutationKind.DELETE), RMAP, 0) == []  # another row: same batch
    assert b.add(mut(b"c", MutationKind.INCREMENT), RMAP, 0) == []
    (sealed,) = b.add(mut(b"b"), RMAP, 0)  # b is held as a delete
    assert sealed.reason is SealReason.CONFLICT and [m.row for m in sealed.mutations] == [b"a", b"b", b"c"]
    assert b.add(mut(b"b"), RMAP, 0) == []  # the new batch holds b as a put


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
    expected = [x for m in muts for x in one.add(m, maps[m.table], 1)]
    got = many.add_many(muts[:cut], maps, 1) + many.add_many(muts[cut:], maps, 1)
    assert (many.pending_rows, many.pending_bytes) == (one.pending_rows, one.pending_bytes)
    got += many.drain()
    expected += one.drain()
    assert got == expected


@settings(max_examples=300)
@given(
    splits=st.lists(st.binary(min_size=1, max_size=1), unique=True, max_size=3),
    servers=st.integers(min_value=1, max_value=2),
    by=st.sampled_from(["server", "region"]),
    max_rows=st.integers(min_value=1, max_value=7),
    max_bytes=st.integers(min_value=20, max_value=300),
    runs=st.lists(st.tuples(
        st.sampled_from([MutationKind.PUT, MutationKind.DELETE, MutationKind.PUT]),  # the run's kind
        st.booleans(),  # the run mixes in a mutation of the other kind
        st.lists(st.tuples(st.binary(max_size=2), st.integers(min_value=0, max_value=150), st.booleans()),
                 min_size=1, max_size=25)), max_size=8),
)
def test_property_runs_of_one_kind_batch_as_add_in_turn(
        splits: list[bytes], servers: int, by: BatchBy, max_rows: int, max_bytes: int,
        runs: list[tuple[MutationKind, bool, list[tuple[bytes, int, bool]]]]) -> None:
    """add_many over runs of one kind (the worker's common case), now and then with one mutation of
    the other kind, seals exactly the batches that :meth:`add` in turn seals: same ids, reasons,
    mutations, sizes, cells, regions and order; same pending counts and open batches after."""
    rmap = spread_map(splits, servers)
    maps = {"t": rmap}
    one, many = RegionBatcher(max_rows, max_bytes, 10, by=by), RegionBatcher(max_rows, max_bytes, 10, by=by)
    n = 0
    for kind, mixed, rows in runs:
        muts = []
        for row, vlen, weighted in rows:
            cells = {b"f:q": b"x" * vlen} if kind is MutationKind.PUT else ({b"f:q": b""} if vlen % 2 else {})
            m = Mutation("t", row, kind, cells, None, Origin(TP, n))
            muts.append(Mutation("t", row, kind, cells, None, Origin(TP, n), weight=m.size if weighted else 0))
            n += 1
        if mixed:
            other = MutationKind.DELETE if kind is MutationKind.PUT else MutationKind.PUT
            muts.insert(len(muts) // 2, Mutation("t", rows[0][0], other, {}, None, Origin(TP, n)))
            n += 1
        expected = [x for m in muts for x in one.add(m, rmap, 1)]
        got = many.add_many(muts, maps, 1)
        assert got == expected
        assert (many.pending_rows, many.pending_bytes) == (one.pending_rows, one.pending_bytes)
        assert many.statistics() == one.statistics()
    assert many.drain() == one.drain()
