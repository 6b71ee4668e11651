"""Plain data that flows between the pure stages of the ingest path.

A Kafka record becomes zero or more :class:`Mutation` values (one per route/table it feeds). Each
mutation remembers the record it came from (:class:`Origin`) so that the offset tracker can mark the
record done only when every mutation derived from it has been acknowledged by HBase.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = ["ExpiringPut", "Mutation", "MutationKind", "Origin", "TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class Origin:
    """The Kafka record a mutation was derived from. Immutable (``Final`` attributes), compared and
    hashed by value. A plain ``__slots__`` class rather than a frozen dataclass: one is built per
    record on the hot path, and a frozen dataclass's ``__init__`` costs about twice as much."""

    __slots__ = ("offset", "tp")

    def __init__(self, tp: TopicPartition, offset: int) -> None:
        self.tp: Final = tp
        self.offset: Final = offset

    def __repr__(self) -> str:
        return f"Origin(tp={self.tp!r}, offset={self.offset!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Origin):
            return NotImplemented
        return self.offset == other.offset and self.tp == other.tp

    def __hash__(self) -> int:
        return hash((self.tp, self.offset))


class MutationKind(Enum):
    PUT = "put"
    DELETE = "delete"
    DELETE_VERSION = "delete_version"
    INCREMENT = "increment"


class Mutation:
    """One row change for one table.

    - ``PUT``: ``cells`` maps ``b"family:qualifier"`` to the value; every cell gets ``timestamp``
      (milliseconds) when it is not None, so that a replay rewrites the same cell versions.
    - ``DELETE``: ``cells`` keys name what to delete: ``b"family:qualifier"`` a column, ``b"family"``
      (no ``:``) a whole family; no cells: the whole row. Every version up to ``timestamp`` goes (all
      versions when it is None); a put at or below it stays hidden, one above it shows.
    - ``DELETE_VERSION``: as ``DELETE``, but only the version at exactly ``timestamp`` (not None).
    - ``INCREMENT``: ``cells`` holds exactly one column; ``amount`` is added atomically.

    ``size`` is an estimate of the bytes on the wire (row + column names + values), used for the
    batcher's byte bound and the in-flight memory bound. Producers that already know it (the router)
    pass it as ``weight`` so it is not recomputed on the hot path.

    Immutable by contract (``Final`` attributes; treat ``cells`` as read-only), compared by value
    (``weight``, a size hint, is not compared) and not hashable (``cells`` is a dict). A plain
    ``__slots__`` class rather than a frozen dataclass: one is built per mutation on the hot path,
    and a frozen dataclass's ``__init__`` costs about three times as much.
    """

    __slots__ = ("amount", "cells", "kind", "origin", "row", "table", "timestamp", "weight")
    __hash__ = None  # type: ignore[assignment]  # mutable cells: compared by value, never hashed
    #: a put's cell TTL in milliseconds (HBase's ``Mutation.setTTL``): None, but for an :class:`ExpiringPut`
    ttl: int | None = None

    def __init__(self, table: str, row: bytes, kind: MutationKind, cells: dict[bytes, bytes],
                 timestamp: int | None, origin: Origin, amount: int = 0, weight: int = 0) -> None:
        self.table: Final = table
        self.row: Final = row
        self.kind: Final = kind
        self.cells: Final = cells
        self.timestamp: Final = timestamp
        self.origin: Final = origin
        self.amount: Final = amount
        self.weight: Final = weight

    @property
    def size(self) -> int:
        if self.weight:
            return self.weight
        n = len(self.row) + 16
        for column, value in self.cells.items():
            n += len(column) + len(value) + 8
        return n

    def __repr__(self) -> str:
        return (f"Mutation(table={self.table!r}, row={self.row!r}, kind={self.kind}, cells={self.cells!r}, "
                f"timestamp={self.timestamp!r}, origin={self.origin!r}, amount={self.amount!r}, "
                f"weight={self.weight!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mutation):
            return NotImplemented
        return (self.row == other.row and self.table == other.table and self.kind is other.kind
                and self.cells == other.cells and self.timestamp == other.timestamp
                and self.origin == other.origin and self.amount == other.amount and self.ttl == other.ttl)


class ExpiringPut(Mutation):
    """A ``PUT`` whose cells expire ``ttl`` milliseconds (``1 <= ttl <= 2**63 - 1``) after their
    timestamp (HBase's per-cell TTL: the ``_ttl`` attribute of the put; the family's own TTL, when
    shorter, still applies). Its own class so that every other mutation stays the plain slots the
    hot path builds."""

    __slots__ = ("ttl",)

    def __init__(self, table: str, row: bytes, cells: dict[bytes, bytes], timestamp: int | None, origin: Origin,
                 weight: int, ttl: int) -> None:
        super().__init__(table, row, MutationKind.PUT, cells, timestamp, origin, 0, weight)
        self.ttl = ttl

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, ttl={self.ttl!r})"
