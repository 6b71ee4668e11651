"""The brute-force answer to a reader query, shared by the reader's unit and integration tests:
every key decoded, filtered by ``where`` and ``time_range`` (on the design's ``ts`` field), sorted
by the design's logical order (or by the key bytes for table-order plans, or by ``(ts, logical
order)`` for by-time queries), limited."""

from __future__ import annotations

from typing import Any

from pipeline.rowkey import RowKey


def _matching(rowkey: RowKey, keys: list[bytes], where: dict[str, Any],
              time_range: tuple[int, int] | None) -> list[bytes]:
    keep = []
    for key in keys:
        fields = rowkey.decode(key)
        if any(fields[f] != v for f, v in where.items()):
            continue
        if time_range is not None and not time_range[0] <= fields["ts"] < time_range[1]:
            continue
        keep.append(key)
    return keep


def brute_force(rowkey: RowKey, keys: list[bytes], where: dict[str, Any],
                time_range: tuple[int, int] | None, descending: bool, limit: int | None,
                table_order: bool = False) -> list[bytes]:
    keep = _matching(rowkey, keys, where, time_range)
    keep.sort(key=(lambda k: k) if table_order else rowkey.sort_key, reverse=descending)
    return keep if limit is None else keep[:limit]


def brute_force_by_time(rowkey: RowKey, keys: list[bytes], where: dict[str, Any],
                        time_range: tuple[int, int] | None, newest_first: bool, limit: int) -> list[bytes]:
    keep = _matching(rowkey, keys, where, time_range)
    keep.sort(key=lambda k: (rowkey.decode(k)["ts"], rowkey.sort_key(k)), reverse=newest_first)
    return keep[:limit]
