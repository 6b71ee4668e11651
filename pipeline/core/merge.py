"""The pure part of a k-way merge of sorted streams (one per salt bucket or region).

Ordering contract, for both :func:`heap_merge` and :class:`MergeHeap`: items come out by sort key,
ascending, or descending when asked; items with equal keys come out by source index, lowest first,
and in arrival order within one source. Given sources that are each sorted in the requested
direction, :func:`heap_merge` yields exactly ``sorted(chain(*sources), key=key, reverse=reverse)``.

Descending order wraps keys in :class:`Descending`, which reverses comparisons. Negation does not
work for byte strings, and neither does inverting every byte: ``b"a" < b"ab"`` and, inverted,
``b"\\x9e" < b"\\x9e\\x9d"`` still holds, because a prefix sorts first either way.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Descending", "MergeHeap", "SupportsLessThan", "heap_merge"]


class SupportsLessThan(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


T = TypeVar("T")
K = TypeVar("K", bound=SupportsLessThan)


class Descending(Generic[K]):
    """Wraps a key so that it sorts in reverse: ``Descending(a) < Descending(b)`` iff ``b < a``."""

    __slots__ = ("key",)

    def __init__(self, key: K) -> None:
        self.key = key

    def __lt__(self, other: Descending[K]) -> bool:
        return other.key < self.key

    def __gt__(self, other: Descending[K]) -> bool:
        return self.key < other.key

    def __le__(self, other: Descending[K]) -> bool:
        return not self.key < other.key

    def __ge__(self, other: Descending[K]) -> bool:
        return not other.key < self.key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Descending):
            return NotImplemented
        return bool(self.key == other.key)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Descending({self.key!r})"


def heap_merge(
    iterables: Iterable[Iterable[T]],
    key: Callable[[T], SupportsLessThan],
    reverse: bool = False,
    limit: int | None = None,
) -> Iterator[T]:
    """Merge sources that are each sorted by ``key`` (descending when ``reverse``) into one sorted
    stream, stopping after ``limit`` items (None: no limit). Reads one item ahead per source.

    Raises ``ValueError`` for a negative limit. Unsorted input gives unspecified (but complete)
    output.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if limit == 0:
        return
    wrap: Callable[[T], SupportsLessThan]
    wrap = (lambda item: Descending(key(item))) if reverse else key
    heap: list[tuple[SupportsLessThan, int, T, Iterator[T]]] = []
    for index, source in enumerate(iterables):
        it = iter(source)
        for first in it:
            heap.append((wrap(first), index, first, it))
            break
    heapq.heapify(heap)
    emitted = 0
    while heap:
        _, index, item, it = heap[0]
        yield item
        emitted += 1
        if limit is not None and emitted >= limit:
            return
        for following in it:
            # (key, source index) is unique in the heap, so items are never compared.
            heapq.heapreplace(heap, (wrap(following), index, following, it))
            break
        else:
            heapq.heappop(heap)


class MergeHeap(Generic[T]):
    """A heap of ``(sort_key, source_id, item)`` for a merge driven one item at a time.

    The driver keeps at least one item from every source that is not exhausted in the heap, pops the
    smallest (largest when ``descending``), and refills from the source it came from::

        heap = MergeHeap[Row](descending=True)
        for source_id, stream in enumerate(streams):
            first = await anext(stream, None)
            if first is not None:
                heap.push(source_id, first, first.key)
        while heap:
            source_id, row = heap.pop()
            yield row
            following = await anext(streams[source_id], None)
            if following is not None:
                heap.push(source_id, following, following.key)

    ``sort_key`` is bytes (a row key); ties are broken by ``source_id`` and then by push order.
    """

    __slots__ = ("_counts", "_descending", "_heap", "_seq")

    def __init__(self, descending: bool = False) -> None:
        self._descending = descending
        self._heap: list[tuple[bytes | Descending[bytes], int, int, T]] = []
        self._seq = 0
        self._counts: dict[int, int] = {}

    @property
    def descending(self) -> bool:
        return self._descending

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __repr__(self) -> str:
        order = "descending" if self._descending else "ascending"
        return f"MergeHeap({order}, items={len(self._heap)}, sources={len(self._counts)})"

    def held(self, source_id: int) -> int:
        """How many items of ``source_id`` are in the heap (a read-ahead driver refills at 0)."""
        return self._counts.get(source_id, 0)

    def push(self, source_id: int, item: T, sort_key: bytes) -> None:
        """Add ``item`` of ``source_id``. Items of one source must be pushed in sorted order."""
        wrapped: bytes | Descending[bytes] = Descending(sort_key) if self._descending else sort_key
        heapq.heappush(self._heap, (wrapped, source_id, self._seq, item))
        self._seq += 1
        self._counts[source_id] = self._counts.get(source_id, 0) + 1

    def peek(self) -> tuple[int, T] | None:
        """The ``(source_id, item)`` that :meth:`pop` would return, or None when empty."""
        if not self._heap:
            return None
        _, source_id, _, item = self._heap[0]
        return source_id, item

    def pop(self) -> tuple[int, T]:
        """Remove and return the next ``(source_id, item)``. Raises ``IndexError`` when empty."""
        if not self._heap:
            raise IndexError("pop from an empty MergeHeap")
        _, source_id, _, item = heapq.heappop(self._heap)
        left = self._counts[source_id] - 1
        if left:
            self._counts[source_id] = left
        else:
            del self._counts[source_id]
        return source_id, item
