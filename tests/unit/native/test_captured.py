"""The framing against bytes captured from a real HBase (``captured/``, made by ``python -m
tests.native_capture`` against the local stack; ``captured/capture.json`` names the HBase version):
the bytes the encoders make today are the bytes that server accepted, and its answers decode into
what was asked for."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from connectors.hbase.native.cells import decode_cells
from connectors.hbase.native.messages import (
    decode_meta_locations,
    decode_multi_response,
    decode_scan_response,
    scan_next,
    scan_open,
)
from connectors.hbase.native.multi import build_multi, encode_batch, failures_of
from connectors.hbase.native.regions import META_REGION, Region, parse_meta_row
from connectors.hbase.native.wire import Response, decode_response, hello, iter_fields, read_varint, request_frame
from tests.native_capture import CAPTURE_TABLE, CAPTURE_USER, capture_puts

CAPTURED = Path(__file__).with_name("captured")
MANIFEST = json.loads((CAPTURED / "capture.json").read_text())
TIMEOUT_MS = 30_000  # what the capture's calls asked for


def _file(name: str, kind: str) -> bytes:
    stem = next(e["file"] for e in MANIFEST["exchanges"] if e["file"].split("-", 1)[1] == name)
    return (CAPTURED / f"{stem}.{kind}").read_bytes()


def _response(name: str) -> Response:
    raw = _file(name, "response")
    assert struct.unpack(">I", raw[:4])[0] == len(raw) - 4  # one whole frame
    return decode_response(raw[4:])


def _call_id(name: str) -> int:
    frame = _file(name, "request")
    size, pos = read_varint(frame, 4)
    call_id = dict(iter_fields(frame[pos:pos + size]))[1]
    assert isinstance(call_id, int)
    return call_id


def _regions() -> list[Region]:
    reply = _response("meta-scan")
    page = decode_scan_response(reply.param)
    rows, offset = [], 0
    for n in page.cells_per_result:
        cells, offset = decode_cells(reply.cellblock, n, offset)
        rows.append(parse_meta_row(cells[0].row, cells))
    return [r for r in rows if r is not None]


def test_the_connection_hellos_are_the_accepted_bytes() -> None:
    for service in ("ClientMetaService", "ClientService"):
        assert _file(f"hello-{service}", "request") == hello(CAPTURE_USER, service)


def test_the_requests_are_the_accepted_bytes() -> None:
    meta_range = (f"{CAPTURE_TABLE},,".encode(), f"{CAPTURE_TABLE} ,,".encode())
    first = _regions()[0]
    expected = {
        "registry": request_frame(_call_id("registry"), "GetMetaRegionLocations", b"", timeout_ms=TIMEOUT_MS),
        "meta-scan": request_frame(_call_id("meta-scan"), "Scan",
                                   scan_open(META_REGION, *meta_range, [b"info"], 1000, limit=1000),
                                   timeout_ms=TIMEOUT_MS),
        "region-scan": request_frame(_call_id("region-scan"), "Scan",
                                     scan_open(first.name, b"", b"", [b"d"], 10, limit=10), timeout_ms=TIMEOUT_MS),
        "unknown-scanner": request_frame(_call_id("unknown-scanner"), "Scan", scan_next(987_654_321, 10),
                                         timeout_ms=TIMEOUT_MS),
    }
    for name, family in (("multi-puts", b"d"), ("multi-refused", b"x")):
        param, cellblock = build_multi([(first, [0, 1, 2])], encode_batch(capture_puts(family), [None] * 3))
        expected[name] = request_frame(_call_id(name), "Multi", param, cellblock, timeout_ms=TIMEOUT_MS)
    for name, frame in expected.items():
        assert _file(name, "request") == frame, name


def test_each_answer_is_for_its_call() -> None:
    for e in MANIFEST["exchanges"]:
        name = e["file"].split("-", 1)[1]
        if not name.startswith("hello-"):
            assert _response(name).call_id == _call_id(name), name


def test_the_registry_and_meta_answers_locate_the_table() -> None:
    [location] = decode_meta_locations(_response("registry").param)
    assert location.region.replica_id == 0 and location.server is not None
    assert location.server.port == MANIFEST["regionserver_port"] and location.server.start_code > 0
    regions = _regions()
    assert [(r.table, r.start_key, r.end_key) for r in regions] == [(CAPTURE_TABLE, b"", b"m"),
                                                                     (CAPTURE_TABLE, b"m", b"")]
    assert {r.port for r in regions} == {MANIFEST["regionserver_port"]}


def test_the_multi_answers_apply_or_refuse_each_action() -> None:
    first = _regions()[0]
    groups = [(first, [0, 1, 2])]
    assert failures_of(groups, decode_multi_response(_response("multi-puts").param)) == []
    refused = failures_of(groups, decode_multi_response(_response("multi-refused").param))
    assert [f.index for f in refused] == [0, 1, 2]
    assert {f.java_class for f in refused} == {"org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"}
    assert all("x" in f.message for f in refused)


def test_the_scan_answer_holds_the_written_cells() -> None:
    reply = _response("region-scan")
    page = decode_scan_response(reply.param)
    assert not page.more_results_in_region and page.pb_results == 0
    got: dict[bytes, dict[bytes, tuple[bytes, int]]] = {}
    offset = 0
    for n in page.cells_per_result:
        cells, offset = decode_cells(reply.cellblock, n, offset)
        for c in cells:
            got.setdefault(c.row, {})[c.family + b":" + c.qualifier] = (c.value, c.timestamp)
    assert offset == len(reply.cellblock)
    assert got == {m.row: {col: (v, m.timestamp) for col, v in m.cells.items()} for m in capture_puts(b"d")}


def test_a_call_level_exception_names_its_class() -> None:
    reply = _response("unknown-scanner")
    assert reply.exception is not None and reply.param == b""
    assert reply.exception.class_name == "org.apache.hadoop.hbase.UnknownScannerException"
    assert "987654321" in reply.exception.stack_trace
