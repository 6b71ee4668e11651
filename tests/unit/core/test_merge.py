from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.merge import Descending, PageMerge, heap_merge, merge_pieces

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


def _drive(merge: PageMerge[Item], pages: list[list[list[Item]]], order: list[int]) -> list[Item]:
    """Feed pages in the order the merge asks (``order`` picks which needy source goes first),
    taking whenever no source needs a page; returns the merged output."""
    got: list[Item] = []
    step = 0
    while not merge.done:
        needs = merge.needs()
        if needs:
            i = needs[order[step % len(order)] % len(needs)] if order else needs[0]
            step += 1
            merge.feed(i, pages[i].pop(0) if pages[i] else None)
            continue
        pieces = merge.take()
        assert pieces and all(rows for _, rows in pieces)
        assert [i for i, _ in pieces] == sorted({i for i, _ in pieces})  # source order, once each
        assert all(item[1] == i for i, rows in pieces for item in rows)
        got.extend(merge_pieces([rows for _, rows in pieces], first, merge_descending(merge)))
    return got


def merge_descending(merge: PageMerge[Item]) -> bool:
    return "descending" in repr(merge)


@given(keys=sources_strategy(), descending=st.booleans(), page=st.integers(1, 6),
       order=st.lists(st.integers(0, 5), max_size=8))
def test_property_page_merge_equals_sorted_chain(keys: list[list[bytes]], descending: bool, page: int,
                                                 order: list[int]) -> None:
    """Any page size, any feeding order, duplicate keys within and across sources."""
    sources = tag(keys, descending)
    pages = [[src[p:p + page] for p in range(0, len(src), page)] for src in sources]
    got = _drive(PageMerge(len(sources), first, descending), pages, order)
    assert got == sorted(chain(*sources), key=first, reverse=descending)


def test_page_merge_takes_everything_before_the_smallest_last_key() -> None:
    merge: PageMerge[tuple[int, str]] = PageMerge(3, lambda t: t[0])
    assert merge.needs() == [0, 1, 2]
    merge.feed(0, [(1, "a"), (5, "a"), (9, "a")])
    merge.feed(1, [(2, "b"), (5, "b")])  # the limiting source: its last key is the smallest
    merge.feed(2, [(5, "c"), (6, "c")])
    with pytest.raises(RuntimeError):
        PageMerge(1, lambda t: t).take()
    # source 0 (lower index) gives its 5 too; source 2 (higher) must wait for source 1's next page
    assert merge.take() == [(0, [(1, "a"), (5, "a")]), (1, [(2, "b"), (5, "b")])]
    assert merge.needs() == [1]
    merge.feed(1, [(5, "b2")])
    assert merge.take() == [(1, [(5, "b2")])]  # still the limiting source: source 2 waits again
    merge.feed(1, [])  # an empty page is no news: the source still needs one
    assert merge.needs() == [1]
    merge.feed(1, None)  # ended: now source 2's 5 and 6 are safe, source 0's 9 is not yet
    assert merge.take() == [(2, [(5, "c"), (6, "c")])]
    assert merge.needs() == [2]
    merge.feed(2, None)
    assert merge.take() == [(0, [(9, "a")])]
    merge.feed(0, None)
    assert merge.done and merge.needs() == []
    assert repr(merge) == "PageMerge(ascending, sources=3, active=0)"
    assert merge_pieces([[3, 1]], lambda x: x) == [3, 1]  # one piece is taken as it is
    assert merge_pieces([[], [2, 5], []], lambda x: x) == [2, 5] and merge_pieces([[]], lambda x: x) == []


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
    with pytest.raises(ValueError, match="limit must be >= 0"):
        list(heap_merge([a], key=lambda t: t[0], limit=-1))


def test_heap_merge_stops_reading_at_the_limit() -> None:
    pulled: list[int] = []

    def source(start: int) -> Iterator[int]:
        for i in range(start, 10**9, 2):
            pulled.append(i)
            yield i

    assert list(heap_merge([source(0), source(1)], key=lambda x: x, limit=5)) == [0, 1, 2, 3, 4]
    assert len(pulled) <= 7


@given(keys=sources_strategy(), descending=st.booleans(), cut=st.lists(st.integers(0, 40), max_size=5))
def test_property_merge_pieces_equals_a_stable_sort(keys: list[list[bytes]], descending: bool,
                                                    cut: list[int]) -> None:
    """Overlapping or not (pieces cut from one sorted list are disjoint), ties by piece order."""
    pieces = [p for p in tag(keys, descending) if p]
    if cut and pieces:  # also: disjoint pieces of one sorted sequence, shuffled by the cut points
        whole = sorted(chain(*pieces), key=first, reverse=descending)
        bounds = sorted({0, len(whole), *(c % (len(whole) + 1) for c in cut)})
        pieces = [whole[a:b] for a, b in pairwise(bounds) if b > a][::-1]
    if not pieces:
        return
    got = merge_pieces(pieces, first, descending)
    assert got == sorted(chain(*pieces), key=first, reverse=descending)
