"""Deletes against the real HBase, and the memory twin held to it: one script of puts and deletes (rows,
families, columns, one version; replayed older puts after a delete; puts at the delete's own
timestamp) is run against both, and every version of every cell they keep is compared."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.hbase import HBaseClient
from connectors.memory import MemoryHBase
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.settings import FamilySpec

ORIGIN = Origin(TopicPartition("t", 0), 0)
PUT, DELETE, ONE = MutationKind.PUT, MutationKind.DELETE, MutationKind.DELETE_VERSION


def m(kind: MutationKind, row: bytes, ts: int | None, **cells: bytes) -> Mutation:
    """A mutation; cell names use ``__`` for ``:`` (``d__a`` is ``d:a``; ``e`` alone a family)."""
    return Mutation("t", row, kind, {k.replace("__", ":").encode(): v for k, v in cells.items()}, ts, ORIGIN)


# each inner list is one write call, in order
SCRIPT: list[list[Mutation]] = [
    [m(PUT, b"r1", 10, d__a=b"1", d__b=b"2", e__c=b"3")],
    [m(DELETE, b"r1", 10, d__a=b"")],                    # a column, every version up to 10
    [m(PUT, b"r1", 5, d__a=b"old")],                     # a replayed older put: stays hidden
    [m(PUT, b"r1", 11, d__a=b"5")],                      # a newer one shows
    [m(DELETE, b"r1", 20, e=b"")],                       # a family
    [m(PUT, b"r1", 20, e__c=b"same-ts")],                # at the delete's timestamp: hidden
    [m(PUT, b"r1", 21, e__c=b"7")],
    [m(PUT, b"r2", 30, d__a=b"x", e__c=b"y")],
    [m(DELETE, b"r2", 30)],                              # the whole row
    [m(PUT, b"r2", 29, d__a=b"older"), m(PUT, b"r2", 31, d__b=b"newer")],
    [m(PUT, b"r3", 40, d__a=b"1"), m(PUT, b"r3", 41, d__a=b"2")],
    [m(ONE, b"r3", 41, d__a=b"")],                       # one version of a column
    [m(PUT, b"r3", 41, d__a=b"again")],                  # that version stays hidden
    [m(PUT, b"r4", 50, e__x=b"1", e__y=b"2"), m(PUT, b"r4", 51, e__x=b"3")],
    [m(ONE, b"r4", 50, e=b"")],                          # one version of a family
    [m(PUT, b"r5", 60, d__a=b"1", e__c=b"2")],
    [m(DELETE, b"r5", 60, d=b"", e__c=b"")],             # a family and a column in one delete
    [m(PUT, b"r5", 61, d__a=b"back")],
]
ROWS = [b"r1", b"r2", b"r3", b"r4", b"r5"]
COLUMNS = [b"d:a", b"d:b", b"e:c", b"e:x", b"e:y"]


@pytest.fixture
async def real(hbase: HBaseClient, unique: str) -> Any:
    table = f"deletes_{unique}"
    await hbase.create_table(table, {"d": FamilySpec(versions=5), "e": FamilySpec(versions=5)})
    try:
        yield table
    finally:
        await hbase.delete_table(table)


async def test_the_twin_keeps_what_hbase_keeps(hbase: HBaseClient, real: str) -> None:
    twin = MemoryHBase()
    twin.add_table("t", families=("d", "e"))
    for step in SCRIPT:
        await hbase.write(real, step)
        await twin.write("t", step)
    got_real: dict[tuple[bytes, bytes], list[tuple[bytes, int]]] = {}
    got_twin: dict[tuple[bytes, bytes], list[tuple[bytes, int]]] = {}
    for row in ROWS:
        versions = twin.row("t", row)
        for column in COLUMNS:
            kept = await hbase.cell_versions(real, row, column, versions=5)
            if kept:
                got_real[(row, column)] = kept
            if versions.get(column):
                got_twin[(row, column)] = sorted(((v, ts) for ts, v in versions[column].items()),
                                                 key=lambda vt: -vt[1])
    assert got_real == got_twin
    # and what the script means, spelled out
    assert got_real == {
        (b"r1", b"d:a"): [(b"5", 11)], (b"r1", b"d:b"): [(b"2", 10)], (b"r1", b"e:c"): [(b"7", 21)],
        (b"r2", b"d:b"): [(b"newer", 31)],
        (b"r3", b"d:a"): [(b"1", 40)],
        (b"r4", b"e:x"): [(b"3", 51)],
        (b"r5", b"d:a"): [(b"back", 61)],
    }
