"""Thrift1 scanning with lean reply objects: the rows of a page as ``(key, {column: Cell})``.

A full scan through this process is bound by its CPU (the Thrift gateway and the region server
share the machine's cores with it), and most of that CPU goes into decoding ``scannerGetList``
replies. thriftpy2's Cython protocol builds every struct of a reply by calling the IDL class's
generated Python ``__init__`` and then setting its fields one by one; a page of 1,000 two-cell rows
is 3,000 such constructions. Here the reply's ``TRowResult`` and ``TCell`` are decoded into
:class:`Cell` and ``_LeanRow`` instead: classes with the same Thrift field specs, ``__slots__``
and no ``__init__`` of their own, so construction is a plain object allocation. Measured on a page
of 1,000 rows: 2.4 -> 1.9 microseconds of client CPU per row.

Contract of :func:`scan_rows`: at most ``limit`` rows, in the scan's order; the scanner is opened,
read in batches of ``min(limit, 1000)`` (also the region server's caching) and closed in the
calling thread, on the given connection, whatever happens. :func:`scan_rows2` returns the same rows
(same bounds, order, limit, columns and filter, the same :class:`Cell` values) through one Thrift2
``getScannerResults`` call, for small pages (:data:`SMALL_PAGE_ROWS`). Errors are thriftpy2's and the socket's
(the caller maps them). Only the fields that HBase sends are set on a :class:`Cell`: ``value`` and
``timestamp`` always are for scan results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import happybase
import Hbase_thrift  # the Thrift1 IDL module happybase loads at import
from thriftpy2.thrift import TClient, TType

from pipeline.rowkey.codecs import prefix_successor

__all__ = ["SMALL_PAGE_ROWS", "Cell", "CellRow", "scan_bounds", "scan_cell", "scan_rows", "scan_rows2", "tscan"]

#: Pages of at most this many rows are read with one Thrift2 ``getScannerResults`` call (the
#: gateway opens, reads and closes the scanner in one round trip) instead of three or four Thrift1
#: calls (open, get, get that finds the end, close). Bigger pages take Thrift1, whose lean decoding
#: (below) costs less CPU per row.
SMALL_PAGE_ROWS = 256


class Cell:
    """One cell of a scanned row: ``value`` (bytes) and ``timestamp`` (epoch ms). Decoded straight
    from the Thrift reply (no ``__init__``: see the module docstring)."""

    __slots__ = ("timestamp", "value")
    thrift_spec: ClassVar[dict[int, tuple[Any, ...]]] = Hbase_thrift.TCell.thrift_spec
    value: bytes
    timestamp: int

    def __repr__(self) -> str:
        return f"Cell({self.value!r}, ts={self.timestamp})"


def scan_cell(value: bytes, timestamp: int) -> Cell:
    """A :class:`Cell` made here rather than decoded (the native client's scans)."""
    cell = Cell.__new__(Cell)
    cell.value, cell.timestamp = value, timestamp
    return cell


class _LeanRow:
    __slots__ = ("columns", "row", "sortedColumns")
    thrift_spec: ClassVar[dict[int, tuple[Any, ...]]] = {
        1: Hbase_thrift.TRowResult.thrift_spec[1],
        2: (TType.MAP, "columns", (TType.STRING, (TType.STRUCT, Cell)), False),
        3: Hbase_thrift.TRowResult.thrift_spec[3],
    }
    row: bytes
    columns: dict[bytes, Cell]


_Hbase: Any = Hbase_thrift.Hbase


class _GetListResult(_Hbase.scannerGetList_result):  # type: ignore[misc]
    thrift_spec: ClassVar[dict[int, tuple[Any, ...]]] = {**_Hbase.scannerGetList_result.thrift_spec,
                   0: (TType.LIST, "success", (TType.STRUCT, _LeanRow), False)}


class _LeanHbase(_Hbase):  # type: ignore[misc]
    scannerGetList_result = _GetListResult


CellRow = tuple[bytes, dict[bytes, Cell]]
_ATTR = "_hbase_ingest_lean_client"


def _lean_client(conn: happybase.Connection) -> Any:
    """A Thrift client over ``conn``'s own protocol (:func:`~connectors.hbase.transport.open_thrift1`) whose
    ``scannerGetList`` decodes lean rows (cached on the connection; rebuilt if happybase replaced its client)."""
    client = conn.client
    cached = getattr(conn, _ATTR, None)
    if cached is None or cached[0] is not client:
        service: Any = _LeanHbase  # thriftpy2 types it as a module; any class with the IDL attributes works
        cached = (client, TClient(service, conn.protocol))  # one protocol reads and writes, as the client's
        setattr(conn, _ATTR, cached)
    return cached[1]


def scan_bounds(start: bytes, stop: bytes, prefix: bytes | None) -> tuple[bytes, bytes]:
    """``(start, stop)`` of a scan given by its bounds or by ``prefix`` (not both: ``ValueError``):
    a prefix's rows are ``[prefix, its successor)``."""
    if prefix is None:
        return start, stop
    if start or stop:
        raise ValueError("give either prefix or start/stop, not both")
    return prefix, prefix_successor(prefix)


def tscan(start: bytes, stop: bytes, prefix: bytes | None, limit: int, reverse: bool,
          columns: Sequence[bytes] | None, filter: str | None) -> Any:
    """The Thrift1 ``TScan`` of ``[start, stop)`` (or of ``prefix``; not both), caching
    ``min(limit, 1000)`` rows per round trip; ``reverse`` as in HBase (``start`` is then the upper
    bound)."""
    start, stop = scan_bounds(start, stop, prefix)
    return Hbase_thrift.TScan(startRow=start or None, stopRow=stop or None, columns=list(columns) if columns else None,
                              caching=min(limit, 1000), filterString=filter, reversed=reverse)


def scan_rows(conn: happybase.Connection, table: bytes, scan: Any, limit: int) -> list[CellRow]:
    """At most ``limit`` rows of the ``TScan`` ``scan`` on ``table`` (full name), as
    ``(key, {b"family:qualifier": Cell})`` (see the module docstring)."""
    client = _lean_client(conn)
    batch = min(limit, 1000)
    scanner = client.scannerOpenWithScan(table, scan, {})
    rows: list[CellRow] = []
    try:
        while len(rows) < limit:
            got = client.scannerGetList(scanner, min(batch, limit - len(rows)))
            if not got:
                break
            rows += [(r.row, r.columns) for r in got]
    finally:
        client.scannerClose(scanner)
    return rows


def _tcolumn(idl: Any, column: bytes) -> Any:
    family, sep, qualifier = column.partition(b":")
    return idl.TColumn(family=family, qualifier=qualifier) if sep else idl.TColumn(family=family)


def scan_rows2(client: Any, idl: Any, table: bytes, start: bytes, stop: bytes, limit: int, reverse: bool,
               columns: Sequence[bytes] | None, filter: str | None) -> list[CellRow]:
    """:func:`scan_rows`' page through the Thrift2 client ``client`` (``idl``: its IDL module) in one
    ``getScannerResults`` call: the gateway opens the scanner, reads at most ``limit`` rows (the
    scan's limit and caching) and closes it. ``start``/``stop`` and ``reverse`` as in :func:`tscan`."""
    scan = idl.TScan(startRow=start or None, stopRow=stop or None,
                     columns=[_tcolumn(idl, c) for c in columns] if columns else None,
                     caching=limit, limit=limit, reversed=reverse,
                     filterString=filter.encode() if filter else None)
    rows: list[CellRow] = []
    for result in client.getScannerResults(table, scan, limit):
        cells: dict[bytes, Cell] = {}
        for cv in result.columnValues:
            cell = Cell()
            cell.value = cv.value
            cell.timestamp = cv.timestamp
            cells[cv.family + b":" + cv.qualifier] = cell
        rows.append((result.row, cells))
    return rows
