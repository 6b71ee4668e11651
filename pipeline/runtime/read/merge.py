"""The reader's merges over paged range streams: a k-way merge in batches, and a bounded top-k.

Both read pages through ``receive(i)``, which returns range ``i``'s next page (a list of rows sorted
in the merge direction) or None when the range is exhausted, and raises the query's failure. Both
yield *pieces*: lists of ``(range index, rows)`` whose rows, merged by :func:`merge_pieces`, come
next in the output. The caller decodes each piece with its range's label first, and merges the
decoded rows (so a row keeps the label of the range it came from).

:func:`merge_batches` drives a :class:`~pipeline.core.merge.PageMerge`: every range whose page is
used up is fed its next page, then everything that sorts before the smallest last row among the
current pages is taken at once. A batch is about a page per range, whatever the interleaving.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from pipeline.core.merge import Descending, PageMerge, merge_pieces

__all__ = ["Cutoff", "Pieces", "Receive", "Row", "merge_batches", "merge_pieces", "top_k"]

Row = tuple[bytes, dict[bytes, Any]]  # (key, cells): only the key is read here
Receive = Callable[[int], Awaitable[list[Row] | None]]
Pieces = list[tuple[int, Sequence[Row]]]


async def merge_batches(n: int, receive: Receive, sort_key: Callable[[bytes], bytes],
                        descending: bool) -> AsyncGenerator[Pieces, None]:
    """Yield the merged order of ``n`` ranges as batches of pieces (descending when asked)."""
    merge: PageMerge[Row] = PageMerge(n, lambda row: sort_key(row[0]), descending)
    while True:
        for i in merge.needs():
            merge.feed(i, await receive(i))
        if merge.done:
            return
        if not merge.needs():
            yield merge.take()


class Cutoff:
    """What :func:`top_k` has kept so far, for producers that read rows best first and can stop
    early: :meth:`useless` is True for a sort key that cannot enter the top ``k`` any more (``k``
    rows are kept and every one sorts before it). Starts empty: nothing is useless."""

    __slots__ = ("descending", "worst")

    def __init__(self, descending: bool) -> None:
        self.descending = descending
        self.worst: Any = None  # the sort key of the k-th row kept, once k rows are

    def useless(self, sk: Any) -> bool:
        worst = self.worst
        if worst is None:
            return False
        return bool(sk < worst) if self.descending else bool(worst < sk)


async def top_k(recvs: list[MemoryObjectReceiveStream[list[Row]]], receive: Receive,
                sort_key: Callable[[bytes], Any], descending: bool,
                k: int, cutoff: Cutoff | None = None) -> AsyncGenerator[Pieces, None]:
    """The first ``k`` rows in ``sort_key`` order (descending when asked) over ranges that are not
    sorted by it: reads every range to its end, taking pages from whichever range has one ready,
    and keeps at most ``k`` rows. Yields them once, in order, one piece per run of rows from the
    same range. ``cutoff`` (optional) is kept up to date with the worst row kept."""
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
        if cutoff is not None and len(best) == k:
            root = best[0][0]
            cutoff.worst = root if descending else root.key

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
    pieces: Pieces = []
    for _, neg_i, _, row in best:  # consecutive rows of one range make one piece
        if pieces and pieces[-1][0] == -neg_i:
            pieces[-1][1].append(row)  # type: ignore[attr-defined]
        else:
            pieces.append((-neg_i, [row]))
    if pieces:
        yield pieces
