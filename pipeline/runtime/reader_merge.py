"""The reader's merges over paged range streams: a k-way merge in runs, and a bounded top-k.

Both read pages through ``receive(i)``, which returns range ``i``'s next page (a list of rows sorted
in the merge direction) or None when the range is exhausted, and raises the query's failure.

:func:`merge_runs` keeps one head row per range in a :class:`~pipeline.core.merge.MergeHeap`. After
popping the smallest head it also takes every following row of the same page that still sorts
strictly before the next head of another range, and yields that run as one list: a heap operation
per run instead of per row, and the caller decodes a run in one comprehension. The run's end is
found by binary search (a page is sorted in the merge direction), so computing sort keys costs
O(log page) per run, not one per row. Ties go back through the heap, which breaks them by range
index, so the output is exactly the per-row heap merge.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from pipeline.core.merge import Descending, MergeHeap

__all__ = ["Receive", "Row", "merge_runs", "top_k"]

Row = tuple[bytes, dict[bytes, Any]]  # (key, cells): only the key is read here
Receive = Callable[[int], Awaitable[list[Row] | None]]


async def merge_runs(n: int, receive: Receive, sort_key: Callable[[bytes], bytes],
                     descending: bool) -> AsyncGenerator[tuple[int, list[Row]], None]:
    """Yield ``(range index, run of rows)`` in merged order (descending when asked)."""
    heap: MergeHeap[Row] = MergeHeap(descending=descending)
    pages: list[list[Row]] = [[] for _ in range(n)]
    rank: Callable[[Row], Any]  # what a page is sorted by, ascending
    if descending:
        def rank(row: Row) -> Any:
            return Descending(sort_key(row[0]))
    else:
        def rank(row: Row) -> Any:
            return sort_key(row[0])
    pos = [0] * n  # index of the row after range i's head (the head is in the heap)

    async def refill(i: int) -> None:
        page, p = pages[i], pos[i]
        if p >= len(page):
            got = await receive(i)
            if not got:
                return
            pages[i] = page = got
            p = 0
        heap.push(i, page[p], sort_key(page[p][0]))
        pos[i] = p + 1

    for i in range(n):
        await refill(i)
    while heap:
        i, _ = heap.pop()
        page, start = pages[i], pos[i] - 1
        end = len(page)
        nxt = heap.peek()
        if nxt is not None and start + 1 < end:
            # the run ends at the first row that does not sort strictly before the other head
            bound: Any = sort_key(nxt[1][0])
            end = bisect_left(page, Descending(bound) if descending else bound, start + 1, end,
                              key=rank)
        elif nxt is not None:
            end = start + 1
        pos[i] = end
        yield i, page[start:end]
        await refill(i)


async def top_k(recvs: list[MemoryObjectReceiveStream[list[Row]]], receive: Receive,
                sort_key: Callable[[bytes], bytes], descending: bool,
                k: int) -> AsyncGenerator[tuple[int, list[Row]], None]:
    """The first ``k`` rows in ``sort_key`` order (descending when asked) over ranges that are not
    sorted by it: reads every range to its end, taking pages from whichever range has one ready,
    and keeps at most ``k`` rows. Yields them in order, one row per item."""
    # the heap's root is the worst row kept: the largest key (ascending) or the smallest
    best: list[tuple[Any, int, int, Row]] = []
    seq = 0

    def take(i: int, page: list[Row]) -> None:
        nonlocal seq
        for row in page:
            sk = sort_key(row[0])
            rank: Any = sk if descending else Descending(sk)
            seq += 1
            item = (rank, -i, -seq, row)
            if len(best) < k:
                heapq.heappush(best, item)
            elif best[0] < item:
                heapq.heapreplace(best, item)

    active = list(range(len(recvs)))
    while active:
        progressed = False
        for i in list(active):
            try:
                take(i, recvs[i].receive_nowait())
                progressed = True
            except anyio.WouldBlock:
                pass
            except anyio.EndOfStream:
                active.remove(i)
                await receive(i)  # raises when the range ended without finishing
        if not progressed and active:
            page = await receive(active[0])
            if page is None:
                active.pop(0)
            else:
                take(active[0], page)
    best.sort(reverse=True)
    for _, neg_i, _, row in best:
        yield -neg_i, [row]
