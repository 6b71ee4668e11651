"""A fake HBase cluster that speaks the native RPC protocol over TCP, to test the retries of
:class:`~connectors.hbase.native.client.NativeClient` in milliseconds.

:class:`FakeCluster` (``async with``) starts ``servers`` fake region servers, each listening on its own
port of 127.0.0.1. One of them holds ``hbase:meta``; every one answers the registry RPC
``ClientMetaService.GetMetaRegionLocations`` (as HBase 2.6 region servers do), so a client's ``masters``
is :attr:`FakeCluster.master`. :meth:`FakeCluster.create_table` lays out a table's regions
(:class:`FakeRegion`) over the servers; :meth:`FakeCluster.move`, :meth:`FakeCluster.split` and
:meth:`FakeCluster.move_meta` change the layout, and meta follows at once.

On a ``ClientService`` connection a server answers:

- ``Scan`` of ``hbase:meta`` (when it holds meta; else ``RegionMovedException`` or
  ``NotServingRegionException`` for the whole call): one meta row per region, keyed by the region name
  ``table,start key,region id.`` and ordered as the meta region orders them (table, start key, id), family
  ``info``: ``regioninfo`` (``PBUF`` + RegionInfo), ``server`` (``host:port``) and ``serverstartcode``
  while the region has a server, ``state``. Split parents stay, flagged offline and split.
- ``Scan`` of a user region it holds (else ``RegionMovedException`` or ``NotServingRegionException`` for the
  whole call), as HBase's ``RSRpcServices.scan``: a scanner opened on one region passes over its rows only,
  forward ``[start, stop)`` or reversed from ``start`` (``b""``: the region's end) down to ``stop``
  (exclusive), ``include_start_row`` honoured; each row answered with the newest version of every asked
  column (``Column{family, qualifier*}``; none: every column; a family the table lacks:
  ``NoSuchColumnFamilyException``), a row with none of them read past. The rows are those of the data when the
  scanner opened (HBase's read point). Each call answers at most ``number_of_rows`` rows in a cellblock;
  ``limit_of_rows`` (of that call) reached answers ``more_results`` false, the region exhausted
  ``more_results_in_region`` false, and either closes the scanner. A next page or a close of a scanner the
  server does not know answers ``UnknownScannerException``; of a scanner whose region the server no longer
  holds (moved, split), ``NotServingRegionException``.
- ``Multi``: each region action of a region the server holds is applied action by action (puts, deletes,
  increments); a region it does not hold fails whole with ``RegionMovedException`` (it moved away from this
  server) or ``NotServingRegionException``. An action naming a column family the table lacks fails with
  ``NoSuchColumnFamilyException``, a row outside its region with ``WrongRegionException``. An increment is
  applied once per ``(nonce group, nonce)``, as HBase's nonce manager does; a put of the latest timestamp
  is stamped with the fake's clock, so only puts with explicit timestamps are idempotent.

Faults are scripted with :meth:`FakeCluster.inject`: :class:`Directive` values (:class:`FailActions`,
:class:`FailRegion`, :class:`FailCall`, :class:`DropConnection`, :class:`BeforeCall`, :class:`ExpireScanner`)
that the servers consume, in the order injected, on the calls they match (by method, server, table, region,
kind of Scan call; ``skip`` lets the first matching calls through, to hit the n-th). Only actions that
succeed are applied. Every call is recorded (:attr:`FakeCluster.calls`, one :class:`ReceivedCall` each)
with what it carried (a Scan: :class:`ReceivedScan`) and how the fake answered it.

Bytes that do not parse as HBase's protocol are the client's bug: the server records a
:class:`FakeProtocolError` in :attr:`FakeCluster.errors`, closes the connection, and the cluster raises
its errors when its ``async with`` block ends. Frame and field layouts:
:mod:`connectors.hbase.native.wire` and :mod:`connectors.hbase.native.messages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self, TypeVar

from connectors.hbase.native.cells import (
    DELETE,
    DELETE_COLUMN,
    DELETE_FAMILY,
    DELETE_FAMILY_VERSION,
    LATEST_TIMESTAMP,
    PUT,
    Cell,
    decode_cells,
    encode_cell,
)
from connectors.hbase.native.wire import (
    CODEC_KEYVALUE,
    PREAMBLE,
    delimited,
    iter_fields,
    pb_bool,
    pb_bytes,
    pb_str,
    pb_uint,
    read_varint,
)

__all__ = [
    "DO_NOT_RETRY",
    "NOT_SERVING",
    "NO_SUCH_FAMILY",
    "REGION_MOVED",
    "UNKNOWN_SCANNER",
    "BeforeCall",
    "Directive",
    "DropConnection",
    "ExpireScanner",
    "FailActions",
    "FailCall",
    "FailRegion",
    "FakeCluster",
    "FakeProtocolError",
    "FakeRegion",
    "FakeRegionServer",
    "GoSilent",
    "ReceivedAction",
    "ReceivedCall",
    "ReceivedScan",
    "RegionActions",
    "ScanKind",
]

NOT_SERVING = "org.apache.hadoop.hbase.NotServingRegionException"
REGION_MOVED = "org.apache.hadoop.hbase.exceptions.RegionMovedException"
NO_SUCH_FAMILY = "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"
WRONG_REGION = "org.apache.hadoop.hbase.regionserver.WrongRegionException"
UNKNOWN_SCANNER = "org.apache.hadoop.hbase.UnknownScannerException"
DO_NOT_RETRY = "org.apache.hadoop.hbase.DoNotRetryIOException"
#: exceptions HBase flags ``do_not_retry`` in an ExceptionResponse (subclasses of DoNotRetryIOException)
_FLAGGED_DO_NOT_RETRY = frozenset({DO_NOT_RETRY, NO_SUCH_FAMILY, UNKNOWN_SCANNER,
                                   "org.apache.hadoop.hbase.ipc.ServerTooBusyException"})

CLIENT_SERVICE = "ClientService"
META_SERVICE = "ClientMetaService"
META_REGION = b"hbase:meta,,1"
_META_TABLE = "hbase:meta"
MUTATE_APPEND, MUTATE_INCREMENT, MUTATE_PUT, MUTATE_DELETE = 0, 1, 2, 3
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_START_CODE = 1_700_000_000_000  # a server's start code: its start time in ms, as HBase's
#: a Scan call: one opening a scanner, one asking an open scanner's next page, one closing it
ScanKind = Literal["open", "next", "close"]


class FakeProtocolError(Exception):
    """Bytes from the client that HBase would not parse either (a framing or encoding bug)."""


class _Refused(Exception):
    """An exception the fake answers with: for one action, a region action, or a whole call."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"{java_class}: {message}")
        self.java_class = java_class
        self.message = message


# -- the cluster's layout ---------------------------------------------------------------------------


@dataclass(eq=False)
class FakeRegion:
    """One region: ``[start_key, end_key)`` of ``table`` (``b""``: an open end), held by server index
    ``server`` (None: in transition, meta names no server). A split parent (``split``) stays in meta,
    offline, and no server holds it."""

    table: str
    start_key: bytes
    end_key: bytes
    region_id: int
    server: int | None
    split: bool = False

    @property
    def name(self) -> bytes:
        """The region name (a meta row key and what a ``RegionSpecifier`` carries): ``table,start,id.``."""
        return b"%s,%s,%d." % (self.table.encode(), self.start_key, self.region_id)

    def holds(self, row: bytes) -> bool:
        return self.start_key <= row and (not self.end_key or row < self.end_key)


@dataclass
class _Table:
    families: frozenset[bytes]
    #: row -> b"family:qualifier" -> timestamp -> value
    rows: dict[bytes, dict[bytes, dict[int, bytes]]] = field(default_factory=dict)


def _meta_order(key: bytes) -> tuple[bytes, bytes, int]:
    """A meta row key as the meta region orders it: table, then start key, then region id (``table,,``
    with no id sorts before every region of ``table``). HBase's ``MetaCellComparator``, for keys whose
    table and id hold no ``,``."""
    table, _, rest = key.partition(b",")
    start, _, region_id = rest.rpartition(b",")
    digits = region_id.split(b".", 1)[0]
    return table, start, int(digits) if digits.isdigit() else -1


# -- what the servers received ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReceivedAction:
    """One ``Action`` of a ``Multi``: its ``index`` as sent, its ``MutationProto`` (row, ``mutate_type``:
    0 append, 1 increment, 2 put, 3 delete; timestamp, nonce, attributes) and its cells from the cellblock."""

    index: int
    row: bytes
    mutate_type: int
    timestamp: int | None
    nonce: int | None
    attributes: dict[str, bytes]
    cells: tuple[Cell, ...]


#: a Multi's region actions: ``(region name, actions)`` in request order
RegionActions = tuple[tuple[bytes, tuple[ReceivedAction, ...]], ...]


@dataclass(frozen=True, slots=True)
class ReceivedScan:
    """One ``ScanRequest``. A scanner's open (``scanner_id`` None) names its ``region`` and carries the
    ``Scan``: ``start``, ``stop`` (``b""``: none), ``reversed``, ``include_start``, ``caching`` and
    ``columns`` (``(family, qualifiers)`` in request order; no qualifier: the whole family; none at all:
    every column). A next page or a close names ``scanner_id``; its ``region`` is that scanner's
    (``b""``: a scanner the server does not know). ``rows`` is ``number_of_rows`` (None: absent),
    ``limit`` ``limit_of_rows`` (0: none), ``close`` ``close_scanner``."""

    region: bytes
    scanner_id: int | None
    rows: int | None = None
    limit: int = 0
    close: bool = False
    start: bytes = b""
    stop: bytes = b""
    columns: tuple[tuple[bytes, tuple[bytes, ...]], ...] = ()
    reversed: bool = False
    include_start: bool = True
    caching: int | None = None

    @property
    def kind(self) -> ScanKind:
        if self.scanner_id is None:
            return "open"
        return "close" if self.close else "next"

    @property
    def families(self) -> tuple[bytes, ...]:
        return tuple(family for family, _ in self.columns)


@dataclass(eq=False)
class ReceivedCall:
    """One request a server received on connection number ``connection`` (numbered across the cluster
    in the order accepted), and how it was answered: ``failed`` maps the index of each action that
    failed to its exception class (a failed region action: each of its actions), ``exception`` is the
    class of a call-level ``ExceptionResponse``, ``dropped`` tells that the connection was closed instead
    of answering, ``silenced`` that the call and its connection went unanswered (:class:`GoSilent`).
    For a ``Multi``, ``region_actions`` lists ``(region name, actions)`` in request order; for a ``Scan``
    (of ``ClientService``), ``scan`` is the request and ``scanned`` the keys of the rows answered, in
    order."""

    server: int
    connection: int
    method: str
    region_actions: RegionActions = ()
    nonce_group: int | None = None
    scan: ReceivedScan | None = None
    scanned: list[bytes] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    exception: str | None = None
    dropped: bool = False
    silenced: bool = False

    @property
    def actions(self) -> list[ReceivedAction]:
        return [a for _, actions in self.region_actions for a in actions]

    @property
    def regions(self) -> list[bytes]:
        """The regions the call is for: a Multi's, in request order; a Scan's one (of a next page or a
        close: its scanner's, when the server knows it)."""
        if self.scan is not None:
            return [self.scan.region] if self.scan.region else []
        return [name for name, _ in self.region_actions]

    @property
    def tables(self) -> set[str]:
        """The tables of :attr:`regions` (``hbase:meta`` for a meta scan)."""
        return {name.partition(b",")[0].decode() for name in self.regions}

    @property
    def rows(self) -> list[bytes]:
        """The rows of the actions, in request order."""
        return [a.row for a in self.actions]

    @property
    def failed_rows(self) -> list[bytes]:
        return [a.row for a in self.actions if a.index in self.failed]


# -- scripted faults --------------------------------------------------------------------------------


@dataclass(eq=False, kw_only=True)
class Directive:
    """A scripted fault, consumed by the calls of ``method`` to server ``server`` (None: any server) it
    matches: ``times`` calls (None: every such call, never used up). ``table``: only calls for a region
    of that table (``hbase:meta``: meta scans); ``scan`` (with ``method="Scan"``): only Scan calls of that
    kind. ``skip``: the first ``skip`` calls it matches go through untouched (it acts on the next ones).
    ``matched`` counts the calls it matched, ``used`` those it affected."""

    server: int | None = None
    method: str = "Multi"
    table: str | None = None
    scan: ScanKind | None = None
    skip: int = 0
    times: int | None = 1
    matched: int = field(default=0, init=False)
    used: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.scan is not None and self.method != "Scan":
            raise ValueError(f"scan={self.scan!r} filters Scan calls: method is {self.method!r}")

    def matches(self, call: ReceivedCall) -> bool:
        return (call.method == self.method and (self.server is None or self.server == call.server)
                and (self.table is None or self.table in call.tables)
                and (self.scan is None or (call.scan is not None and call.scan.kind == self.scan)))


_D = TypeVar("_D", bound=Directive)


def _carries(call: ReceivedCall, region: FakeRegion | None) -> bool:
    """Whether ``call`` is for ``region`` (None: any call is)."""
    return region is None or region.name in call.regions


@dataclass(eq=False)
class FailActions(Directive):
    """Fail the actions of a ``Multi`` (each in its ``ResultOrException``) that are of ``region`` (None: any)
    and whose row passes ``rows`` (None: every row); with ``every`` = k, only the k-th, 2k-th... of those,
    counted in request order. Used up by the calls in which it failed at least one action."""

    java_class: str
    region: FakeRegion | None = None
    rows: Callable[[bytes], bool] | None = None
    every: int = 1
    message: str = "scripted action failure"

    def chosen(self, call: ReceivedCall) -> list[tuple[bytes, int]]:
        """``(region name, action index)`` of the actions of ``call`` to fail."""
        matching = [(name, a.index) for name, actions in call.region_actions
                    if self.region is None or self.region.name == name
                    for a in actions if self.rows is None or self.rows(a.row)]
        return matching[self.every - 1::self.every]


@dataclass(eq=False)
class FailRegion(Directive):
    """Fail the whole region action of ``region`` in a ``Multi`` (``RegionActionResult.exception``)."""

    java_class: str
    region: FakeRegion
    message: str = "scripted region failure"

    def matches(self, call: ReceivedCall) -> bool:
        return super().matches(call) and self.region.name in call.regions


@dataclass(eq=False)
class FailCall(Directive):
    """Answer the whole call with an ``ExceptionResponse`` of ``java_class`` (nothing is applied, a
    scanner's page is not consumed); with ``region`` set, only a call for that region matches."""

    java_class: str
    message: str = "scripted call failure"
    region: FakeRegion | None = None

    def matches(self, call: ReceivedCall) -> bool:
        return super().matches(call) and _carries(call, self.region)


@dataclass(eq=False)
class DropConnection(Directive):
    """Close the connection instead of answering the call: before handling it, or ``after_applying``
    (the mutations are applied, a scanner's page consumed, and the answer is lost); with ``region`` set,
    only a call for that region matches."""

    after_applying: bool = False
    region: FakeRegion | None = None

    def matches(self, call: ReceivedCall) -> bool:
        return super().matches(call) and _carries(call, self.region)


@dataclass(eq=False)
class GoSilent(Directive):
    """Leave the call unanswered, and every later call on its connection, without closing it: a cut
    network or a frozen server as the client sees it (its calls time out, nothing arrives)."""


@dataclass(eq=False)
class BeforeCall(Directive):
    """Run ``change`` (a change of the layout: :meth:`FakeCluster.move`, :meth:`FakeCluster.split`...)
    when a matching call arrives, before it is handled; with ``region`` set, only a call for that region
    matches (a ``Multi`` that carries it, a ``Scan`` that opens a scanner on it or pages one of it)."""

    change: Callable[[], object]
    region: FakeRegion | None = None

    def matches(self, call: ReceivedCall) -> bool:
        return super().matches(call) and _carries(call, self.region)


@dataclass(eq=False, kw_only=True)
class ExpireScanner(Directive):
    """Forget the open scanner a matching Scan call names, before the call is handled (its lease ran out,
    the server lost it): a next page answers ``UnknownScannerException``. By default it matches the next
    page of any scanner; with ``region`` set, of a scanner on that region only."""

    method: str = "Scan"
    scan: ScanKind | None = "next"
    region: FakeRegion | None = None

    def matches(self, call: ReceivedCall) -> bool:
        return super().matches(call) and _carries(call, self.region)


# -- protocol: requests -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Request:
    call_id: int
    method: str
    param: bytes
    cellblock: bytes


def _decode_request(frame: bytes) -> _Request:
    """A request frame without its u32 length: delimited RequestHeader, delimited param, cellblock."""
    size, pos = read_varint(frame, 0)
    call_id, method, cellblock_len = -1, "", 0
    for f, v in iter_fields(frame[pos:pos + size]):
        if f == 1 and isinstance(v, int):
            call_id = v
        elif f == 3 and isinstance(v, bytes):
            method = v.decode()
        elif f == 5 and isinstance(v, bytes):
            cellblock_len = next((n for g, n in iter_fields(v) if g == 1 and isinstance(n, int)), 0)
    pos += size
    size, pos = read_varint(frame, pos)
    param, cellblock = frame[pos:pos + size], frame[pos + size:]
    if call_id < 0 or not method or len(param) != size:
        raise FakeProtocolError(f"a request header without call id or method, or a truncated param: {frame[:64]!r}")
    if len(cellblock) != cellblock_len:
        raise FakeProtocolError(f"{method}: the header announces a cellblock of {cellblock_len} bytes, "
                                f"{len(cellblock)} follow")
    return _Request(call_id, method, param, cellblock)


def _region_name(specifier: bytes) -> bytes:
    kind, name = 0, b""
    for f, v in iter_fields(specifier):
        if f == 1 and isinstance(v, int):
            kind = v
        elif f == 2 and isinstance(v, bytes):
            name = v
    if kind != 1:  # REGION_NAME; an ENCODED_REGION_NAME is not what a client sends
        raise FakeProtocolError(f"a RegionSpecifier of type {kind}, expected 1 (REGION_NAME)")
    return name


def _decode_action(buf: bytes, cellblock: bytes, offset: int) -> tuple[ReceivedAction, int]:
    """One ``Action{index, MutationProto}`` and its cells, peeled off ``cellblock`` at ``offset``."""
    index, proto = 0, b""
    for f, v in iter_fields(buf):
        if f == 1 and isinstance(v, int):
            index = v
        elif f == 2 and isinstance(v, bytes):
            proto = v
    row, mutate_type, count = b"", -1, 0
    timestamp: int | None = None
    nonce: int | None = None
    attributes: dict[str, bytes] = {}
    for f, v in iter_fields(proto):
        if f == 1 and isinstance(v, bytes):
            row = v
        elif f == 2 and isinstance(v, int):
            mutate_type = v
        elif f == 3:
            raise FakeProtocolError("a MutationProto with column_value: the client sends its cells in the cellblock")
        elif f == 4 and isinstance(v, int):
            timestamp = v
        elif f == 5 and isinstance(v, bytes):
            pair = dict(iter_fields(v))
            name, value = pair.get(1, b""), pair.get(2, b"")
            attributes[name.decode() if isinstance(name, bytes) else ""] = value if isinstance(value, bytes) else b""
        elif f == 8 and isinstance(v, int):
            count = v
        elif f == 9 and isinstance(v, int):
            nonce = v
    if not index or not row or mutate_type < 0:
        raise FakeProtocolError(f"an Action without index, row or mutate_type: {buf[:64]!r}")
    try:
        cells, offset = decode_cells(cellblock, count, offset)
    except ValueError as e:
        raise FakeProtocolError(f"action {index}: {count} cells do not decode from the cellblock: {e}") from e
    if any(c.row != row for c in cells):
        raise FakeProtocolError(f"action {index}: a cell of another row than the mutation's {row!r}")
    return ReceivedAction(index, row, mutate_type, timestamp, nonce, attributes, tuple(cells)), offset


def _decode_multi(param: bytes, cellblock: bytes) -> tuple[int | None, RegionActions]:
    """``MultiRequest{1 regionAction*, 2 nonceGroup}``: the nonce group and ``(region name, actions)`` in
    order; every cell of the cellblock must belong to an action."""
    nonce_group: int | None = None
    region_actions: list[tuple[bytes, tuple[ReceivedAction, ...]]] = []
    offset = 0
    for f, v in iter_fields(param):
        if f == 1 and isinstance(v, bytes):
            name, actions = b"", []
            for g, w in iter_fields(v):
                if g == 1 and isinstance(w, bytes):
                    name = _region_name(w)
                elif g == 2 and w:
                    raise FakeProtocolError("an atomic RegionAction: the fake applies actions one by one")
                elif g == 3 and isinstance(w, bytes):
                    action, offset = _decode_action(w, cellblock, offset)
                    actions.append(action)
            region_actions.append((name, tuple(actions)))
        elif f == 2 and isinstance(v, int):
            nonce_group = v
    if offset != len(cellblock):
        raise FakeProtocolError(f"{len(cellblock) - offset} bytes of the cellblock belong to no action")
    return nonce_group, tuple(region_actions)


def _decode_column(buf: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """``Column{1 family, 2 qualifier*}``."""
    family, qualifiers = b"", []
    for f, v in iter_fields(buf):
        if f == 1 and isinstance(v, bytes):
            family = v
        elif f == 2 and isinstance(v, bytes):
            qualifiers.append(v)
    if not family:
        raise FakeProtocolError(f"a Column without a family: {buf[:64]!r}")
    return family, tuple(qualifiers)


def _decode_scan(buf: bytes) -> ReceivedScan:
    """``Scan{1 column*, 3 start_row, 4 stop_row, 15 reversed, 17 caching, 21 include_start_row}`` (the
    request's own fields left to :func:`_decode_scan_request`)."""
    scan = ReceivedScan(b"", None)
    columns: list[tuple[bytes, tuple[bytes, ...]]] = []
    for f, v in iter_fields(buf):
        if f == 1 and isinstance(v, bytes):
            columns.append(_decode_column(v))
        elif f == 3 and isinstance(v, bytes):
            scan = dataclasses.replace(scan, start=v)
        elif f == 4 and isinstance(v, bytes):
            scan = dataclasses.replace(scan, stop=v)
        elif f == 15 and isinstance(v, int):
            scan = dataclasses.replace(scan, reversed=bool(v))
        elif f == 17 and isinstance(v, int):
            scan = dataclasses.replace(scan, caching=v)
        elif f == 21 and isinstance(v, int):
            scan = dataclasses.replace(scan, include_start=bool(v))
    return dataclasses.replace(scan, columns=tuple(columns))


def _decode_scan_request(param: bytes) -> ReceivedScan:
    """``ScanRequest{1 region, 2 scan, 3 scanner_id, 4 number_of_rows, 5 close_scanner, 11 limit_of_rows}``
    (``region`` left empty for a next page or a close: the server names its scanner's)."""
    region = b""
    scan: ReceivedScan | None = None
    rows: int | None = None
    limit, close = 0, False
    scanner_id: int | None = None
    for f, v in iter_fields(param):
        if f == 1 and isinstance(v, bytes):
            region = _region_name(v)
        elif f == 2 and isinstance(v, bytes):
            scan = _decode_scan(v)
        elif f == 3 and isinstance(v, int):
            scanner_id = v
        elif f == 4 and isinstance(v, int):
            rows = v
        elif f == 5 and isinstance(v, int):
            close = bool(v)
        elif f == 11 and isinstance(v, int):
            limit = v
    if scanner_id is None and (not region or scan is None):
        raise FakeProtocolError("a ScanRequest with neither a region and a Scan to open nor a scanner id")
    if scanner_id is not None and (region or scan is not None):
        raise FakeProtocolError(f"a ScanRequest for scanner {scanner_id} that carries a region or a Scan too")
    return dataclasses.replace(scan or ReceivedScan(b"", None), region=region, scanner_id=scanner_id, rows=rows,
                               limit=limit, close=close)


# -- protocol: answers ------------------------------------------------------------------------------


def _stack_trace(java_class: str, message: str) -> str:
    """What HBase sends as a stack trace (``StringUtils.stringifyException``): ``<class>: <message>``, frames."""
    return f"{java_class}: {message}\n\tat org.apache.hadoop.hbase.FakeRegionServer(fake_cluster.py)\n"


def _name_bytes_pair(java_class: str, message: str) -> bytes:
    """``NameBytesPair{1 name, 2 value}``: an action's or a region action's exception."""
    return pb_str(1, java_class) + pb_bytes(2, _stack_trace(java_class, message).encode())


def _table_name(table: str) -> bytes:
    """``TableName{1 namespace, 2 qualifier}`` of ``namespace:name`` (a bare name is in ``default``)."""
    namespace, _, qualifier = table.rpartition(":")
    return pb_bytes(1, (namespace or "default").encode()) + pb_bytes(2, qualifier.encode())


def _region_info(region_id: int, table: str, start: bytes, end: bytes, *, offline: bool = False,
                 split: bool = False) -> bytes:
    """``RegionInfo{1 region_id, 2 table_name, 3 start_key, 4 end_key, 5 offline, 6 split, 7 replica_id}``."""
    return (pb_uint(1, region_id) + pb_bytes(2, _table_name(table)) + pb_bytes(3, start) + pb_bytes(4, end)
            + pb_bool(5, offline) + pb_bool(6, split) + pb_uint(7, 0))


def _answer_frame(call_id: int, message: bytes, cellblock: bytes = b"") -> bytes:
    """``u32 | delimited ResponseHeader{1 call_id, 3 cell_block_meta{1 length}?} | delimited message | cellblock``."""
    header = pb_uint(1, call_id)
    if cellblock:
        header += pb_bytes(3, pb_uint(1, len(cellblock)))
    body = delimited(header) + delimited(message) + cellblock
    return _U32.pack(len(body)) + body


def _exception_frame(call_id: int, refused: _Refused, host: str, port: int) -> bytes:
    """``u32 | delimited ResponseHeader{1 call_id, 2 ExceptionResponse{1 class, 2 stack_trace, 3 hostname,
    4 port, 5 do_not_retry}}``: no message follows."""
    exception = (pb_str(1, refused.java_class) + pb_str(2, _stack_trace(refused.java_class, refused.message))
                 + pb_str(3, host) + pb_uint(4, port) + pb_bool(5, refused.java_class in _FLAGGED_DO_NOT_RETRY))
    body = delimited(pb_uint(1, call_id) + pb_bytes(2, exception))
    return _U32.pack(len(body)) + body


def _scan_response(scanner_id: int, cells_per_result: Sequence[int], more_results: bool, in_region: bool) -> bytes:
    """``ScanResponse{1 cells_per_result*, 2 scanner_id, 3 more_results, 8 more_results_in_region}``."""
    return (b"".join(pb_uint(1, n) for n in cells_per_result) + pb_uint(2, scanner_id)
            + pb_bool(3, more_results) + pb_bool(8, in_region))


def _in_scan(key: bytes, scan: ReceivedScan) -> bool:
    """Whether row ``key`` is in the range of ``scan``: forward from ``start`` (included unless
    ``include_start`` is false) up to ``stop`` (excluded), reversed from ``start`` down to ``stop``
    (excluded); ``b""``: no bound."""
    start, stop = scan.start, scan.stop
    if scan.reversed:
        from_start = not start or key < start or (scan.include_start and key == start)
        return from_start and (not stop or key > stop)
    from_start = not start or key > start or (scan.include_start and key == start)
    return from_start and (not stop or key < stop)


@dataclass(eq=False)
class _Scanner:
    """An open scanner: its region's name and the rows it has still to pass over, in scan order, each
    with the encoded cells to answer for it (none: a row of the asked families without an asked column,
    read past without a result)."""

    region: bytes
    rows: list[tuple[bytes, list[bytes]]]

    def page(self, rows: int, limit: int) -> tuple[list[tuple[bytes, list[bytes]]], bool, bool]:
        """The next page, as ``RSRpcServices.scan`` fills it: results until ``rows`` are collected or the
        region is exhausted, or ``limit`` (0: none) rows are; with ``more_results`` (False: the limit was
        reached) and ``more_results_in_region`` (False: no row left to pass over)."""
        results: list[tuple[bytes, list[bytes]]] = []
        passed = 0
        while len(results) < rows and passed < len(self.rows):
            key, cells = self.rows[passed]
            passed += 1
            if cells:
                results.append((key, cells))
                if limit and len(results) >= limit:
                    break
        del self.rows[:passed]
        return results, not (limit and len(results) >= limit), rows == 0 or bool(self.rows)


# -- the servers ------------------------------------------------------------------------------------


class FakeRegionServer:
    """One fake region server of a :class:`FakeCluster`: a listener on 127.0.0.1 (``port``), its
    connections, its open scanners, and the regions that moved away from it (``moved``: region name ->
    the server index it moved to, answered with ``RegionMovedException``)."""

    def __init__(self, cluster: FakeCluster, index: int) -> None:
        self.cluster = cluster
        self.index = index
        self.host = "127.0.0.1"
        self.port = 0
        self.start_code = _START_CODE + index
        self.moved: dict[bytes, int] = {}
        self._listener: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._scanners: dict[int, _Scanner] = {}
        self._silent: set[int] = set()  # connections that answer nothing more (GoSilent)

    def __repr__(self) -> str:
        return f"FakeRegionServer({self.index}, {self.address})"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def server_name(self) -> str:
        """HBase's ``host,port,startcode``."""
        return f"{self.host},{self.port},{self.start_code}"

    async def start(self) -> None:
        self._listener = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._listener.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening, close every connection and wait for their handlers."""
        if self._listener is not None:
            self._listener.close()
        for writer in list(self._writers):
            writer.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            await self._listener.wait_closed()

    # -- connections ---------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        connection = next(self.cluster._connection_numbers)
        try:
            service = await self._hello(reader)
            while True:
                (size,) = _U32.unpack(await reader.readexactly(4))
                frame = self._answer(connection, service, _decode_request(await reader.readexactly(size)))
                if frame is None:
                    break
                if not frame:  # silenced: read on, answer nothing
                    continue
                writer.write(frame)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed the connection
        except Exception as e:
            self.cluster.errors.append(e)
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._tasks.discard(task)

    @staticmethod
    async def _hello(reader: asyncio.StreamReader) -> str:
        """The preamble and ConnectionHeader; the service the connection speaks."""
        preamble = await reader.readexactly(len(PREAMBLE))
        if preamble != PREAMBLE:
            raise FakeProtocolError(f"preamble {preamble!r}, expected {PREAMBLE!r} (HBas, version 0, SIMPLE)")
        (size,) = _U32.unpack(await reader.readexactly(4))
        service, codec = "", ""
        for f, v in iter_fields(await reader.readexactly(size)):
            if f == 2 and isinstance(v, bytes):
                service = v.decode()
            elif f == 3 and isinstance(v, bytes):
                codec = v.decode()
        if codec != CODEC_KEYVALUE:
            raise FakeProtocolError(f"cellblock codec {codec!r}: the fake speaks {CODEC_KEYVALUE} only")
        return service

    @property
    def scanners(self) -> dict[int, bytes]:
        """The scanners open on this server: scanner id -> region name."""
        return {scanner_id: scanner.region for scanner_id, scanner in self._scanners.items()}

    def _answer(self, connection: int, service: str, request: _Request) -> bytes | None:
        """Record the call, play the directives it matches and handle it: the answer's frame, None to
        close the connection without one, or ``b""`` to answer nothing (a silenced connection)."""
        call = ReceivedCall(self.index, connection, request.method)
        if request.method == "Multi":
            call.nonce_group, call.region_actions = _decode_multi(request.param, request.cellblock)
        elif (service, request.method) == (CLIENT_SERVICE, "Scan"):
            call.scan = self._scan_request(request.param)
        self.cluster._received(call)
        if call.scan is not None and call.scan.scanner_id is not None:
            for expiry in self.cluster._firing(call, ExpireScanner):
                self.cluster._use(expiry)
                self._scanners.pop(call.scan.scanner_id, None)
        fault = self.cluster._call_fault(call)
        if isinstance(fault, GoSilent) or connection in self._silent:
            call.silenced = True
            self._silent.add(connection)
            return b""
        if isinstance(fault, DropConnection) and not fault.after_applying:
            call.dropped = True
            return None
        refused = _Refused(fault.java_class, fault.message) if isinstance(fault, FailCall) else None
        if refused is None:
            try:
                frame = _answer_frame(request.call_id, *self._handle(service, request, call))
            except _Refused as e:
                refused = e
        if refused is not None:
            call.exception = refused.java_class
            call.failed = {a.index: refused.java_class for a in call.actions}
            frame = _exception_frame(request.call_id, refused, self.host, self.port)
        if isinstance(fault, DropConnection):
            call.dropped = True
            return None
        return frame

    def _handle(self, service: str, request: _Request, call: ReceivedCall) -> tuple[bytes, bytes]:
        """``(response message, cellblock)`` of one call; raises :class:`_Refused` to fail it whole."""
        if (service, request.method) == (META_SERVICE, "GetMetaRegionLocations"):
            return self._meta_locations(), b""
        if (service, request.method) == (CLIENT_SERVICE, "Scan"):
            return self._scan(call)
        if (service, request.method) == (CLIENT_SERVICE, "Multi"):
            return self._multi(call)
        raise _Refused(DO_NOT_RETRY, f"the fake does not serve {service}.{request.method}")

    # -- methods -------------------------------------------------------------------------------------

    def _meta_locations(self) -> bytes:
        """``GetMetaRegionLocationsResponse{1 RegionLocation{1 RegionInfo, 2 ServerName, 3 seq_num}}``."""
        meta = self.cluster.servers[self.cluster.meta_server]
        server = pb_str(1, meta.host) + pb_uint(2, meta.port) + pb_uint(3, meta.start_code)
        location = pb_bytes(1, _region_info(1, _META_TABLE, b"", b"")) + pb_bytes(2, server) + pb_uint(3, 1)
        return pb_bytes(1, location)

    def _refusal(self, region_name: bytes) -> _Refused | None:
        """Why this server cannot serve ``region_name`` (None: it holds it)."""
        if region_name == META_REGION:
            if self.cluster.meta_server == self.index:
                return None
        else:
            region = self.cluster._region_named(region_name)
            if region is not None and region.server == self.index and not region.split:
                return None
        moved_to = self.moved.get(region_name)
        if moved_to is not None:
            there = self.cluster.servers[moved_to]
            return _Refused(REGION_MOVED, f"Region moved to: hostname={there.host} port={there.port} "
                                          f"startCode={there.start_code}. As of locationSeqNum=1.")
        return _Refused(NOT_SERVING, f"Region {region_name.decode(errors='replace')} is not online on "
                                     f"{self.server_name}")

    def _scan_request(self, param: bytes) -> ReceivedScan:
        """The ``ScanRequest`` in ``param``; a next page's or a close's with the region of its scanner."""
        scan = _decode_scan_request(param)
        scanner = None if scan.scanner_id is None else self._scanners.get(scan.scanner_id)
        return scan if scanner is None else dataclasses.replace(scan, region=scanner.region)

    def _scan(self, call: ReceivedCall) -> tuple[bytes, bytes]:
        """Open a scanner (and answer its first page), answer an open scanner's next page, or close it;
        the keys of the rows answered go to ``call.scanned``."""
        scan = call.scan
        assert scan is not None
        if scan.scanner_id is None:
            scanner_id = next(self.cluster._scanner_ids)
            scanner = self._scanners[scanner_id] = self._open(scan)
        else:
            scanner_id = scan.scanner_id
            known = self._scanners.get(scanner_id)
            if known is None:
                raise _Refused(UNKNOWN_SCANNER, f"Unknown scanner '{scanner_id}'. This can happen due to any of "
                                                f"the following reasons: a) Scanner id given is wrong, b) Scanner "
                                                f"lease expired because of long wait between consecutive client "
                                                f"checkins, c) Server may be closing down")
            if self._refusal(known.region) is not None:  # the region closed under the scanner: moved, split
                del self._scanners[scanner_id]
                raise _Refused(NOT_SERVING, f"Region has changed on the scanner {scanner_id}: "
                                            f"regionName={known.region.decode(errors='replace')}, closing...")
            scanner = known
        rows = scan.rows if scan.rows is not None else (0 if scan.close else 1)  # HBase's defaults
        page, more_results, in_region = scanner.page(rows, scan.limit)
        if scan.close or not (more_results and in_region):
            del self._scanners[scanner_id]
        call.scanned = [key for key, _ in page]
        cells = b"".join(cell for _, row_cells in page for cell in row_cells)
        return _scan_response(scanner_id, [len(c) for _, c in page], more_results, in_region), cells

    def _open(self, scan: ReceivedScan) -> _Scanner:
        """A scanner of ``scan`` over its region's rows; raises :class:`_Refused` when this server does
        not hold the region (or a family asked is not the table's)."""
        refusal = self._refusal(scan.region)
        if refusal is not None:
            raise refusal
        if scan.region == META_REGION:
            if scan.reversed or not scan.include_start:
                raise _Refused(DO_NOT_RETRY, "the fake scans meta forward from an included start row only")
            return _Scanner(META_REGION, self.cluster._meta_rows(scan.start, scan.stop, scan.families))
        region = self.cluster._region_named(scan.region)
        assert region is not None  # this server holds it
        return _Scanner(region.name, self.cluster._region_rows(region, scan))

    def _multi(self, call: ReceivedCall) -> tuple[bytes, bytes]:
        """``MultiResponse{1 RegionActionResult{1 ResultOrException{1 index, 2 Result | 3 exception},
        2 exception}}`` in request order, and the cellblock of the increments' results."""
        region_faults = self.cluster._region_faults(call)
        action_faults = self.cluster._action_faults(call)
        results: list[bytes] = []
        cellblock: list[bytes] = []
        for name, actions in call.region_actions:
            region = self.cluster._region_named(name)
            refusal = self._refusal(name) or region_faults.get(name)
            if refusal is None and region is None:  # hbase:meta, on its server
                refusal = _Refused(DO_NOT_RETRY, f"the fake writes no mutation to {name!r}")
            if refusal is not None:
                call.failed.update((a.index, refusal.java_class) for a in actions)
                results.append(pb_bytes(2, _name_bytes_pair(refusal.java_class, refusal.message)))
                continue
            assert region is not None
            outcomes: list[bytes] = []
            for action in actions:
                outcome, cells = self._action(call, region, action, action_faults.get((name, action.index)))
                outcomes.append(outcome)
                cellblock += cells
            results.append(b"".join(pb_bytes(1, o) for o in outcomes))
        return b"".join(pb_bytes(1, r) for r in results), b"".join(cellblock)

    def _action(self, call: ReceivedCall, region: FakeRegion, action: ReceivedAction,
                fault: _Refused | None) -> tuple[bytes, list[bytes]]:
        """One action's ``ResultOrException`` and the cells its Result announces: ``fault``, or the
        action applied (or refused by the data: a missing family, a row outside the region)."""
        refused = fault
        if refused is None:
            try:
                result, cells = self.cluster._apply(region, action, call.nonce_group)
            except _Refused as e:
                refused = e
            else:
                return pb_uint(1, action.index) + pb_bytes(2, result), cells
        call.failed[action.index] = refused.java_class
        return pb_uint(1, action.index) + pb_bytes(3, _name_bytes_pair(refused.java_class, refused.message)), []


# -- the cluster ------------------------------------------------------------------------------------


class FakeCluster:
    """Fake region servers, the regions of their tables, the data written and the scripted faults
    (module docstring). Use as ``async with FakeCluster(3) as cluster``; the servers listen inside the
    block, and leaving it raises what went wrong inside the fake (an ``ExceptionGroup``)."""

    def __init__(self, servers: int = 3, *, meta_server: int = 0) -> None:
        if not 0 <= meta_server < servers:
            raise ValueError(f"meta_server {meta_server} is not one of the {servers} servers")
        self.servers = [FakeRegionServer(self, i) for i in range(servers)]
        #: the index of the server holding hbase:meta
        self.meta_server = meta_server
        self._registry = meta_server
        #: every call received, in order of arrival
        self.calls: list[ReceivedCall] = []
        #: how many times a mutation of ``(table, row)`` was applied (a repeated increment nonce is not)
        self.applied: Counter[tuple[str, bytes]] = Counter()
        #: how many times each ``(nonce group, nonce)`` arrived with an action
        self.nonces_seen: Counter[tuple[int, int]] = Counter()
        #: what went wrong inside the fake (raised when the ``async with`` block ends)
        self.errors: list[Exception] = []
        self._tables: dict[str, _Table] = {}
        self._regions: list[FakeRegion] = []
        self._directives: list[Directive] = []
        self._nonces_applied: set[tuple[int, int]] = set()
        self._region_ids = itertools.count(1001)
        self._connection_numbers = itertools.count(1)
        self._scanner_ids = itertools.count(1)
        self._clock = itertools.count(_START_CODE + 60_000)  # the timestamp of cells written at "latest"

    def __repr__(self) -> str:
        return f"FakeCluster({self.servers}, tables={sorted(self._tables)})"

    async def __aenter__(self) -> Self:
        for server in self.servers:
            await server.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        for server in self.servers:
            await server.stop()
        if self.errors and e is None:
            raise ExceptionGroup("the fake cluster failed to serve (FakeProtocolError: bytes HBase would refuse)",
                                 self.errors)

    @property
    def master(self) -> str:
        """``host:port`` to give a client as its master: the server that held meta when the cluster was made."""
        return self.servers[self._registry].address

    # -- layout --------------------------------------------------------------------------------------

    def create_table(self, table: str, splits: Sequence[bytes] = (), *, families: Sequence[bytes] = (b"d",),
                     servers: Sequence[int | None] | None = None) -> list[FakeRegion]:
        """A table of ``len(splits) + 1`` regions; region i on server ``servers[i]`` (default: round robin)."""
        if table in self._tables:
            raise ValueError(f"table {table!r} exists")
        bounds = [b"", *sorted(splits), b""]
        placement = list(servers) if servers is not None else [i % len(self.servers) for i in range(len(bounds) - 1)]
        if len(placement) != len(bounds) - 1:
            raise ValueError(f"{len(bounds) - 1} regions, {len(placement)} servers given")
        self._tables[table] = _Table(frozenset(families))
        made = [FakeRegion(table, start, end, next(self._region_ids), server)
                for start, end, server in zip(bounds[:-1], bounds[1:], placement, strict=True)]
        self._regions += made
        return made

    def regions(self, table: str) -> list[FakeRegion]:
        """The online regions of ``table`` (split parents left out), by start key."""
        return sorted((r for r in self._regions if r.table == table and not r.split), key=lambda r: r.start_key)

    def region_of(self, table: str, row: bytes) -> FakeRegion:
        return next(r for r in self.regions(table) if r.holds(row))

    def move(self, region: FakeRegion, to: int | None, *, remembered: bool = True) -> None:
        """Move ``region`` to server ``to`` (None: in transition, no server). The old server answers
        ``RegionMovedException`` for it when ``remembered``, else ``NotServingRegionException``."""
        if region.server is not None and to is not None and remembered:
            self.servers[region.server].moved[region.name] = to
        if to is not None:
            self.servers[to].moved.pop(region.name, None)
        region.server = to

    def split(self, region: FakeRegion, at: bytes,
              servers: tuple[int | None, int | None] | None = None) -> tuple[FakeRegion, FakeRegion]:
        """Split ``region`` at row ``at``: the parent stays in meta as a split parent (offline), the
        daughters ``[start, at)`` and ``[at, end)`` go to ``servers`` (default: the parent's server)."""
        if not region.holds(at) or at == region.start_key or region.split:
            raise ValueError(f"cannot split {region.name!r} at {at!r}")
        left_on, right_on = servers if servers is not None else (region.server, region.server)
        left = FakeRegion(region.table, region.start_key, at, next(self._region_ids), left_on)
        right = FakeRegion(region.table, at, region.end_key, next(self._region_ids), right_on)
        region.split = True
        self._regions += (left, right)
        return left, right

    def move_meta(self, to: int) -> None:
        """Move ``hbase:meta`` to server ``to``; the old holder answers ``RegionMovedException`` for it."""
        self.servers[self.meta_server].moved[META_REGION] = to
        self.servers[to].moved.pop(META_REGION, None)
        self.meta_server = to

    def _region_named(self, name: bytes) -> FakeRegion | None:
        return next((r for r in self._regions if r.name == name), None)

    def _region_rows(self, region: FakeRegion, scan: ReceivedScan) -> list[tuple[bytes, list[bytes]]]:
        """The rows a scanner opened by ``scan`` passes over in ``region``, in scan order, each with its
        encoded cells: every asked column's newest version, in family and qualifier order. A row with none of
        the asked families is not met; one with some but none of the asked columns is met with no cell.
        Raises :class:`_Refused` (``NoSuchColumnFamilyException``) for a family the table lacks."""
        table = self._tables[region.table]
        wanted: dict[bytes, frozenset[bytes] | None] = {}  # family -> its asked qualifiers (None: all)
        for family, qualifiers in scan.columns:
            if family not in table.families:
                raise _Refused(NO_SUCH_FAMILY, f"Column family {family.decode(errors='replace')} does not exist "
                                               f"in region {region.name.decode()} in table '{region.table}'")
            known = wanted.get(family, frozenset())
            wanted[family] = None if known is None or not qualifiers else known | frozenset(qualifiers)

        def asked(family: bytes, qualifier: bytes) -> bool:
            qualifiers = wanted.get(family)
            return qualifiers is None or qualifier in qualifiers

        out: list[tuple[bytes, list[bytes]]] = []
        for key in sorted((k for k in table.rows if region.holds(k) and _in_scan(k, scan)), reverse=scan.reversed):
            columns = sorted(_family_qualifier(column) for column in table.rows[key])
            met = [(family, qualifier) for family, qualifier in columns if not wanted or family in wanted]
            if not met:
                continue
            cells: list[bytes] = []
            for family, qualifier in met:
                if asked(family, qualifier):
                    versions = table.rows[key][family + b":" + qualifier]
                    newest = max(versions)
                    cells.append(encode_cell(key, family, qualifier, newest, PUT, versions[newest]))
            out.append((key, cells))
        return out

    def _meta_rows(self, start: bytes, stop: bytes, families: Sequence[bytes]) -> list[tuple[bytes, list[bytes]]]:
        """The meta rows in ``[start, stop)`` (meta order), each as its key and its encoded cells."""
        if families and b"info" not in families:  # every meta cell is of family info
            return []
        low = _meta_order(start) if start else None
        high = _meta_order(stop) if stop else None

        def inside(region: FakeRegion) -> bool:
            order = _meta_order(region.name)
            return (low is None or order >= low) and (high is None or order < high)

        return [(r.name, self._meta_cells(r)) for r in sorted(self._regions, key=lambda r: _meta_order(r.name))
                if inside(r)]

    def _meta_cells(self, region: FakeRegion) -> list[bytes]:
        """``info:regioninfo``, ``info:server`` and ``info:serverstartcode`` (while it has a server),
        ``info:state``: a region's meta row, in qualifier order."""
        def cell(qualifier: bytes, value: bytes) -> bytes:
            return encode_cell(region.name, b"info", qualifier, region.region_id, PUT, value)

        info = _region_info(region.region_id, region.table, region.start_key, region.end_key,
                            offline=region.split, split=region.split)
        cells = [cell(b"regioninfo", b"PBUF" + info)]
        if region.server is not None and not region.split:
            server = self.servers[region.server]
            cells += (cell(b"server", server.address.encode()), cell(b"serverstartcode", _I64.pack(server.start_code)))
        state = b"SPLIT" if region.split else b"OPEN" if region.server is not None else b"OPENING"
        return [*cells, cell(b"state", state)]

    # -- faults ----------------------------------------------------------------------------------------

    def inject(self, *directives: Directive) -> None:
        """Script faults: the servers consume them, in this order, on the calls they match."""
        self._directives += directives

    def unconsumed(self) -> list[Directive]:
        """The directives not used up yet (those of ``times=None`` always are)."""
        return list(self._directives)

    def _use(self, directive: Directive) -> None:
        directive.used += 1
        if directive.times is not None and directive.used >= directive.times:
            self._directives.remove(directive)

    def _received(self, call: ReceivedCall) -> None:
        """Record ``call``, count it for the directives it matches, and run the :class:`BeforeCall` changes
        it triggers."""
        self.calls.append(call)
        for action in call.actions:
            if action.nonce is not None:
                self.nonces_seen[(call.nonce_group or 0, action.nonce)] += 1
        for directive in self._directives:
            if directive.matches(call):
                directive.matched += 1
        for before in self._firing(call, BeforeCall):
            self._use(before)
            before.change()

    def _firing(self, call: ReceivedCall, kind: type[_D]) -> list[_D]:
        """The directives of type ``kind`` that act on ``call`` (it is being handled): those it matches, past
        their first ``skip`` matching calls; in the order injected."""
        return [d for d in self._directives if isinstance(d, kind) and d.matches(call) and d.matched > d.skip]

    def _call_fault(self, call: ReceivedCall) -> FailCall | DropConnection | GoSilent | None:
        for directive in self._firing(call, Directive):
            if isinstance(directive, FailCall | DropConnection | GoSilent):
                self._use(directive)
                return directive
        return None

    def _region_faults(self, call: ReceivedCall) -> dict[bytes, _Refused]:
        """Region name -> the exception its whole region action fails with (:class:`FailRegion`)."""
        out: dict[bytes, _Refused] = {}
        for directive in self._firing(call, FailRegion):
            if directive.region.name not in out:
                self._use(directive)
                out[directive.region.name] = _Refused(directive.java_class, directive.message)
        return out

    def _action_faults(self, call: ReceivedCall) -> dict[tuple[bytes, int], _Refused]:
        """``(region name, action index)`` -> the exception the action fails with (:class:`FailActions`)."""
        out: dict[tuple[bytes, int], _Refused] = {}
        for directive in self._firing(call, FailActions):
            chosen = [key for key in directive.chosen(call) if key not in out]
            if chosen:
                self._use(directive)
                out.update((key, _Refused(directive.java_class, directive.message)) for key in chosen)
        return out

    # -- data ----------------------------------------------------------------------------------------

    def put(self, table: str, row: bytes, values: Mapping[bytes, bytes], timestamp: int | None = None) -> None:
        """Write ``values`` (``b"family:qualifier"`` -> value) into ``row`` of ``table`` as a put would, at
        ``timestamp`` (None: the fake's clock), without a call (nor a count in :attr:`applied`)."""
        data = self._tables[table]
        for column, value in values.items():
            family, sep, _ = column.partition(b":")
            if not sep or family not in data.families:
                raise ValueError(f"{column!r} is not a column of a family of table {table!r}")
            ts = next(self._clock) if timestamp is None else timestamp
            data.rows.setdefault(row, {}).setdefault(column, {})[ts] = value

    def keys(self, table: str) -> list[bytes]:
        """The keys of ``table``'s rows, in order."""
        return sorted(self._tables[table].rows)

    def open_scanners(self) -> list[tuple[int, bytes]]:
        """``(server index, region name)`` of every scanner open on the servers."""
        return [(server.index, region) for server in self.servers for region in server.scanners.values()]

    def versions(self, table: str, row: bytes, column: bytes) -> dict[int, bytes]:
        """Every version of one cell (``b"family:qualifier"``): timestamp -> value."""
        return dict(self._tables[table].rows.get(row, {}).get(column, {}))

    def row(self, table: str, row: bytes) -> dict[bytes, bytes]:
        """A row's newest values by column (``{}``: no such row)."""
        return {column: versions[max(versions)] for column, versions in self._tables[table].rows.get(row, {}).items()}

    def counter(self, table: str, row: bytes, column: bytes) -> int:
        """An incremented cell's value (0 when never incremented)."""
        value = self.row(table, row).get(column)
        return 0 if value is None else int(_I64.unpack(value)[0])

    def _apply(self, region: FakeRegion, action: ReceivedAction, nonce_group: int | None) -> tuple[bytes, list[bytes]]:
        """Apply one mutation of ``region``: the ``Result`` to answer and the cells its
        ``associated_cell_count`` announces in the response's cellblock. Raises :class:`_Refused`."""
        table = self._tables[region.table]
        if not region.holds(action.row):
            raise _Refused(WRONG_REGION, f"Requested row out of range for doMiniBatchMutation on HRegion "
                                         f"{region.name.decode()}, startKey='{region.start_key!r}', "
                                         f"endKey='{region.end_key!r}', row='{action.row!r}'")
        for cell in action.cells:
            if cell.family not in table.families:
                raise _Refused(NO_SUCH_FAMILY, f"Column family {cell.family.decode(errors='replace')} does not "
                                               f"exist in region {region.name.decode()} in table '{region.table}'")
        row = table.rows.setdefault(action.row, {})
        try:
            if action.mutate_type == MUTATE_PUT:
                for cell in action.cells:
                    ts = next(self._clock) if cell.timestamp == LATEST_TIMESTAMP else cell.timestamp
                    row.setdefault(cell.family + b":" + cell.qualifier, {})[ts] = cell.value
            elif action.mutate_type == MUTATE_DELETE:
                _delete(row, action)
            elif action.mutate_type == MUTATE_INCREMENT:
                return self._increment(row, action, nonce_group, region.table)
            else:
                raise _Refused(DO_NOT_RETRY, f"mutate type {action.mutate_type} is not served by the fake")
        finally:
            if not row:
                del table.rows[action.row]
        self.applied[(region.table, action.row)] += 1
        return b"", []

    def _increment(self, row: dict[bytes, dict[int, bytes]], action: ReceivedAction, nonce_group: int | None,
                   table: str) -> tuple[bytes, list[bytes]]:
        """Add each cell's i64 amount, once per ``(nonce group, nonce)`` (a repeated pair changes nothing and
        answers the current values, as HBase's nonce manager); the Result announces the new values."""
        pair = None if action.nonce is None else (nonce_group or 0, action.nonce)
        repeated = pair is not None and pair in self._nonces_applied
        out: list[bytes] = []
        for cell in action.cells:
            column = cell.family + b":" + cell.qualifier
            versions = row.get(column, {})
            ts, value = (max(versions), versions[max(versions)]) if versions else (0, _I64.pack(0))
            if len(value) != 8 or len(cell.value) != 8:
                raise _Refused(DO_NOT_RETRY, f"Field is not a long, it's {len(value)} bytes wide")
            if not repeated:
                ts, value = next(self._clock), _I64.pack(_I64.unpack(value)[0] + _I64.unpack(cell.value)[0])
                row.setdefault(column, {})[ts] = value
            out.append(encode_cell(action.row, cell.family, cell.qualifier, ts, PUT, value))
        if not repeated:
            if pair is not None:
                self._nonces_applied.add(pair)
            self.applied[(table, action.row)] += 1
        return pb_uint(2, len(out)), out  # Result{2 associated_cell_count}


def _family_qualifier(column: bytes) -> tuple[bytes, bytes]:
    """``b"family:qualifier"`` split at its first ``:`` (a family holds none; a qualifier may)."""
    family, _, qualifier = column.partition(b":")
    return family, qualifier


def _drop(row: dict[bytes, dict[int, bytes]], columns: Iterable[bytes], *, upto: int | None = None,
          exactly: int | None = None) -> None:
    """Remove the versions of ``columns`` of one row at or below ``upto``, or at ``exactly``."""
    for column in [c for c in columns if c in row]:
        versions = row[column]
        for ts in [t for t in versions if (upto is not None and t <= upto) or t == exactly]:
            del versions[ts]
        if not versions:
            del row[column]


def _delete(row: dict[bytes, dict[int, bytes]], action: ReceivedAction) -> None:
    """A delete applied to one row's versions: without cells the whole row up to the mutation's
    timestamp, else per cell type (``connectors.hbase.native.cells``)."""
    if not action.cells:
        _drop(row, row, upto=LATEST_TIMESTAMP if action.timestamp is None else action.timestamp)
    for cell in action.cells:
        column, ts = cell.family + b":" + cell.qualifier, cell.timestamp
        family = [c for c in row if c.startswith(cell.family + b":")]
        if cell.type == DELETE_COLUMN:
            _drop(row, [column], upto=ts)
        elif cell.type == DELETE:  # one version; the newest at the latest timestamp
            _drop(row, [column], exactly=max(row[column]) if ts == LATEST_TIMESTAMP and column in row else ts)
        elif cell.type == DELETE_FAMILY:
            _drop(row, family, upto=ts)
        elif cell.type == DELETE_FAMILY_VERSION:
            _drop(row, family, exactly=ts)
