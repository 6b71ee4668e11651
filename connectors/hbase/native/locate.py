"""Finding regions over the native protocol: where ``hbase:meta`` lives (the RPC registry), a table's
regions (a forward meta scan), and the scan loop both use.

- :func:`meta_location`: ``ClientMetaService.GetMetaRegionLocations`` on a master's RPC port (HBase
  2.5+; region servers answer it too from 2.6): the primary ``hbase:meta,,1`` replica's server.
- :func:`table_regions`: a scan of ``hbase:meta`` over ``[table + ",,", table + " ,,")``, family
  ``info``; each row parsed by :func:`~connectors.hbase.native.regions.parse_meta_row`; the online
  regions come back sorted by start key.
- :func:`scan_region`: open a scanner on one region, page through ``[start, stop)``, close it early
  when ``limit`` rows were read. Rows come back as ``(row key, cells)`` in key order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from connectors.hbase.native.cells import Cell, decode_cells
from connectors.hbase.native.connection import RpcConnection
from connectors.hbase.native.failures import BACK_OFF
from connectors.hbase.native.messages import (
    ServerName,
    decode_meta_locations,
    decode_scan_response,
    scan_close,
    scan_next,
    scan_open,
)
from connectors.hbase.native.regions import META_REGION, Region, meta_scan_range, parse_meta_row
from pipeline.errors import HBaseError, HBaseUnavailable, TableNotFound

__all__ = ["ScannedRow", "meta_location", "scan_region", "table_regions"]

ScannedRow = tuple[bytes, list[Cell]]
_PAGE_ROWS = 1000


async def meta_location(registry: RpcConnection, *, timeout_s: float = 10.0) -> ServerName:
    """The server holding the primary meta region, asked of a ``ClientMetaService`` connection.
    Raises :class:`~pipeline.errors.HBaseUnavailable` when no location is known yet (meta in transition)."""
    reply = await registry.call("GetMetaRegionLocations", b"", timeout_s=timeout_s)
    for loc in decode_meta_locations(reply.param):
        if loc.region.replica_id == 0 and loc.server is not None and loc.server.host:
            return loc.server
    raise HBaseUnavailable(f"{registry.address} knows no location of hbase:meta yet")


async def scan_region(conn: RpcConnection, region_name: bytes, start: bytes = b"", stop: bytes = b"",
                      columns: Sequence[bytes] = (), limit: int = 0, *, reversed_: bool = False,
                      include_start: bool = True, timeout_s: float = 30.0) -> list[ScannedRow]:
    """The rows of ``[start, stop)`` (``b""``: open end) inside one region, at most ``limit`` (0: all);
    ``reversed_``: from ``start`` down to ``stop`` (exclusive), in descending key order. ``columns``
    and ``include_start`` as :func:`~connectors.hbase.native.messages.scan_open` takes them.
    Raises what :meth:`RpcConnection.call` raises, and :class:`~pipeline.errors.HBaseError` when the
    server sends cells as protobuf instead of a cellblock (it does not, once the codec is set)."""
    rows: list[ScannedRow] = []
    page = min(limit, _PAGE_ROWS) if limit > 0 else _PAGE_ROWS
    reply = await conn.call("Scan", scan_open(region_name, start, stop, columns, page, limit=limit,
                                              reversed_=reversed_, include_start=include_start),
                            timeout_s=timeout_s)
    while True:
        resp = decode_scan_response(reply.param)
        if resp.pb_results:
            raise HBaseError(f"scan of {region_name!r} returned cells as protobuf; expected a cellblock")
        offset = 0
        for n in resp.cells_per_result:
            cells, offset = decode_cells(reply.cellblock, n, offset)
            if not cells:
                continue
            if rows and rows[-1][0] == cells[0].row:  # the rest of a partial row
                rows[-1][1].extend(cells)
            else:
                rows.append((cells[0].row, cells))
        open_ = resp.more_results and resp.more_results_in_region
        if not open_:
            return rows
        if limit > 0 and len(rows) >= limit:
            with contextlib.suppress(HBaseError):
                await conn.call("Scan", scan_close(resp.scanner_id), timeout_s=timeout_s)
            return rows[:limit]
        want = min(limit - len(rows), _PAGE_ROWS) if limit > 0 else _PAGE_ROWS
        try:
            reply = await conn.call("Scan", scan_next(resp.scanner_id, want), timeout_s=timeout_s)
        except HBaseError as e:
            if getattr(e, "java_class", None) in BACK_OFF:  # busy: the caller reopens; let this scanner go now
                with contextlib.suppress(HBaseError):
                    await conn.call("Scan", scan_close(resp.scanner_id), timeout_s=timeout_s)
            raise


async def table_regions(meta: RpcConnection, table: str, *, timeout_s: float = 30.0) -> list[Region]:
    """Every online region of ``table`` (``namespace:name``, or a bare name in ``default``), sorted by
    start key, read from the meta region on ``meta`` (a ``ClientService`` connection to its server).
    Raises :class:`~pipeline.errors.TableNotFound` when meta has no region of the table."""
    start, stop = meta_scan_range(table)
    rows = await scan_region(meta, META_REGION, start, stop, (b"info",), timeout_s=timeout_s)
    regions = [r for r in (parse_meta_row(k, cells) for k, cells in rows) if r is not None]
    if not regions:
        raise TableNotFound(f"table {table!r} has no region in hbase:meta", table=table)
    return sorted(regions, key=lambda r: r.start_key)
