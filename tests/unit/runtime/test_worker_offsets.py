"""The offsets a worker registers for a run of fetched records: a range when they have no gap."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.runtime.ingest.worker import _offsets


@dataclass
class _Rec:
    offset: int
    value: bytes | None = None
    key: bytes | None = None
    timestamp: int = 0
    headers: tuple[tuple[str, bytes], ...] = ()


def test_offsets_of_a_run_are_a_range_without_gaps_and_a_list_with_them() -> None:
    records = [_Rec(o) for o in (10, 11, 12, 14, 15)]
    assert _offsets(records, 0, 3) == range(10, 13)
    assert _offsets(records, 3, 5) == range(14, 16)
    assert _offsets(records, 1, 5) == [11, 12, 14, 15]
    assert list(_offsets(records, 2, 2)) == []
