"""Multi requests (protobuf + cellblock) for a batch, and MultiResponses decoded into failures."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.hbase.native.cells import DELETE, DELETE_COLUMN, DELETE_FAMILY, DELETE_FAMILY_VERSION, decode_cells
from connectors.hbase.native.client import _occurrences, increment_nonce
from connectors.hbase.native.failures import Failed, error_for
from connectors.hbase.native.messages import decode_multi_response
from connectors.hbase.native.multi import build_multi, encode_mutation, failures_of, halves
from connectors.hbase.native.regions import Region
from connectors.hbase.native.wire import pb_bytes, pb_str, pb_uint, request_frame
from pipeline.core.model import ExpiringPut, Mutation, MutationKind, Origin, TopicPartition
from pipeline.errors import HBaseRequestError, RegionMapStale
from tests.budget import examples

ORIGIN = Origin(TopicPartition("t", 0), 0)
REGION = Region(b"t,,1.abc.", "t", b"", b"", 1, "rs", 16020)
NSCF = "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"


def put(row: bytes, cells: dict[bytes, bytes], ts: int | None = 5) -> Mutation:
    return Mutation("t", row, MutationKind.PUT, cells, ts, ORIGIN)


def kv_put(row: bytes) -> bytes:
    # kv_len 25 | key_len 16 | val_len 1 | row_len 2 | row | 1 "d" | "q" | ts 5 | Put | "v"
    return bytes.fromhex("00000019" "00000010" "00000001" "0002") + row + b"\x01dq" + bytes.fromhex(
        "0000000000000005" "04") + b"v"


def test_a_two_row_multi_with_its_cellblock() -> None:
    batch = [put(b"r1", {b"d:q": b"v"}), put(b"r2", {b"d:q": b"v"})]
    param, cellblock = build_multi([(REGION, [0, 1])], [encode_mutation(m) for m in batch])
    mutation = [b"\x0a\x02" + row + b"\x10\x02" + b"\x20\x05" + b"\x40\x01"  # row, PUT, timestamp 5, 1 cell
                for row in (b"r1", b"r2")]
    assert param == (
        b"\x0a\x2f"                                  # MultiRequest.regionAction (47 bytes)
        + b"\x0a\x0d" + b"\x08\x01\x12\x09t,,1.abc."  # RegionAction.region = {REGION_NAME, name}
        + b"\x1a\x0e" + b"\x08\x01\x12\x0a" + mutation[0]  # action{index 1, mutation}
        + b"\x1a\x0e" + b"\x08\x02\x12\x0a" + mutation[1])  # action{index 2, mutation}
    assert cellblock == kv_put(b"r1") + kv_put(b"r2")
    frame = request_frame(3, "Multi", param, cellblock)
    assert frame[:21] == (b"\x00\x00\x00\x7c"                  # 124 = 1 + 15 + 1 + 49 + 58
                          + b"\x0f" + b"\x08\x03\x1a\x05Multi\x20\x01\x2a\x02\x08\x3a"  # cellblock of 58 bytes
                          + b"\x31")                          # the 49-byte MultiRequest follows
    assert frame[-58:] == cellblock


def test_delete_kinds_and_their_cells() -> None:
    def kinds(kind: MutationKind, cells: dict[bytes, bytes]) -> list[tuple[bytes, bytes, int, int]]:
        e = encode_mutation(Mutation("t", b"r", kind, cells, 9, ORIGIN))
        assert e is not None and e.cells_count == len(cells)
        return [(c.family, c.qualifier, c.timestamp, c.type) for c in decode_cells(e.cells)[0]]

    assert kinds(MutationKind.DELETE, {b"d:q": b"", b"e": b""}) == [(b"d", b"q", 9, DELETE_COLUMN),
                                                                    (b"e", b"", 9, DELETE_FAMILY)]
    assert kinds(MutationKind.DELETE_VERSION, {b"d:q": b"", b"e": b""}) == [(b"d", b"q", 9, DELETE),
                                                                            (b"e", b"", 9, DELETE_FAMILY_VERSION)]
    whole_row = encode_mutation(Mutation("t", b"r", MutationKind.DELETE, {}, 9, ORIGIN))
    assert whole_row is not None
    assert (whole_row.proto, whole_row.cells) == (b"\x0a\x01r" + b"\x10\x03" + b"\x20\x09" + b"\x40\x00", b"")
    assert encode_mutation(put(b"r", {})) is None


def test_a_ttl_is_the_ttl_attribute() -> None:
    e = encode_mutation(ExpiringPut("t", b"r", {b"d:q": b"v"}, None, ORIGIN, 0, ttl=1000))
    assert e is not None
    assert e.proto == (b"\x0a\x01r\x10\x02"
                       + b"\x2a\x10" + b"\x0a\x04_ttl" + b"\x12\x08" + (1000).to_bytes(8, "big")  # 5 attribute
                       + b"\x40\x01")


def test_an_increment_is_one_cell_of_its_amount_with_a_nonce_in_the_clients_group() -> None:
    inc = Mutation("t", b"r", MutationKind.INCREMENT, {b"d:n": b""}, None, ORIGIN, amount=-3)
    e = encode_mutation(inc, nonce=300)
    assert e is not None and e.cells_count == 1
    assert e.proto == b"\x0a\x01r" + b"\x10\x01" + b"\x40\x01" + b"\x48\xac\x02"  # row, INCREMENT, 1 cell, nonce 300
    [cell], _ = decode_cells(e.cells, 1)
    assert (cell.family, cell.qualifier, cell.value) == (b"d", b"n", (-3).to_bytes(8, "big", signed=True))
    assert cell.timestamp == 0x7FFFFFFFFFFFFFFF  # the latest: the server stamps it
    param, _ = build_multi([(REGION, [0])], [e], nonce_group=7)
    assert param.endswith(b"\x10\x07")  # MultiRequest.nonceGroup
    assert build_multi([(REGION, [0])], [encode_mutation(put(b"r", {b"d:q": b"v"}))])[0][-2:] != b"\x10\x07"
    for bad in (None, 0):
        with pytest.raises(ValueError, match="needs a nonce"):
            encode_mutation(inc, nonce=bad)


def test_increment_nonces_are_stable_per_event_and_cell_and_twins_differ() -> None:
    def inc(offset: int, row: bytes = b"r", amount: int = 1) -> Mutation:
        return Mutation("t", row, MutationKind.INCREMENT, {b"d:n": b""}, None, Origin(TopicPartition("t", 0), offset),
                        amount=amount)
    assert increment_nonce(inc(1)) == increment_nonce(inc(1))  # the same batch sent again
    nonces = {increment_nonce(inc(1)), increment_nonce(inc(2)), increment_nonce(inc(1, b"s")),
              increment_nonce(inc(1, amount=2)), increment_nonce(inc(1), 1)}
    assert len(nonces) == 5 and all(0 < n < 1 << 63 for n in nonces)
    batch = [inc(1), put(b"r", {b"d:q": b"v"}), inc(1), inc(2)]
    assert list(_occurrences(batch)) == [0, None, 1, 0]


def test_versionless_deletes_are_refused() -> None:
    with pytest.raises(ValueError, match="needs a timestamp"):
        encode_mutation(Mutation("t", b"r", MutationKind.DELETE_VERSION, {b"d:q": b""}, None, ORIGIN))


def test_a_multi_response_with_one_action_exception() -> None:
    nbp = b"\x0a\x03a.B" + b"\x12\x0cno family\nat"       # NameBytesPair{name "a.B", value "no family\nat"}
    ok = b"\x08\x01\x12\x00"                                # ResultOrException{index 1, result {}}
    bad = b"\x08\x02\x1a" + bytes((len(nbp),)) + nbp        # ResultOrException{index 2, exception}
    rar = b"\x0a\x04" + ok + b"\x0a" + bytes((len(bad),)) + bad
    response = b"\x0a" + bytes((len(rar),)) + rar
    [result] = decode_multi_response(response)
    assert result.ok == [1]
    assert [(f.index, f.java_class, f.message) for f in result.failures] == [(2, "a.B", "no family")]
    assert failures_of([(REGION, [0, 1])], [result]) == [Failed(1, REGION.name, "a.B", "no family")]


def test_a_whole_region_exception_fails_each_of_its_actions() -> None:
    nbp = b"\x0a\x03x.Y" + b"\x12\x09x.Y: gone"  # the value starts with the class name
    rar = b"\x12" + bytes((len(nbp),)) + nbp                # RegionActionResult.exception
    results = decode_multi_response(b"\x0a" + bytes((len(rar),)) + rar)
    assert failures_of([(REGION, [3, 5])], results) == [Failed(3, REGION.name, "x.Y", "gone"),
                                                         Failed(5, REGION.name, "x.Y", "gone")]
    with pytest.raises(ValueError, match="region results"):
        failures_of([(REGION, [3]), (REGION, [4])], results)


def test_errors_name_the_table_region_and_exception() -> None:
    nsre = Failed(0, b"t,,1.abc.", "org.apache.hadoop.hbase.NotServingRegionException", "not serving")
    refused = Failed(1, b"t,,1.abc.", NSCF, "Column family nope does not exist")
    err = error_for("t", [nsre, refused])
    assert isinstance(err, HBaseRequestError)
    assert "NoSuchColumnFamilyException" in str(err) and "nope" in str(err) and "t,,1.abc." in str(err)
    assert err.failures == [nsre, refused]  # type: ignore[attr-defined]
    assert err.unapplied == (0, 1)  # the refused action and the one to relocate; the batch's others were applied
    stale = error_for("t", [nsre], exhausted=True)
    assert isinstance(stale, RegionMapStale) and stale.retryable and "retries exhausted" in str(stale)


def _reference_decode(buf: bytes) -> list[tuple[list[int], list[tuple[int | None, str, str]]]]:
    """MultiResponse decoded field by field with ``iter_fields`` (what the inline reader must agree with)."""
    from connectors.hbase.native.messages import _name_bytes_pair
    from connectors.hbase.native.wire import iter_fields

    out = []
    for f, v in iter_fields(buf):
        if f != 1 or not isinstance(v, bytes):
            continue
        ok: list[int] = []
        failures: list[tuple[int | None, str, str]] = []
        for g, w in iter_fields(v):
            if g == 1 and isinstance(w, bytes):
                index, failure = None, None
                for h, x in iter_fields(w):
                    if h == 1 and isinstance(x, int):
                        index = x
                    elif h == 3 and isinstance(x, bytes):
                        failure = _name_bytes_pair(x, None)
                if failure is not None:
                    failures.append((index, failure.java_class, failure.message))
                elif index is not None:
                    ok.append(index)
            elif g == 2 and isinstance(w, bytes):
                e = _name_bytes_pair(w, None)
                failures.append((None, e.java_class, e.message))
        out.append((ok, failures))
    return out


_exception = st.builds(lambda name, text: pb_str(1, name) + pb_bytes(2, f"{name}: {text}\nat x".encode()),
                       st.sampled_from(["a.B", NSCF]), st.text(max_size=8))
_roe_field = st.one_of(
    st.builds(lambda i: pb_uint(1, i), st.integers(0, 2**40)),
    st.builds(lambda b: pb_bytes(2, b), st.binary(max_size=3)),
    st.builds(lambda e: pb_bytes(3, e), _exception),
    st.builds(lambda b: pb_bytes(5, b), st.binary(max_size=4)),  # loadStats
    st.builds(lambda n: pb_uint(20, n), st.integers(0, 300)),  # a field number above 15
    st.builds(lambda b: b"\x31" + b, st.binary(min_size=8, max_size=8)),  # a fixed64 field 6
)
_rar_field = st.one_of(
    st.builds(lambda fields: pb_bytes(1, b"".join(fields)), st.lists(_roe_field, max_size=4)),
    st.builds(lambda e: pb_bytes(2, e), _exception),
    st.builds(lambda b: pb_uint(3, b), st.integers(0, 1)),  # processed
)


@settings(max_examples=examples(300), deadline=None)
@given(rars=st.lists(st.lists(_rar_field, max_size=6), max_size=3))
def test_the_inline_multi_response_reader_agrees_with_the_field_reader(rars: list[list[bytes]]) -> None:
    buf = b"".join(pb_bytes(1, b"".join(fields)) for fields in rars)
    got = [(r.ok, [(f.index, f.java_class, f.message) for f in r.failures]) for r in decode_multi_response(buf)]
    assert got == _reference_decode(buf)


@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=6))
@settings(max_examples=examples(200), deadline=None)
def test_halves_cut_a_request_in_order_and_keep_every_position_once(sizes: list[int]) -> None:
    regions = [Region(b"t,%d,1." % k, "t", b"%d" % k, b"%d" % (k + 1), 1, "h", 1) for k in range(len(sizes))]
    groups: list[tuple[Region, list[int]]] = []
    start = 0
    for region, n in zip(regions, sizes, strict=True):
        groups.append((region, list(range(start, start + n))))
        start += n
    if start < 2:
        with pytest.raises(ValueError, match="cannot be halved"):
            halves(groups)
        return
    first, second = halves(groups)
    flat = [(r.name, i) for half in (first, second) for r, ps in half for i in ps]
    assert flat == [(r.name, i) for r, ps in groups for i in ps]  # every position once, in request order
    assert sum(len(ps) for _, ps in first) == start // 2
    assert all(ps for half in (first, second) for _, ps in half)  # no region without positions
