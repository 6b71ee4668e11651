"""The protobuf messages of HBase's client protocol that a writer and a meta scan need, encoded and
decoded by hand (HBase 2.6 ``client/Client.proto``, ``HBase.proto``, ``client/Registry.proto``,
package ``hbase.pb``, proto2). Pure: no I/O. Only the fields listed are written or read; any other
field of a decoded message is skipped.

Field numbers::

    HBase.proto
      RegionSpecifier   1 type (enum: REGION_NAME=1, ENCODED_REGION_NAME=2)  2 value (bytes)
      NameBytesPair     1 name (string)  2 value (bytes)
      TableName         1 namespace (bytes)  2 qualifier (bytes)
      ServerName        1 host_name (string)  2 port (uint32)  3 start_code (uint64)
      RegionInfo        1 region_id (uint64)  2 table_name  3 start_key  4 end_key  5 offline (bool)
                        6 split (bool)  7 replica_id (int32)
      RegionLocation    1 region_info  2 server_name  3 seq_num (int64)
    Client.proto
      Column            1 family  2 qualifier (repeated)
      MutationProto     1 row  2 mutate_type (APPEND=0 INCREMENT=1 PUT=2 DELETE=3)  4 timestamp (uint64)
                        5 attribute (NameBytesPair, repeated)  6 durability  8 associated_cell_count (int32)
      Action            1 index (uint32)  2 mutation
      RegionAction      1 region  2 atomic  3 action (repeated)
      MultiRequest      1 regionAction (repeated)
      Result            1 cell (repeated, pb cells: unused)  2 associated_cell_count  5 partial
      ResultOrException 1 index  2 result  3 exception (NameBytesPair: class name, stringified exception)
      RegionActionResult 1 resultOrException (repeated)  2 exception (whole-region failure)
      MultiResponse     1 regionActionResult (repeated, in RegionAction order)  2 processed
      Scan              1 column (repeated)  3 start_row  4 stop_row  7 max_versions  15 reversed
                        17 caching  21 include_start_row (default true)
      ScanRequest       1 region  2 scan  3 scanner_id  4 number_of_rows  5 close_scanner  11 limit_of_rows
      ScanResponse      1 cells_per_result (repeated uint32)  2 scanner_id  3 more_results  5 results
                        7 partial_flag_per_result  8 more_results_in_region
    client/Registry.proto (service ClientMetaService)
      GetMetaRegionLocationsRequest  (no fields)
      GetMetaRegionLocationsResponse 1 meta_locations (RegionLocation, repeated)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from connectors.hbase.native.wire import (
    WireError,
    iter_fields,
    pb_bool,
    pb_bytes,
    pb_str,
    pb_uint,
    read_varint,
    signed32,
)

__all__ = [
    "MUTATE_DELETE",
    "MUTATE_INCREMENT",
    "MUTATE_PUT",
    "ActionFailure",
    "RegionActionResult",
    "RegionInfo",
    "RegionLocation",
    "ScanPage",
    "ServerName",
    "action",
    "decode_meta_locations",
    "decode_multi_response",
    "decode_region_info",
    "decode_scan_response",
    "decode_server_name",
    "multi_request",
    "mutation_proto",
    "region_action",
    "region_specifier",
    "scan_close",
    "scan_columns",
    "scan_next",
    "scan_open",
]

MUTATE_INCREMENT, MUTATE_PUT, MUTATE_DELETE = 1, 2, 3
_REGION_NAME = 1
_TTL = struct.Struct(">q")


def _text(v: int | bytes) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else ""


# -- requests ----------------------------------------------------------------------------------------


def region_specifier(region_name: bytes) -> bytes:
    """``RegionSpecifier{type=REGION_NAME, value=<full region name>}``."""
    return pb_uint(1, _REGION_NAME) + pb_bytes(2, region_name)


def mutation_proto(row: bytes, mutate_type: int, cell_count: int, timestamp: int | None = None,
                   ttl_ms: int | None = None, nonce: int | None = None) -> bytes:
    """``MutationProto{row, mutate_type, timestamp?, attribute{"_ttl": i64 BE}?, associated_cell_count,
    nonce?}``: a placeholder whose ``cell_count`` cells follow in the request's cellblock.
    ``associated_cell_count`` is always written, also as 0 (a whole-row delete: the server then deletes
    every family up to ``timestamp``). ``nonce`` (an increment's, not 0): with the request's nonce
    group, the server applies the mutation once however often it is sent."""
    out = pb_bytes(1, row) + pb_uint(2, mutate_type)
    if timestamp is not None:
        out += pb_uint(4, timestamp)
    if ttl_ms is not None:
        out += pb_bytes(5, pb_str(1, "_ttl") + pb_bytes(2, _TTL.pack(ttl_ms)))
    out += pb_uint(8, cell_count)
    return out + pb_uint(9, nonce) if nonce is not None else out


def action(index: int, mutation: bytes) -> bytes:
    """``Action{index, mutation}``: the server echoes ``index`` in its ``ResultOrException``."""
    return pb_uint(1, index) + pb_bytes(2, mutation)


def region_action(region_name: bytes, actions: Iterable[bytes]) -> bytes:
    """``RegionAction{region, action...}`` (not atomic)."""
    return pb_bytes(1, region_specifier(region_name)) + b"".join(pb_bytes(3, a) for a in actions)


def multi_request(region_actions: Iterable[bytes], nonce_group: int | None = None) -> bytes:
    """``MultiRequest{regionAction..., nonceGroup?}``. The cellblock's cells must follow the actions' order
    across all region actions: the server peels ``associated_cell_count`` cells per mutation in turn."""
    out = b"".join(pb_bytes(1, ra) for ra in region_actions)
    return out + pb_uint(2, nonce_group) if nonce_group is not None else out


def scan_columns(columns: Sequence[bytes]) -> bytes:
    """``Column{1 family, 2 qualifier*}`` fields (field 1 of ``Scan``), one per family in first-seen
    order: ``b"f"`` asks for the whole family (and then wins over columns of it), ``b"f:q"`` for one
    column (``b"f:"`` is the empty qualifier), as the Thrift gateway reads its column names."""
    wanted: dict[bytes, list[bytes] | None] = {}
    for column in columns:
        family, sep, qualifier = column.partition(b":")
        if not sep:
            wanted[family] = None
        elif family not in wanted:
            wanted[family] = [qualifier]
        elif (quals := wanted[family]) is not None:
            quals.append(qualifier)
    return b"".join(pb_bytes(1, pb_bytes(1, f) + b"".join(pb_bytes(2, q) for q in quals or ()))
                    for f, quals in wanted.items())


def _scan(start: bytes, stop: bytes, columns: Sequence[bytes], caching: int, reversed_: bool,
          include_start: bool) -> bytes:
    out = scan_columns(columns)
    if start:
        out += pb_bytes(3, start)
    if stop:
        out += pb_bytes(4, stop)
    if reversed_:
        out += pb_bool(15, True)
    out += pb_uint(17, caching)
    return out if include_start else out + pb_bool(21, False)


def scan_open(region_name: bytes, start: bytes, stop: bytes, columns: Sequence[bytes] = (), rows: int = 1000,
              *, limit: int = 0, reversed_: bool = False, include_start: bool = True) -> bytes:
    """``ScanRequest{region, scan{column*, start_row, stop_row, reversed?, caching, include_start_row?},
    number_of_rows, limit_of_rows?}`` opening a scanner on one region from ``start`` (``b""``: the
    region's first row, or its last when ``reversed_``) towards ``stop`` (exclusive; ``b""``: no
    bound). ``columns`` as :func:`scan_columns` takes them (none: every column). ``include_start``
    False leaves the ``start`` row out (a scan resumed after it). With a positive ``limit`` the
    server closes the scanner after that many rows."""
    out = (pb_bytes(1, region_specifier(region_name))
           + pb_bytes(2, _scan(start, stop, columns, rows, reversed_, include_start)) + pb_uint(4, rows))
    if limit > 0:
        out += pb_uint(11, limit)
    return out


def scan_next(scanner_id: int, rows: int) -> bytes:
    """``ScanRequest{scanner_id, number_of_rows}``: the next page of an open scanner."""
    return pb_uint(3, scanner_id) + pb_uint(4, rows)


def scan_close(scanner_id: int) -> bytes:
    """``ScanRequest{scanner_id, number_of_rows=0, close_scanner=true}``."""
    return pb_uint(3, scanner_id) + pb_uint(4, 0) + pb_bool(5, True)


# -- MultiResponse -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionFailure:
    """An exception the server returned for one action (``index``, as sent) or, with ``index`` None,
    for a whole region action. ``java_class`` is the exception's class name
    (``org.apache.hadoop.hbase.NotServingRegionException``); ``message`` the first line of the
    stringified exception, without its ``<class>: `` head."""

    index: int | None
    java_class: str
    message: str


@dataclass(frozen=True, slots=True)
class RegionActionResult:
    """One ``RegionActionResult``: the indexes that succeeded and the failures (a whole-region
    ``exception`` is one failure with ``index`` None and means every action of the region failed)."""

    ok: list[int] = field(default_factory=list)
    failures: list[ActionFailure] = field(default_factory=list)


def _name_bytes_pair(buf: bytes, index: int | None) -> ActionFailure:
    name, value = "", b""
    for f, v in iter_fields(buf):
        if f == 1:
            name = _text(v)
        elif f == 2 and isinstance(v, bytes):
            value = v
    message = value.decode(errors="replace").split("\n", 1)[0]
    return ActionFailure(index, name, message.removeprefix(f"{name}: "))  # the value is "<class>: <message>\n<stack>"


def decode_multi_response(buf: bytes) -> list[RegionActionResult]:
    """The ``RegionActionResult``s of a ``MultiResponse``, in the request's RegionAction order.
    Results' cells (none for puts and deletes) are not read. Raises :class:`WireError`."""
    out: list[RegionActionResult] = []
    for f, v in iter_fields(buf):
        if f != 1 or not isinstance(v, bytes):
            continue
        out.append(_region_action_result(v))
    return out


def _region_action_result(v: bytes) -> RegionActionResult:
    """One ``RegionActionResult{resultOrException 1 (repeated), exception 2}``. Each
    ``ResultOrException{index 1, result 2, exception 3, ...}`` of a put or delete is a few bytes
    (``08 <index> 12 00``, a stats field at most) and a batch holds thousands, so both levels are read
    inline here, without a slice or a generator per action (the decoding :func:`iter_fields` does)."""
    rar = RegionActionResult()
    ok, failures = rar.ok, rar.failures
    pos, end = 0, len(v)
    while pos < end:
        key = v[pos]
        pos += 1
        if key >= 0x80 or key & 7 not in (0, 2):
            raise WireError(f"unexpected field key {key} in a RegionActionResult")
        if pos < end and v[pos] < 0x80:
            size = v[pos]
            pos += 1
        else:
            size, pos = read_varint(v, pos)
        if key & 7 == 0:  # a varint (processed, of an atomic action): nothing to read
            continue
        stop = pos + size
        if stop > end:
            raise WireError(f"field {key >> 3} runs past the end of its message")
        if key == 0x12:  # the whole region action failed
            failures.append(_name_bytes_pair(v[pos:stop], None))
        elif key == 0x0a:
            index: int | None = None
            failure: ActionFailure | None = None
            while pos < stop:
                k = v[pos]
                pos += 1
                wire_type = k & 7
                if k >= 0x80 or wire_type not in (0, 2):  # not a put's or delete's answer: the general reader
                    index, failure = _roe_slow(v[stop - size:stop])
                    break
                if pos < stop and v[pos] < 0x80:
                    n = v[pos]
                    pos += 1
                else:
                    n, pos = read_varint(v, pos)
                if wire_type == 0:
                    if k == 0x08:
                        index = n
                    continue
                if pos + n > stop:
                    raise WireError(f"field {k >> 3} runs past the end of its message")
                if k == 0x1a:
                    failure = _name_bytes_pair(v[pos:pos + n], None)
                pos += n
            if failure is not None:
                failures.append(ActionFailure(index, failure.java_class, failure.message))
            elif index is not None:
                ok.append(index)
        pos = stop
    return rar


def _roe_slow(w: bytes) -> tuple[int | None, ActionFailure | None]:
    index: int | None = None
    failure: ActionFailure | None = None
    for h, x in iter_fields(w):
        if h == 1 and isinstance(x, int):
            index = x
        elif h == 3 and isinstance(x, bytes):
            failure = _name_bytes_pair(x, None)
    return index, failure


# -- ScanResponse ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScanPage:
    """A ``ScanResponse``: ``cells_per_result[i]`` cells of the response cellblock belong to result
    ``i``; ``more_results`` False: the scanner is done and closed; ``more_results_in_region`` False:
    this region has no more rows (close the scanner)."""

    scanner_id: int
    cells_per_result: list[int]
    partial: list[bool]
    more_results: bool
    more_results_in_region: bool
    pb_results: int


def decode_scan_response(buf: bytes) -> ScanPage:
    """Decode a ``ScanResponse``. An absent ``more_results`` means True (Client.proto); an absent
    ``more_results_in_region`` follows ``more_results``. ``pb_results`` counts Results carried as
    protobuf cells instead of a cellblock (this client does not read those; a caller treats a
    non-zero count as an error)."""
    scanner_id = 0
    counts: list[int] = []
    partial: list[bool] = []
    more: bool | None = None
    in_region: bool | None = None
    pb_results = 0
    for f, v in iter_fields(buf):
        if f == 1:
            if isinstance(v, int):
                counts.append(v)
            else:  # packed
                counts.extend(int(x) for _, x in iter_fields(_packed(v)))
        elif f == 2 and isinstance(v, int):
            scanner_id = v
        elif f == 3 and isinstance(v, int):
            more = bool(v)
        elif f == 5:
            pb_results += 1
        elif f == 7:
            if isinstance(v, int):
                partial.append(bool(v))
            else:
                partial.extend(bool(x) for _, x in iter_fields(_packed(v)))
        elif f == 8 and isinstance(v, int):
            in_region = bool(v)
    more_results = True if more is None else more
    return ScanPage(scanner_id, counts, partial, more_results,
                    more_results if in_region is None else in_region, pb_results)


def _packed(v: bytes) -> bytes:
    """A packed repeated varint field's payload re-tagged as field 1 varints, to reuse :func:`iter_fields`."""
    out = bytearray()
    pos = 0
    while pos < len(v):
        start = pos
        while v[pos] & 0x80:
            pos += 1
            if pos >= len(v):
                raise WireError("truncated packed varint")
        pos += 1
        out += b"\x08" + v[start:pos]
    return bytes(out)


# -- RegionInfo, ServerName, registry ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerName:
    host: str
    port: int
    start_code: int = 0


@dataclass(frozen=True, slots=True)
class RegionInfo:
    """``RegionInfo``: ``[start_key, end_key)``, ``b""`` an open end; ``table`` as ``namespace:name``
    (``default:`` dropped)."""

    region_id: int
    table: str
    start_key: bytes
    end_key: bytes
    offline: bool = False
    split: bool = False
    replica_id: int = 0


@dataclass(frozen=True, slots=True)
class RegionLocation:
    region: RegionInfo
    server: ServerName | None


def _table_name(buf: bytes) -> str:
    ns = qualifier = ""
    for f, v in iter_fields(buf):
        if f == 1:
            ns = _text(v)
        elif f == 2:
            qualifier = _text(v)
    return qualifier if ns in ("", "default") else f"{ns}:{qualifier}"


def decode_region_info(buf: bytes) -> RegionInfo:
    """Decode a ``RegionInfo`` message (without the ``PBUF`` magic a meta cell starts with)."""
    rid, table, start, end, offline, split, replica = 0, "", b"", b"", False, False, 0
    for f, v in iter_fields(buf):
        if f == 1 and isinstance(v, int):
            rid = v
        elif f == 2 and isinstance(v, bytes):
            table = _table_name(v)
        elif f == 3 and isinstance(v, bytes):
            start = v
        elif f == 4 and isinstance(v, bytes):
            end = v
        elif f == 5 and isinstance(v, int):
            offline = bool(v)
        elif f == 6 and isinstance(v, int):
            split = bool(v)
        elif f == 7 and isinstance(v, int):
            replica = signed32(v)
    return RegionInfo(rid, table, start, end, offline, split, replica)


def decode_server_name(buf: bytes) -> ServerName:
    """Decode a ``ServerName`` message (host 1, port 2, start code 3)."""
    host, port, code = "", 0, 0
    for f, v in iter_fields(buf):
        if f == 1:
            host = _text(v)
        elif f == 2 and isinstance(v, int):
            port = v
        elif f == 3 and isinstance(v, int):
            code = v
    return ServerName(host, port, code)


def decode_meta_locations(buf: bytes) -> list[RegionLocation]:
    """``GetMetaRegionLocationsResponse.meta_locations``: where ``hbase:meta`` (and its replicas) live."""
    out: list[RegionLocation] = []
    for f, v in iter_fields(buf):
        if f != 1 or not isinstance(v, bytes):
            continue
        info: RegionInfo | None = None
        server: ServerName | None = None
        for g, w in iter_fields(v):
            if g == 1 and isinstance(w, bytes):
                info = decode_region_info(w)
            elif g == 2 and isinstance(w, bytes):
                server = decode_server_name(w)
        if info is not None:
            out.append(RegionLocation(info, server))
    return out
