"""Meta rows into regions, the region cache, and the registry's and scanner's answers."""

from __future__ import annotations

import pytest

from connectors.hbase.native.cells import PUT, Cell
from connectors.hbase.native.messages import decode_meta_locations, decode_scan_response, scan_columns, scan_open
from connectors.hbase.native.regions import Region, RegionCache, meta_scan_range, parse_meta_row
from connectors.hbase.native.wire import iter_fields

# RegionInfo{1 region_id 7, 2 table_name{1 "default", 2 "t"}, 3 start "b", 4 end "m"}
REGION_INFO = b"\x08\x07" + b"\x12\x0c\x0a\x07default\x12\x01t" + b"\x1a\x01b" + b"\x22\x01m"


def cell(qualifier: bytes, value: bytes) -> Cell:
    return Cell(b"t,b,7.enc.", b"info", qualifier, 1, PUT, value)


def region(start: bytes, end: bytes, rid: int = 1) -> Region:
    return Region(b"t,%s,%d." % (start, rid), "t", start, end, rid, "rs", 16020)


def test_a_meta_row_becomes_a_region() -> None:
    row = b"t,b,7.enc."
    got = parse_meta_row(row, [cell(b"regioninfo", b"PBUF" + REGION_INFO), cell(b"server", b"rs1:16020"),
                               cell(b"state", b"OPEN")])
    assert got == Region(row, "t", b"b", b"m", 7, "rs1", 16020)
    assert parse_meta_row(row, [cell(b"regioninfo", b"PBUF" + REGION_INFO + b"\x30\x01")]) is None  # split parent
    in_transition = parse_meta_row(row, [cell(b"regioninfo", b"PBUF" + REGION_INFO)])
    assert in_transition is not None and in_transition.host == ""
    with pytest.raises(ValueError, match="PBUF"):
        parse_meta_row(row, [cell(b"regioninfo", REGION_INFO)])


def test_the_meta_range_of_a_table() -> None:
    assert meta_scan_range("ns:t") == (b"ns:t,,", b"ns:t ,,")


def test_the_cache_locates_rows_and_evicts_overlaps() -> None:
    cache = RegionCache()
    cache.replace("t", [region(b"", b"m"), region(b"m", b"")])
    assert cache.locate("t", b"a") == region(b"", b"m")
    assert cache.locate("t", b"m") == region(b"m", b"")
    assert cache.locate("t", b"\xff") == region(b"m", b"")
    assert cache.locate("other", b"a") is None
    evicted = cache.put(region(b"m", b"t", rid=2))  # a split of [m, ∞) was seen
    assert evicted == [region(b"m", b"")]
    assert cache.locate("t", b"x") is None  # a hole until the other daughter is known
    cache.put(region(b"t", b"", rid=2))
    assert [r.start_key for r in cache.regions("t")] == [b"", b"m", b"t"]


def test_registry_and_scan_answers() -> None:
    server = b"\x0a\x09localhost\x10\xd4\x7d\x18\x05"  # ServerName{host, port 16084, start_code 5}
    loc = b"\x0a" + bytes((len(REGION_INFO),)) + REGION_INFO + b"\x12" + bytes((len(server),)) + server + b"\x18\x01"
    [got] = decode_meta_locations(b"\x0a" + bytes((len(loc),)) + loc)
    assert got.region.table == "t" and got.server is not None
    assert (got.server.host, got.server.port, got.server.start_code) == ("localhost", 16084, 5)

    page = decode_scan_response(b"\x0a\x02\x03\x02" + b"\x10\x2a" + b"\x18\x01" + b"\x40\x00")  # packed 3, 2
    assert (page.cells_per_result, page.scanner_id, page.more_results, page.more_results_in_region) == (
        [3, 2], 42, True, False)
    assert decode_scan_response(b"\x08\x01\x08\x04").more_results  # unpacked counts; absent more_results: True


def test_where_reversed_scans_go_on() -> None:
    cache = RegionCache()
    cache.replace("t", [region(b"", b"g"), region(b"g", b"p"), region(b"p", b"")])
    assert cache.last("t") == region(b"p", b"")
    assert cache.before("t", b"p") == region(b"g", b"p")  # rows below "p": the region ending there
    assert cache.before("t", b"h") == region(b"g", b"p")
    assert cache.before("t", b"g\x00") == region(b"g", b"p")
    assert cache.before("t", b"g") == region(b"", b"g")
    assert cache.before("other", b"g") is None and cache.last("other") is None
    cache.forget("t")
    cache.replace("t", [region(b"", b"g"), region(b"p", b"")])  # a hole while [g, p) is in transition
    assert cache.before("t", b"p") is None and cache.before("t", b"h") is None
    assert cache.before("t", b"g") == region(b"", b"g")
    cache.forget("t")
    cache.replace("t", [region(b"", b"g")])
    assert cache.last("t") is None  # the region with the open end is not known


def test_scan_requests() -> None:
    # Column{family "d", qualifiers "a", ""}, Column{family "e"}: a family wins over its columns
    assert scan_columns([b"d:a", b"e", b"d:", b"e:x"]) == b"\x0a\x08\x0a\x01d\x12\x01a\x12\x00" + b"\x0a\x03\x0a\x01e"
    fields = dict(iter_fields(scan_open(b"t,,1.", b"m", b"c", [b"d"], 10, limit=3, reversed_=True,
                                        include_start=False)))
    scan = dict(iter_fields(fields[2]))  # type: ignore[arg-type]
    assert (scan[3], scan[4], scan[15], scan[17], scan[21]) == (b"m", b"c", 1, 10, 0)
    assert (fields[4], fields[11]) == (10, 3)
    assert 21 not in dict(iter_fields(dict(iter_fields(scan_open(b"t,,1.", b"", b"")))[2]))  # type: ignore[arg-type]
