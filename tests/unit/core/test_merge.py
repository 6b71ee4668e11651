from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.merge import Descending, MergeHeap, heap_merge

Item = tuple[bytes, int, int]  # (key, source, position): unique, so identity is checkable


def sources_strategy() -> st.SearchStrategy[list[list[bytes]]]:
    return st.lists(st.lists(st.binary(max_size=3), max_size=15), max_size=6)


def tag(keys: list[list[bytes]], reverse: bool) -> list[list[Item]]:
    return [
        [(k, s, i) for i, k in enumerate(sorted(src, reverse=reverse))]
        for s, src in enumerate(keys)
    ]


def first(item: Item) -> bytes:
    return item[0]


@given(keys=sources_strategy(), reverse=st.booleans(), limit=st.none() | st.integers(0, 30))
def test_property_heap_merge_equals_sorted_chain(
    keys: list[list[bytes]], reverse: bool, limit: int | None
) -> None:
    sources = tag(keys, reverse)
    expected = sorted(chain(*sources), key=first, reverse=reverse)
    if limit is not None:
        expected = expected[:limit]
    got = list(heap_merge(sources, key=first, reverse=reverse, limit=limit))
    assert got == expected


@given(keys=sources_strategy(), descending=st.booleans())
def test_property_merge_heap_driven_one_item_at_a_time(
    keys: list[list[bytes]], descending: bool
) -> None:
    sources = tag(keys, descending)
    iters: list[Iterator[Item]] = [iter(s) for s in sources]
    heap: MergeHeap[Item] = MergeHeap(descending=descending)
    for source_id, it in enumerate(iters):
        item = next(it, None)
        if item is not None:
            heap.push(source_id, item, item[0])
    got: list[Item] = []
    while heap:
        source_id, item = heap.pop()
        assert item[1] == source_id
        got.append(item)
        following = next(iters[source_id], None)
        if following is not None:
            heap.push(source_id, following, following[0])
    assert got == sorted(chain(*sources), key=first, reverse=descending)


@given(keys=sources_strategy(), descending=st.booleans())
def test_property_merge_heap_with_read_ahead(keys: list[list[bytes]], descending: bool) -> None:
    """Pushing whole sources at once (unbounded read-ahead) keeps the same order."""
    sources = tag(keys, descending)
    heap: MergeHeap[Item] = MergeHeap(descending=descending)
    for source_id, src in enumerate(sources):
        for item in src:
            heap.push(source_id, item, item[0])
        assert heap.held(source_id) == len(src)
    got = [heap.pop()[1] for _ in range(len(heap))]
    assert got == sorted(chain(*sources), key=first, reverse=descending)
    assert all(heap.held(s) == 0 for s in range(len(sources)))


def test_descending_handles_prefixes() -> None:
    keys = [b"ab", b"a", b"", b"b", b"\xff"]
    assert sorted(keys, key=Descending) == sorted(keys, reverse=True)
    assert Descending(b"a") > Descending(b"ab")
    assert Descending(b"a") >= Descending(b"a")
    assert Descending(b"a") <= Descending(b"a")
    assert Descending(b"b") <= Descending(b"a")
    assert Descending(b"a") == Descending(b"a")
    assert Descending(b"a") != b"a"
    assert hash(Descending(b"a")) == hash(b"a")
    assert repr(Descending(1)) == "Descending(1)"


def test_heap_merge_ties_follow_source_order_and_limit() -> None:
    a = [(1, "a0"), (1, "a1"), (3, "a2")]
    b = [(1, "b0"), (2, "b1")]
    got = [v for _, v in heap_merge([a, b], key=lambda t: t[0])]
    assert got == ["a0", "a1", "b0", "b1", "a2"]
    assert list(heap_merge([a, b], key=lambda t: t[0], limit=2)) == a[:2]
    assert list(heap_merge([a, b], key=lambda t: t[0], limit=0)) == []
    assert list(heap_merge([], key=lambda t: t)) == []
    with pytest.raises(ValueError):
        list(heap_merge([a], key=lambda t: t[0], limit=-1))


def test_heap_merge_stops_reading_at_the_limit() -> None:
    pulled: list[int] = []

    def source(start: int) -> Iterator[int]:
        for i in range(start, 10**9, 2):
            pulled.append(i)
            yield i

    assert list(heap_merge([source(0), source(1)], key=lambda x: x, limit=5)) == [0, 1, 2, 3, 4]
    assert len(pulled) <= 7


def test_merge_heap_peek_pop_and_repr() -> None:
    heap: MergeHeap[str] = MergeHeap()
    assert heap.peek() is None
    assert not heap
    with pytest.raises(IndexError):
        heap.pop()
    heap.push(1, "x", b"b")
    heap.push(0, "y", b"b")
    heap.push(2, "z", b"a")
    assert len(heap) == 3
    assert heap.peek() == (2, "z")
    assert [heap.pop() for _ in range(3)] == [(2, "z"), (0, "y"), (1, "x")]
    assert not heap.descending
    assert "ascending" in repr(heap)
