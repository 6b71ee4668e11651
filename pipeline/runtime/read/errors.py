"""The reader's error: one query failed, and which range (bucket or region) failed it.

::

    HBaseIngestError                (pipeline.errors)
    ├── QueryError                  a fan-out query failed: .table, .range_label, .timed_out
    └── RowDecodeError              a scanned row does not decode: .key, .detail (picklable)
"""

from __future__ import annotations

from pipeline.errors import HBaseIngestError

__all__ = ["QueryError", "RowDecodeError"]


class QueryError(HBaseIngestError):
    """A read query failed. ``range_label`` names the range (``salt=3``, ``region 2/5 ...``) that
    failed or that the query was waiting on, None when the query failed before scanning (planning).
    ``timed_out`` is True when the per-query timeout expired. Raised ``from`` the cause."""

    def __init__(self, message: str, *, table: str, range_label: str | None = None,
                 timed_out: bool = False) -> None:
        where = f" (table {table!r}" + (f", range {range_label}" if range_label else "") + ")"
        super().__init__(message + where)
        self.table = table
        self.range_label = range_label
        self.timed_out = timed_out


class RowDecodeError(HBaseIngestError):
    """A scanned row that the route cannot decode: ``key`` (raw bytes) and ``detail`` (the key's or
    the column's own error text). Raised by page decoders that run in worker processes (it pickles
    with its fields, as every project error does); the reader turns it into a :class:`QueryError`
    naming the range."""

    def __init__(self, key: bytes, detail: str) -> None:
        super().__init__(f"row {key!r} does not decode: {detail}")
        self.key = key
        self.detail = detail
