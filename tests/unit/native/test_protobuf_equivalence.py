"""The hand-written protobuf encoders and decoders of the native client against protobuf classes generated
from HBase's own ``.proto`` files (:mod:`tests.unit.native.hbase_protos`): every request message they write
is byte for byte the library's ``SerializeToString()`` of the same message built from the same values, and
every response message the library writes decodes into those values.

Byte equality holds because both sides write the fields in field-number order (the library's rule, and the
encoders', which set no field twice and no unknown field). Cells travel in the cellblock, not in protobuf:
only their count (``associated_cell_count``) is compared here (``test_cells.py`` holds their layout)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.hbase.native import multi
from connectors.hbase.native.cells import decode_cells
from connectors.hbase.native.messages import (
    ActionFailure,
    RegionActionResult,
    RegionInfo,
    RegionLocation,
    ScanPage,
    ServerName,
    action,
    decode_meta_locations,
    decode_multi_response,
    decode_scan_response,
    multi_request,
    mutation_proto,
    region_action,
    region_specifier,
    scan_close,
    scan_next,
    scan_open,
)
from connectors.hbase.native.multi import Group, build_multi, encode_batch, encode_plain_puts_python
from connectors.hbase.native.regions import Region
from connectors.hbase.native.wire import (
    RemoteException,
    Response,
    connection_frame,
    connection_header,
    decode_response,
    hello,
    request_frame,
    request_header,
    varint,
)
from pipeline.core.model import ExpiringPut, Mutation, MutationKind, Origin, TopicPartition
from tests.budget import examples
from tests.unit.native.hbase_protos import HBaseProtos, protos_or_skip

ORIGIN = Origin(TopicPartition("t", 0), 0)
U32, U64, I64 = 2**32 - 1, 2**64 - 1, 2**63 - 1
SERVICES = ("ClientService", "ClientMetaService", "MasterService")
lean = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="session")
def pb() -> HBaseProtos:
    return protos_or_skip()


def lib_varint(pb: HBaseProtos, n: int) -> bytes:
    """The library's varint of ``n`` (0 .. 2**64 - 1): a uint64 field's bytes after its one-byte tag."""
    return bytes(pb.client.ScanRequest(scanner_id=n).SerializeToString()[1:])


def lib_delimited(pb: HBaseProtos, message: bytes) -> bytes:
    return lib_varint(pb, len(message)) + message


def lib_region(pb: HBaseProtos, name: bytes) -> Any:
    return pb.hbase.RegionSpecifier(type=pb.hbase.RegionSpecifier.REGION_NAME, value=name)


# -- strategies --------------------------------------------------------------------------------------

texts = st.text(max_size=30)
families = st.one_of(st.sampled_from([b"d", b"e", b"fam"]),
                     st.binary(min_size=1, max_size=4).filter(lambda f: b":" not in f))
columns = st.one_of(st.builds(lambda f, q: f + b":" + q, families, st.binary(max_size=6)), families)
cells = st.dictionaries(columns, st.binary(max_size=20), max_size=3)
rows = st.one_of(st.binary(min_size=1, max_size=8), st.binary(min_size=120, max_size=200))  # 1- and 2-byte lengths
stamps = st.one_of(st.none(), st.integers(0, I64))
puts = st.builds(lambda r, c, ts: Mutation("t", r, MutationKind.PUT, c, ts, ORIGIN), rows, cells, stamps)
plain_puts = st.builds(lambda r, c, ts: Mutation("t", r, MutationKind.PUT, c, ts, ORIGIN),
                       rows, st.dictionaries(columns, st.binary(max_size=20), min_size=1, max_size=3),
                       st.integers(0, I64))
mutations = st.one_of(
    puts,
    st.builds(lambda r, c, ts, ttl: ExpiringPut("t", r, c, ts, ORIGIN, 0, ttl=ttl), rows, cells, stamps,
              st.integers(1, I64)),
    st.builds(lambda r, c, ts: Mutation("t", r, MutationKind.DELETE, dict.fromkeys(c, b""), ts, ORIGIN),
              rows, cells, stamps),  # no cells: a whole-row delete
    st.builds(lambda r, c, ts: Mutation("t", r, MutationKind.DELETE_VERSION, dict.fromkeys(c, b""), ts, ORIGIN),
              rows, cells, st.integers(0, I64)),
    st.builds(lambda r, c, n: Mutation("t", r, MutationKind.INCREMENT, {c: b""}, None, ORIGIN, amount=n),
              rows, columns, st.integers(-(2**63), I64)),
)


@st.composite
def batches(draw: st.DrawFn, mutation: st.SearchStrategy[Mutation]) -> tuple[list[Mutation], list[Group]]:
    """A batch cut into regions' groups in a random order; ``skipped`` plain puts first that no group
    sends, so that action indexes reach two-byte varints."""
    skipped = draw(st.sampled_from([0, 0, 130]))
    sent = draw(st.lists(mutation, min_size=1, max_size=10))
    batch = [Mutation("t", b"x", MutationKind.PUT, {b"d:q": b""}, 1, ORIGIN)] * skipped + sent
    order = [skipped + i for i in draw(st.permutations(range(len(sent))))]
    cuts = [0, *sorted(draw(st.lists(st.integers(0, len(sent)), max_size=3))), len(sent)]
    names = draw(st.lists(st.binary(min_size=1, max_size=150), min_size=len(cuts) - 1, max_size=len(cuts) - 1))
    return batch, [(Region(name, "t", b"", b"", 1, "rs", 16020), order[a:b])
                   for name, a, b in zip(names, cuts, cuts[1:], strict=False)]


# -- the library's forms of the requests -------------------------------------------------------------


def lib_mutation(pb: HBaseProtos, m: Mutation, nonce: int | None) -> Any | None:
    """The ``MutationProto`` of ``m`` as :mod:`connectors.hbase.native.multi` documents it: its cells counted,
    not carried; the timestamp only when ``m`` has one (the server reads an absent one as the latest); a TTL
    the ``_ttl`` attribute (Java's ``Bytes.toBytes(long)``); an increment's nonce; None for a put without
    cells (not sent)."""
    mp = pb.client.MutationProto
    if m.kind is MutationKind.PUT and not m.cells:
        return None
    out = mp(row=m.row, associated_cell_count=len(m.cells))
    if m.kind is MutationKind.INCREMENT:
        out.mutate_type, out.nonce = mp.INCREMENT, nonce
        return out
    out.mutate_type = mp.PUT if m.kind is MutationKind.PUT else mp.DELETE
    if m.timestamp is not None:
        out.timestamp = m.timestamp
    if m.ttl is not None:
        out.attribute.add(name="_ttl", value=m.ttl.to_bytes(8, "big", signed=True))
    return out


def lib_multi(pb: HBaseProtos, groups: Sequence[Group], batch: Sequence[Mutation], nonces: Sequence[int | None],
              nonce_group: int | None) -> bytes:
    request = pb.client.MultiRequest()
    for region, positions in groups:
        ra = request.regionAction.add(region=lib_region(pb, region.name))
        for i in positions:
            if (proto := lib_mutation(pb, batch[i], nonces[i])) is not None:
                ra.action.add(index=i + 1, mutation=proto)
    if nonce_group is not None:
        request.nonceGroup = nonce_group
    return bytes(request.SerializeToString())


# -- requests ----------------------------------------------------------------------------------------


@lean
@given(n=st.one_of(st.integers(0, U64), st.integers(0, 300)), negative=st.integers(-(2**31), -1))
def test_varints_are_the_librarys(pb: HBaseProtos, n: int, negative: int) -> None:
    assert varint(n) == lib_varint(pb, n)
    # a negative int32 is written sign-extended to 64 bits: 10 bytes
    assert varint(negative) == pb.rpc.ExceptionResponse(port=negative).SerializeToString()[1:]


@lean
@given(user=texts, service=st.sampled_from(SERVICES), codec=st.one_of(st.none(), texts))
def test_the_connection_header_is_the_librarys(pb: HBaseProtos, user: str, service: str, codec: str | None) -> None:
    def lib_header(codec: str | None) -> bytes:
        header = pb.rpc.ConnectionHeader(user_info=pb.rpc.UserInformation(effective_user=user), service_name=service)
        if codec is not None:
            header.cell_block_codec_class = codec
        return bytes(header.SerializeToString())

    lib = lib_header(codec)
    assert connection_header(user, service, codec) == lib
    assert connection_frame(user, service, codec) == struct.pack(">I", len(lib)) + lib
    default = lib_header("org.apache.hadoop.hbase.codec.KeyValueCodec")  # the cellblocks' codec, unless told
    assert hello(user, service) == b"HBas\x00\x50" + struct.pack(">I", len(default)) + default


@lean
@given(call_id=st.integers(0, U32), method=st.sampled_from(["Multi", "Scan", "GetMetaRegionLocations"]) | texts,
       cellblock_len=st.integers(0, U32), timeout_ms=st.integers(-5, U32),
       param=st.binary(max_size=200), cellblock=st.binary(max_size=40))
def test_the_request_header_and_frame_are_the_librarys(pb: HBaseProtos, call_id: int, method: str, cellblock_len: int,
                                                       timeout_ms: int, param: bytes, cellblock: bytes) -> None:
    def lib_header(length: int) -> bytes:
        header = pb.rpc.RequestHeader(call_id=call_id, method_name=method, request_param=True)
        if length:
            header.cell_block_meta.length = length
        if timeout_ms > 0:
            header.timeout = timeout_ms
        return bytes(header.SerializeToString())

    assert request_header(call_id, method, cellblock_len, timeout_ms) == lib_header(cellblock_len)
    body = lib_delimited(pb, lib_header(len(cellblock))) + lib_delimited(pb, param) + cellblock
    assert request_frame(call_id, method, param, cellblock, timeout_ms) == struct.pack(">I", len(body)) + body


@lean
@given(name=st.binary(max_size=200), row=st.binary(max_size=200), kind=st.sampled_from([1, 2, 3]),
       count=st.integers(0, 2**31 - 1), ts=stamps, ttl=st.one_of(st.none(), st.integers(-(2**63), I64)),
       nonce=st.one_of(st.none(), st.integers(0, U64)))
def test_region_specifier_and_mutation_proto_are_the_librarys(pb: HBaseProtos, name: bytes, row: bytes, kind: int,
                                                              count: int, ts: int | None, ttl: int | None,
                                                              nonce: int | None) -> None:
    assert region_specifier(name) == lib_region(pb, name).SerializeToString()
    expected = pb.client.MutationProto(row=row, mutate_type=kind, associated_cell_count=count)
    if ts is not None:
        expected.timestamp = ts
    if ttl is not None:
        expected.attribute.add(name="_ttl", value=ttl.to_bytes(8, "big", signed=True))
    if nonce is not None:
        expected.nonce = nonce
    assert mutation_proto(row, kind, count, ts, ttl, nonce) == expected.SerializeToString()


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=batches(mutations), nonce_group=st.one_of(st.none(), st.integers(1, U64)),
       nonces=st.lists(st.integers(1, U64), min_size=10, max_size=10))
def test_a_multi_request_is_the_librarys(pb: HBaseProtos, case: tuple[list[Mutation], list[Group]],
                                         nonce_group: int | None, nonces: list[int]) -> None:
    batch, groups = case
    # a nonce for each increment (encode_batch requires one; other kinds ignore theirs)
    per_mutation: list[int | None] = [nonces[i % 10] if m.kind is MutationKind.INCREMENT else None
                                      for i, m in enumerate(batch)]
    encoded = encode_batch(batch, per_mutation)
    param, cellblock = build_multi(groups, encoded, nonce_group)
    expected = lib_multi(pb, groups, batch, per_mutation, nonce_group)
    assert param == expected
    # the same message made of messages.py's composable encoders
    assert multi_request([region_action(r.name, [action(i + 1, e.proto) for i in ps if (e := encoded[i])])
                          for r, ps in groups], nonce_group) == expected
    counts = [len(batch[i].cells) for _, ps in groups for i in ps if encoded[i] is not None]
    assert len(decode_cells(cellblock)[0]) == sum(counts)


@pytest.mark.parametrize("encode", [multi.encode_plain_puts, encode_plain_puts_python], ids=["compiled", "python"])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=batches(plain_puts), nonce_group=st.one_of(st.none(), st.integers(1, U64)))
def test_plain_puts_are_the_librarys_multi_request(pb: HBaseProtos, encode: Callable[..., tuple[bytes, bytes] | None],
                                                   case: tuple[list[Mutation], list[Group]],
                                                   nonce_group: int | None) -> None:
    if encode is multi.encode_plain_puts and not multi.COMPILED:
        pytest.skip("_multiwire is not in use (not built, or HBASE_INGEST_PURE_PYTHON=1): no compiled form to compare")
    batch, groups = case
    got = encode(groups, batch, nonce_group)
    assert got is not None
    assert got[0] == lib_multi(pb, groups, batch, [None] * len(batch), nonce_group)


def lib_columns(pb: HBaseProtos, scan: Any, names: Sequence[bytes]) -> None:
    """``Scan.column`` as ``scan_columns`` documents it: one ``Column`` per family in first-seen order, a
    bare ``b"family"`` asking for all of it (no qualifiers) and winning over that family's columns."""
    wanted: dict[bytes, list[bytes] | None] = {}
    for name in names:
        family, colon, qualifier = name.partition(b":")
        if not colon:
            wanted[family] = None
        elif (qualifiers := wanted.setdefault(family, [])) is not None:
            qualifiers.append(qualifier)
    for family, qualifiers in wanted.items():
        scan.column.add(family=family, qualifier=qualifiers or [])


@lean
@given(region=st.binary(max_size=150), start=st.binary(max_size=8), stop=st.binary(max_size=8),
       names=st.lists(st.one_of(columns, st.just(b":q")), max_size=5), rows=st.integers(0, U32),
       limit=st.integers(-2, U32), reversed_=st.booleans(), include_start=st.booleans(), scanner=st.integers(0, U64))
def test_scan_requests_are_the_librarys(pb: HBaseProtos, region: bytes, start: bytes, stop: bytes, names: list[bytes],
                                        rows: int, limit: int, reversed_: bool, include_start: bool,
                                        scanner: int) -> None:
    expected = pb.client.ScanRequest(region=lib_region(pb, region), number_of_rows=rows)
    scan = expected.scan
    lib_columns(pb, scan, names)
    if start:
        scan.start_row = start
    if stop:
        scan.stop_row = stop
    if reversed_:
        scan.reversed = True
    scan.caching = rows
    if not include_start:
        scan.include_start_row = False
    if limit > 0:
        expected.limit_of_rows = limit
    got = scan_open(region, start, stop, names, rows, limit=limit, reversed_=reversed_, include_start=include_start)
    assert got == expected.SerializeToString()
    next_page = pb.client.ScanRequest(scanner_id=scanner, number_of_rows=rows)
    assert scan_next(scanner, rows) == next_page.SerializeToString()
    assert scan_close(scanner) == pb.client.ScanRequest(scanner_id=scanner, number_of_rows=0,
                                                        close_scanner=True).SerializeToString()


def test_the_meta_location_request_is_the_librarys_empty_message(pb: HBaseProtos) -> None:
    # locate.meta_location sends b"" as the GetMetaRegionLocationsRequest
    assert pb.registry.GetMetaRegionLocationsRequest().SerializeToString() == b""


# -- responses ---------------------------------------------------------------------------------------

java_classes = st.one_of(
    st.sampled_from(["org.apache.hadoop.hbase.NotServingRegionException",
                     "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException",
                     "org.apache.hadoop.hbase.RegionTooBusyException"]),
    st.from_regex(r"[a-z]{1,6}(\.[a-z]{1,6}){0,2}\.[A-Z][A-Za-z]{0,12}", fullmatch=True))
one_line = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"), max_size=40)
failures = st.one_of(st.none(), st.tuples(java_classes, one_line))
actions = st.lists(st.tuples(st.integers(0, U32), failures, st.sampled_from(["none", "empty", "cells"]),
                             st.booleans()), max_size=6)


def lib_exception(pb: HBaseProtos, failure: tuple[str, str]) -> Any:
    """A ``NameBytesPair`` as HBase's ``ResponseConverter.buildException`` makes it: the class name, and
    ``StringUtils.stringifyException`` (``<class>: <message>`` then the stack)."""
    cls, message = failure
    stack = f"{cls}: {message}\n\tat org.apache.hadoop.hbase.regionserver.RSRpcServices.multi(RSRpcServices.java:1)"
    return pb.hbase.NameBytesPair(name=cls, value=stack.encode())


@lean
@given(regions=st.lists(st.tuples(actions, failures, st.one_of(st.none(), st.booleans())), max_size=4),
       processed=st.one_of(st.none(), st.booleans()), stats=st.booleans())
def test_a_multi_response_decodes_as_the_library_wrote_it(
        pb: HBaseProtos, regions: list[tuple[list[tuple[int, tuple[str, str] | None, str, bool]],
                                             tuple[str, str] | None, bool | None]],
        processed: bool | None, stats: bool) -> None:
    response = pb.client.MultiResponse()
    expected = []
    for region_actions, region_failure, region_processed in regions:
        rar = response.regionActionResult.add()
        want = RegionActionResult()
        for index, failure, result, load_stats in region_actions:
            roe = rar.resultOrException.add(index=index)
            if failure is not None:
                roe.exception.CopyFrom(lib_exception(pb, failure))
                want.failures.append(ActionFailure(index, *failure))
            else:
                want.ok.append(index)
                if result != "none":  # a put's or delete's: empty; with cells counted: an increment's
                    roe.result.SetInParent()
                    if result == "cells":
                        roe.result.associated_cell_count = 1
            if load_stats:
                roe.loadStats.memStoreLoad = 7
        if region_failure is not None:
            rar.exception.CopyFrom(lib_exception(pb, region_failure))
            want.failures.append(ActionFailure(None, *region_failure))
        if region_processed is not None:
            rar.processed = region_processed
        expected.append(want)
    if processed is not None:
        response.processed = processed
    if stats:
        response.regionStatistics.region.append(lib_region(pb, b"t,,1.abc."))
        response.regionStatistics.stat.add(memStoreLoad=3)
    assert decode_multi_response(response.SerializeToString()) == expected


@lean
@given(counts=st.lists(st.integers(0, U32), max_size=6), partial=st.lists(st.booleans(), max_size=6),
       scanner=st.one_of(st.none(), st.integers(0, U64)), more=st.one_of(st.none(), st.booleans()),
       in_region=st.one_of(st.none(), st.booleans()), pb_results=st.integers(0, 2), extras=st.booleans())
def test_a_scan_response_decodes_as_the_library_wrote_it(pb: HBaseProtos, counts: list[int], partial: list[bool],
                                                         scanner: int | None, more: bool | None,
                                                         in_region: bool | None, pb_results: int,
                                                         extras: bool) -> None:
    response = pb.client.ScanResponse(cells_per_result=counts, partial_flag_per_result=partial)
    if scanner is not None:
        response.scanner_id = scanner
    if more is not None:
        response.more_results = more
    if in_region is not None:
        response.more_results_in_region = in_region
    for _ in range(pb_results):
        response.results.add(associated_cell_count=1)
    if extras:  # fields the decoder does not read
        response.ttl, response.stale, response.heartbeat_message = 60_000, True, True
    more_results = True if more is None else more
    assert decode_scan_response(response.SerializeToString()) == ScanPage(
        scanner or 0, counts, partial, more_results, more_results if in_region is None else in_region, pb_results)


locations = st.lists(st.tuples(
    st.integers(0, U64), st.sampled_from(["", "default", "hbase", "ns"]), st.text(min_size=1, max_size=10),
    st.binary(max_size=10), st.binary(max_size=10), st.booleans(), st.booleans(), st.integers(-(2**31), 2**31 - 1),
    st.one_of(st.none(), st.tuples(st.text(min_size=1, max_size=20), st.integers(0, U32), st.integers(0, U64)))),
    max_size=3)


@lean
@given(found=locations)
def test_meta_locations_decode_as_the_library_wrote_them(
        pb: HBaseProtos, found: list[tuple[int, str, str, bytes, bytes, bool, bool, int, tuple[str, int, int] | None]]
) -> None:
    response = pb.registry.GetMetaRegionLocationsResponse()
    expected = []
    for region_id, ns, qualifier, start, end, offline, split, replica, server in found:
        location = response.meta_locations.add(seq_num=-1)
        info = location.region_info
        info.region_id = region_id
        info.table_name.namespace, info.table_name.qualifier = ns.encode(), qualifier.encode()
        info.start_key, info.end_key, info.offline, info.split, info.replica_id = start, end, offline, split, replica
        if server is not None:
            location.server_name.host_name, location.server_name.port, location.server_name.start_code = server
        table = qualifier if ns in ("", "default") else f"{ns}:{qualifier}"
        expected.append(RegionLocation(RegionInfo(region_id, table, start, end, offline, split, replica),
                                       None if server is None else ServerName(*server)))
    assert decode_meta_locations(response.SerializeToString()) == expected


@lean
@given(call_id=st.integers(0, U32),
       exception=st.one_of(st.none(), st.tuples(st.one_of(st.none(), java_classes), st.one_of(st.none(), texts),
                                                st.one_of(st.none(), texts),
                                                st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                                                st.one_of(st.none(), st.booleans()), st.booleans())),
       param=st.binary(max_size=200), cellblock=st.binary(max_size=40))
def test_a_response_frame_decodes_as_the_library_wrote_it(
        pb: HBaseProtos, call_id: int,
        exception: tuple[str | None, str | None, str | None, int | None, bool | None, bool] | None,
        param: bytes, cellblock: bytes) -> None:
    header = pb.rpc.ResponseHeader(call_id=call_id)
    if cellblock:
        header.cell_block_meta.length = len(cellblock)
    if exception is None:
        frame = lib_delimited(pb, header.SerializeToString()) + lib_delimited(pb, param) + cellblock
        assert decode_response(frame) == Response(call_id, None, param, cellblock)
        return
    cls, stack, host, port, do_not_retry, overloaded = exception
    exc = header.exception
    exc.SetInParent()
    for name, value in (("exception_class_name", cls), ("stack_trace", stack), ("hostname", host), ("port", port),
                        ("do_not_retry", do_not_retry)):
        if value is not None:
            setattr(exc, name, value)
    exc.server_overloaded = overloaded  # not read by the decoder
    frame = lib_delimited(pb, header.SerializeToString()) + cellblock  # no response message after an exception
    assert decode_response(frame) == Response(
        call_id, RemoteException(cls or "", stack or "", host or "", port or 0, bool(do_not_retry)), b"", cellblock)
