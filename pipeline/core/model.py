"""Plain data that flows between the pure stages of the ingest path.

A Kafka record becomes zero or more :class:`Mutation` values (one per route/table it feeds). Each
mutation remembers the record it came from (:class:`Origin`) so that the offset tracker can mark the
record done only when every mutation derived from it has been acknowledged by HBase.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Mutation", "MutationKind", "Origin", "TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


@dataclass(frozen=True, slots=True)
class Origin:
    """The Kafka record a mutation was derived from."""

    tp: TopicPartition
    offset: int


class MutationKind(Enum):
    PUT = "put"
    DELETE = "delete"
    INCREMENT = "increment"


@dataclass(frozen=True, slots=True)
class Mutation:
    """One row change for one table.

    - ``PUT``: ``cells`` maps ``b"family:qualifier"`` to the value; every cell gets ``timestamp``
      (milliseconds) when it is not None, so that a replay rewrites the same cell versions.
    - ``DELETE``: ``cells`` keys name the columns to delete (empty: the whole row).
    - ``INCREMENT``: ``cells`` holds exactly one column; ``amount`` is added atomically.

    ``size`` is an estimate of the bytes on the wire (row + column names + values), used for the
    batcher's byte bound and the in-flight memory bound. Producers that already know it (the router)
    pass it as ``weight`` so it is not recomputed on the hot path.
    """

    table: str
    row: bytes
    kind: MutationKind
    cells: dict[bytes, bytes]
    timestamp: int | None
    origin: Origin
    amount: int = 0
    weight: int = 0

    @property
    def size(self) -> int:
        if self.weight:
            return self.weight
        n = len(self.row) + 16
        for column, value in self.cells.items():
            n += len(column) + len(value) + 8
        return n
