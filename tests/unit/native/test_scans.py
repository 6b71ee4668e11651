"""``NativeClient.scan`` against the fake cluster (:mod:`tests.unit.native.fake_cluster`), whose region
servers serve ``Scan`` as HBase does: forward and reversed scans over several regions, bounded, limited and
restricted to columns, compared with an oracle computed from the fake's data; paging; and every failure a
scan retries (a region moved or split, a lost scanner, a lost connection, a busy server, a region in
transition) or does not. Whatever happens, a scan returns each row once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from connectors.hbase.native import locate
from connectors.hbase.native.cells import PUT
from connectors.hbase.native.client import NativeClient
from connectors.hbase.native.locate import ScannedRow
from pipeline.errors import HBaseRequestError, HBaseUnavailable, RegionMapStale, TableNotFound
from tests.unit.native.fake_cluster import (
    DO_NOT_RETRY,
    NO_SUCH_FAMILY,
    NOT_SERVING,
    REGION_MOVED,
    UNKNOWN_SCANNER,
    BeforeCall,
    Directive,
    DropConnection,
    ExpireScanner,
    FailCall,
    FakeCluster,
    FakeRegion,
    ReceivedCall,
    ScanKind,
)

#: a scan that stops making progress fails here, not after the suite's timeout
pytestmark = pytest.mark.timeout(60)

TABLE = "t"
#: four regions [, g) [g, p) [p, w) [w, ) on servers 0 (which holds meta too), 1, 2, 1
SPLITS = (b"g", b"p", b"w")
PLACEMENT = (0, 1, 2, 1)
#: four rows in the first region, five in the others: a row at each split key and four after it
ROWS = sorted([b"%c%d" % (c, i) for c in b"ahqx" for i in range(4)] + list(SPLITS))
BUSY_CLASS = "org.apache.hadoop.hbase.RegionTooBusyException"
CALL_QUEUE = "org.apache.hadoop.hbase.CallQueueTooBigException"
OUT_OF_ORDER = "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException"
SCANNER_RESET = "org.apache.hadoop.hbase.exceptions.ScannerResetException"
#: a row as compared: its key and its newest value by ``b"family:qualifier"``
Row = tuple[bytes, dict[bytes, bytes]]
#: keys for random tables: split points, rows and bounds often meet
KEYS = st.text("abcd", min_size=1, max_size=3).map(str.encode)


def fill(cluster: FakeCluster, table: str, rows: Sequence[bytes]) -> None:
    """Each row: ``d:a`` in two versions, ``d:b`` on every other row, ``e:c`` on rows ending in 1 or at a
    split key (so a scan of ``d:b`` or ``e`` passes over rows that have none of it)."""
    for i, row in enumerate(rows):
        cluster.put(table, row, {b"d:a": b"old-" + row}, timestamp=1)
        cluster.put(table, row, {b"d:a": b"a-" + row}, timestamp=2)
        if i % 2 == 0:
            cluster.put(table, row, {b"d:b": b"b-" + row}, timestamp=1)
        if row.endswith(b"1") or row in SPLITS:
            cluster.put(table, row, {b"e:c": b"c-" + row}, timestamp=3)


def native(cluster: FakeCluster, retries: int = 3) -> NativeClient:
    return NativeClient([cluster.master], retries=retries, backoff_s=0.001, max_backoff_s=0.004, timeout_s=10.0)


def oracle(cluster: FakeCluster, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
           reverse: bool = False, columns: Sequence[bytes] = ()) -> list[Row]:
    """What the scan must return, from the fake's data by sorted Python: the rows of the range in scan
    order with the newest value of every asked column, rows without any left out, ``limit`` at most."""
    def asked(column: bytes) -> bool:
        return not columns or column in columns or column.partition(b":")[0] in columns

    keys = cluster.keys(table)
    if reverse:
        keys = [k for k in reversed(keys) if (not start or k <= start) and (not stop or k > stop)]
    else:
        keys = [k for k in keys if k >= start and (not stop or k < stop)]
    rows = [(k, {c: v for c, v in cluster.row(table, k).items() if asked(c)}) for k in keys]
    return [(k, values) for k, values in rows if values][:limit]


def as_rows(cluster: FakeCluster, table: str, scanned: list[ScannedRow]) -> list[Row]:
    """The client's rows, as the oracle's, once each cell is checked: of its row, one per column in
    family and qualifier order, the newest version."""
    out: list[Row] = []
    for key, cells in scanned:
        columns = [(c.family, c.qualifier) for c in cells]
        assert columns == sorted(set(columns)), key
        for c in cells:
            assert (c.row, c.type) == (key, PUT)
            assert c.timestamp == max(cluster.versions(table, key, c.family + b":" + c.qualifier)), (key, c)
        out.append((key, {c.family + b":" + c.qualifier: c.value for c in cells}))
    return out


async def scan_as_rows(client: NativeClient, cluster: FakeCluster, table: str = TABLE, **scan: Any) -> list[Row]:
    return as_rows(cluster, table, await client.scan(table, **scan))


def user_scans(cluster: FakeCluster) -> list[ReceivedCall]:
    """The Scan calls of user regions (meta scans left out), in order of arrival."""
    return [c for c in cluster.calls if c.scan is not None and "hbase:meta" not in c.tables]


def opens(cluster: FakeCluster) -> list[ReceivedCall]:
    return [c for c in user_scans(cluster) if c.scan is not None and c.scan.kind == "open"]


def opened(cluster: FakeCluster) -> list[bytes]:
    """The regions the scanners were opened on, in order (refused opens included)."""
    return [c.regions[0] for c in opens(cluster)]


def assert_stats(client: NativeClient, **expected: int) -> None:
    stats = client.statistics()
    assert {name: stats[name] for name in expected} == expected


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(3) as fake:
        fake.create_table(TABLE, SPLITS, families=(b"d", b"e"), servers=PLACEMENT)
        fill(fake, TABLE, ROWS)
        yield fake


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """The client asks for pages of 2 rows: every region takes several."""
    monkeypatch.setattr(locate, "_PAGE_ROWS", 2)
    return 2


# -- what a scan returns ----------------------------------------------------------------------------

CASES: dict[str, tuple[dict[str, Any], list[bytes]]] = {
    "forward-full": ({}, ROWS),
    "forward-across-splits": ({"start": b"a2", "stop": b"x1"}, ROWS[2:16]),
    "forward-limit-mid-region": ({"start": b"a1", "limit": 6}, ROWS[1:7]),
    "forward-limit-at-a-region-end": ({"start": b"a1", "limit": 8}, ROWS[1:9]),
    "forward-split-keys": ({"start": b"g", "stop": b"w"}, ROWS[4:14]),
    "forward-from-a-split-key-to-the-end": ({"start": b"p"}, ROWS[9:]),
    "reversed-full": ({"reverse": True}, ROWS[::-1]),
    "reversed-from-the-end": ({"reverse": True, "stop": b"q1"}, [b"x3", b"x2", b"x1", b"x0", b"w", b"q3", b"q2"]),
    "reversed-inside-a-region-to-another": ({"reverse": True, "start": b"q2", "stop": b"h1"},
                                            [b"q2", b"q1", b"q0", b"p", b"h3", b"h2"]),
    "reversed-limit": ({"reverse": True, "start": b"x2", "limit": 7},
                       [b"x2", b"x1", b"x0", b"w", b"q3", b"q2", b"q1"]),
    "reversed-limit-at-a-region-end": ({"reverse": True, "start": b"x2", "limit": 4}, [b"x2", b"x1", b"x0", b"w"]),
    "reversed-split-keys": ({"reverse": True, "start": b"w", "stop": b"g"}, ROWS[14:4:-1]),
    "reversed-from-a-split-key-to-the-start": ({"reverse": True, "start": b"g"}, ROWS[4::-1]),
    "forward-empty": ({"start": b"h2", "stop": b"h2"}, []),
    "forward-gap": ({"start": b"h4", "stop": b"p"}, []),
    "forward-inverted": ({"start": b"q", "stop": b"h"}, []),
    "reversed-empty": ({"reverse": True, "start": b"h1", "stop": b"h1"}, []),
    "reversed-inverted": ({"reverse": True, "start": b"h", "stop": b"q"}, []),
    "limit-zero": ({"limit": 0}, []),
    "family": ({"columns": [b"e"]}, [b"a1", b"g", b"h1", b"p", b"q1", b"w", b"x1"]),
    "qualifier": ({"columns": [b"d:b"], "start": b"g", "stop": b"p"}, [b"g", b"h1", b"h3"]),
    "family-and-qualifier": ({"columns": [b"e", b"d:b"], "stop": b"h"}, [b"a0", b"a1", b"a2", b"g"]),
    "qualifier-and-its-family": ({"columns": [b"d:b", b"d"], "limit": 3}, ROWS[:3]),
    "reversed-columns-limit": ({"columns": [b"e:c"], "reverse": True, "start": b"q3", "limit": 4},
                               [b"q1", b"p", b"h1", b"g"]),
}


@pytest.mark.parametrize(("scan", "keys"), list(CASES.values()), ids=list(CASES))
async def test_a_scan_returns_the_rows_of_its_range(cluster: FakeCluster, scan: dict[str, Any],
                                                    keys: list[bytes]) -> None:
    async with native(cluster) as client:
        got = await scan_as_rows(client, cluster, **scan)
        assert_stats(client, retries=0)
    assert got == oracle(cluster, TABLE, **scan)
    assert [k for k, _ in got] == keys
    assert cluster.open_scanners() == []


async def test_a_scan_opens_only_the_regions_it_reads(cluster: FakeCluster) -> None:
    """A limit reached at a region's end or a stop at a split key opens no scanner on the next region; a
    reversed scan enters each region below the previous one's start key, that key excluded."""
    a, g, p, w = (r.name for r in cluster.regions(TABLE))
    async with native(cluster) as client:
        await client.scan(TABLE, start=b"a1", limit=8)
        assert opened(cluster) == [a, g]
        await client.scan(TABLE, start=b"h", stop=b"w")
        assert opened(cluster)[2:] == [g, p]
        await client.scan(TABLE, reverse=True, stop=b"g")
        assert opened(cluster)[4:] == [w, p, g]

    scans = [c.scan for c in opens(cluster)[4:]]
    assert [(s.start, s.stop, s.include_start, s.reversed) for s in scans if s is not None] == [
        (b"", b"g", True, True), (b"w", b"g", False, True), (b"p", b"g", False, True)]


@settings(max_examples=40, deadline=None)
@given(splits=st.sets(KEYS, min_size=1, max_size=4),
       writes=st.lists(st.tuples(KEYS, st.sampled_from([b"d:a", b"d:b", b"e:c"]), st.integers(1, 3)), max_size=40),
       placement=st.lists(st.integers(0, 2), min_size=5, max_size=5),
       start=st.one_of(st.just(b""), KEYS), stop=st.one_of(st.just(b""), KEYS),
       reverse=st.booleans(), limit=st.integers(1, 30), page=st.sampled_from([1, 2, 3, 1000]),
       columns=st.sampled_from([(), (b"d",), (b"e",), (b"d:a",), (b"d:b", b"e"), (b"e:c", b"d:a"), (b"d", b"d:b")]))
async def test_any_scan_agrees_with_the_oracle(splits: set[bytes], writes: list[tuple[bytes, bytes, int]],
                                               placement: list[int], start: bytes, stop: bytes, reverse: bool,
                                               limit: int, page: int, columns: tuple[bytes, ...]) -> None:
    """Random split points, placements, rows and versions, bounds (often a split key or a row), direction,
    limit, page size and columns: the scan returns the oracle's rows, opens one scanner on each region it
    must read, in scan order, and none more, and leaves no scanner open."""
    async with FakeCluster(3) as cluster:
        regions = cluster.create_table(TABLE, sorted(splits), families=(b"d", b"e"),
                                       servers=placement[:len(splits) + 1])
        for row, column, ts in writes:
            cluster.put(TABLE, row, {column: b"%s/%s/%d" % (row, column, ts)}, timestamp=ts)
        with mock.patch.object(locate, "_PAGE_ROWS", page):
            async with native(cluster) as client:
                got = await scan_as_rows(client, cluster, start=start, stop=stop, limit=limit, reverse=reverse,
                                         columns=columns)
        want = oracle(cluster, TABLE, start=start, stop=stop, limit=limit, reverse=reverse, columns=columns)
        assert got == want
        assert opened(cluster) == planned_regions(regions, start, stop, reverse, limit, [k for k, _ in want])
        assert cluster.open_scanners() == []
        assert all(c.exception is None for c in cluster.calls)


def planned_regions(regions: list[FakeRegion], start: bytes, stop: bytes, reverse: bool, limit: int,
                    keys: list[bytes]) -> list[bytes]:
    """The regions a scan must open: the one holding ``start`` (reversed from ``b""``: the last), then
    each next one in scan order that holds rows of the range, until ``limit`` rows were read."""
    order = sorted(regions, key=lambda r: r.start_key, reverse=reverse)
    if reverse:
        first = order[0] if not start else next(r for r in order if r.holds(start))
    else:
        first = next(r for r in order if r.holds(start))
    out: list[bytes] = []
    read = 0
    for region in order[order.index(first):]:
        beyond = region.end_key <= stop if reverse else region.start_key >= stop
        if region is not first and stop and beyond:
            break
        out.append(region.name)
        read += sum(1 for k in keys if region.holds(k))
        if read >= limit:
            break
    return out


@settings(max_examples=40, deadline=None)
@given(splits=st.sets(KEYS, min_size=1, max_size=4), rows=st.sets(KEYS, min_size=1, max_size=30),
       placement=st.lists(st.integers(0, 2), min_size=5, max_size=5),
       start=st.one_of(st.just(b""), KEYS), stop=st.one_of(st.just(b""), KEYS), reverse=st.booleans(),
       limit=st.integers(1, 40), page=st.sampled_from([1, 2, 3]),
       fault=st.sampled_from(["move", "split", "expire", "busy", "drop", "drop-after-reading"]),
       pick=st.integers(0, 1 << 16))
async def test_any_scan_returns_each_row_once_whatever_fault_it_meets(
        splits: set[bytes], rows: set[bytes], placement: list[int], start: bytes, stop: bytes, reverse: bool,
        limit: int, page: int, fault: str, pick: int) -> None:
    """A random table scanned in small pages, once cleanly, then again meeting one fault at one of the Scan
    calls the clean scan made (``pick`` chooses it): that call's region moved to another server or split
    at one of its rows before it, its scanner lost (a next page's), a busy answer, the connection dropped
    before or after reading the page. Both scans return the oracle's rows, each once."""
    async with FakeCluster(3) as cluster:
        cluster.create_table(TABLE, sorted(splits), servers=placement[:len(splits) + 1])
        for row in rows:
            cluster.put(TABLE, row, {b"d:a": b"v-" + row})
        scan: dict[str, Any] = {"start": start, "stop": stop, "limit": limit, "reverse": reverse}
        want = oracle(cluster, TABLE, **scan)
        with mock.patch.object(locate, "_PAGE_ROWS", page):
            async with native(cluster) as client:
                assert await scan_as_rows(client, cluster, **scan) == want
                calls = user_scans(cluster)
                directive = fault_at(cluster, calls, fault, pick)
                cluster.inject(directive)
                assert await scan_as_rows(client, cluster, **scan) == want
        assert directive.used == 1
        event(fault)


def fault_at(cluster: FakeCluster, calls: list[ReceivedCall], fault: str, pick: int) -> Directive:
    """A directive that hits the same scan again at one of its ``calls`` (``pick`` chooses which): a
    ``move`` or ``split`` of that call's region (split at one of its rows when it holds one past its start,
    else moved), an ``expire`` of a next page's scanner (a ``busy`` answer when the scan asks for no next
    page), a ``busy`` answer, a ``drop`` of the connection (``drop-after-reading``: after the page was read)."""
    if fault == "expire":
        nexts = [c for c in calls if c.scan is not None and c.scan.kind == "next"]
        if nexts:
            return ExpireScanner(table=TABLE, skip=pick % len(nexts))
        fault = "busy"
    skip = pick % len(calls)
    region = next(r for r in cluster.regions(TABLE) if r.name in calls[skip].regions)
    if fault in ("move", "split"):
        inside = [k for k in cluster.keys(TABLE) if region.holds(k) and k != region.start_key]
        assert region.server is not None
        to = (region.server + 1 + pick % 2) % len(cluster.servers)
        if fault == "split" and inside:
            at = inside[pick % len(inside)]
            return BeforeCall(lambda: cluster.split(region, at, servers=(to, region.server)), method="Scan",
                              table=TABLE, skip=skip)
        return BeforeCall(lambda: cluster.move(region, to), method="Scan", table=TABLE, skip=skip)
    if fault == "busy":
        return FailCall(BUSY_CLASS, method="Scan", table=TABLE, skip=skip)
    return DropConnection(method="Scan", table=TABLE, skip=skip, after_applying=fault == "drop-after-reading")


async def test_pages_smaller_than_a_region(cluster: FakeCluster, small_pages: int) -> None:
    """Pages of two rows: each region is read in pages by its scanner, which the server closes at the
    region's end; a limit reached in the middle of a page's region closes the scanner from the client."""
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster) == oracle(cluster, TABLE)
        assert await scan_as_rows(client, cluster, start=b"a1", limit=6) == oracle(cluster, TABLE, start=b"a1",
                                                                                  limit=6)

    g = cluster.region_of(TABLE, b"g").name
    full, limited = user_scans(cluster)[:11], user_scans(cluster)[11:]
    assert [(c.regions, c.scan.kind, c.scanned) for c in full if c.scan is not None][2:5] == [
        ([g], "open", [b"g", b"h0"]), ([g], "next", [b"h1", b"h2"]), ([g], "next", [b"h3"])]
    assert all(c.scan is not None and c.scan.rows == small_pages for c in full)
    assert [(c.scan.kind, c.scan.rows, c.scan.limit, c.scanned) for c in limited if c.scan is not None] == [
        ("open", 2, 6, [b"a1", b"a2"]), ("next", 2, 0, [b"a3"]),
        ("open", 2, 3, [b"g", b"h0"]), ("next", 1, 0, [b"h1"]), ("close", 0, 0, [])]
    assert cluster.open_scanners() == []


# -- failures a scan retries ------------------------------------------------------------------------


@pytest.mark.parametrize(("remembered", "answer"), [(True, REGION_MOVED), (False, NOT_SERVING)],
                         ids=["RegionMovedException", "NotServingRegionException"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
async def test_a_region_moved_before_its_scanner_opens_is_read_on_its_new_server(
        cluster: FakeCluster, remembered: bool, answer: str, reverse: bool) -> None:
    h = cluster.region_of(TABLE, b"h")
    cluster.inject(BeforeCall(lambda: cluster.move(h, 2, remembered=remembered), method="Scan", scan="open",
                              region=h))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster, reverse=reverse) == oracle(cluster, TABLE, reverse=reverse)
        assert_stats(client, retries=1, region_refreshes=2)

    refused, retried = [c for c in opens(cluster) if c.regions == [h.name]]
    assert (refused.server, refused.exception, retried.server, retried.exception) == (1, answer, 2, None)
    assert refused.scan == retried.scan


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
async def test_a_region_moved_between_pages_is_read_again_from_where_its_scan_started(
        cluster: FakeCluster, small_pages: int, reverse: bool) -> None:
    h = cluster.region_of(TABLE, b"h")
    cluster.inject(BeforeCall(lambda: cluster.move(h, 2), method="Scan", scan="next", region=h))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster, reverse=reverse) == oracle(cluster, TABLE, reverse=reverse)
        assert_stats(client, retries=1, region_refreshes=2)

    first, moved, *rest = [c for c in user_scans(cluster) if c.regions == [h.name]]
    assert first.scanned and (moved.scan is not None and moved.scan.kind, moved.exception) == ("next", NOT_SERVING)
    reopened = rest[0]
    assert (reopened.server, reopened.scan) == (2, first.scan)
    assert cluster.open_scanners() == []


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
async def test_a_region_split_between_two_regions_scans_is_read_in_its_daughters(
        cluster: FakeCluster, reverse: bool) -> None:
    """The region next in scan order splits while the one before is read: its stale location answers
    ``NotServingRegionException``, and the scan goes on in both daughters, in order."""
    h, q = cluster.region_of(TABLE, b"h"), cluster.region_of(TABLE, b"q")
    splitting, before = (h, q) if reverse else (q, h)
    daughters: list[FakeRegion] = []
    cluster.inject(BeforeCall(lambda: daughters.extend(cluster.split(splitting, splitting.start_key + b"2",
                                                                     servers=(2, 0))),
                              method="Scan", scan="open", region=before))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster, reverse=reverse) == oracle(cluster, TABLE, reverse=reverse)
        assert_stats(client, retries=1, region_refreshes=2)

    left, right = daughters
    names = opened(cluster)
    at = names.index(splitting.name)
    assert names[at + 1:at + 3] == ([right.name, left.name] if reverse else [left.name, right.name])
    assert opens(cluster)[at].exception == NOT_SERVING


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
async def test_a_region_split_while_it_is_read_is_read_again_in_its_daughters(
        cluster: FakeCluster, small_pages: int, reverse: bool) -> None:
    h = cluster.region_of(TABLE, b"h")
    cluster.inject(BeforeCall(lambda: cluster.split(h, b"h2", servers=(0, 2)), method="Scan", scan="next",
                              region=h))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster, reverse=reverse) == oracle(cluster, TABLE, reverse=reverse)
        assert_stats(client, retries=1, region_refreshes=2)
    assert cluster.open_scanners() == []


@pytest.mark.parametrize("lose", [
    lambda: ExpireScanner(skip=1),
    lambda: FailCall(OUT_OF_ORDER, method="Scan", scan="next", skip=1),
    lambda: FailCall(SCANNER_RESET, method="Scan", scan="next", skip=1),
], ids=["UnknownScannerException", "OutOfOrderScannerNextException", "ScannerResetException"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
async def test_a_lost_scanner_is_opened_again_without_a_meta_re_read(cluster: FakeCluster, small_pages: int,
                                                                     lose: Callable[[], Directive],
                                                                     reverse: bool) -> None:
    """The second next page of the scan (in the second region) answers that its scanner is lost: the
    region is read again from its start by a new scanner on the same server; meta is not re-read."""
    fault = lose()
    cluster.inject(fault)
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster, reverse=reverse) == oracle(cluster, TABLE, reverse=reverse)
        assert_stats(client, retries=1, region_refreshes=1)

    [lost] = [c for c in user_scans(cluster) if c.exception is not None]
    assert lost.scan is not None and lost.scan.kind == "next"
    assert lost.exception == (fault.java_class if isinstance(fault, FailCall) else UNKNOWN_SCANNER)
    assert [c.server for c in opens(cluster) if c.regions == lost.regions] == [lost.server] * 2
    assert fault.used == 1


@pytest.mark.parametrize("row", [b"a", b"h"], ids=["meta-s-server", "another-server"])
@pytest.mark.parametrize("kind", ["open", "next"])
@pytest.mark.parametrize("after_applying", [False, True], ids=["before-answering", "answer-lost"])
async def test_a_dropped_connection_mid_scan_is_retried_over_a_new_one(cluster: FakeCluster, small_pages: int,
                                                                       row: bytes, kind: ScanKind,
                                                                       after_applying: bool) -> None:
    """The server of ``row``'s region (server 0, which holds meta too, or server 1) closes the connection
    instead of answering a Scan of it (the answer lost after the page was read, or before): meta is re-read
    and the region read again, each over a new connection."""
    region = cluster.region_of(TABLE, row)
    cluster.inject(DropConnection(method="Scan", scan=kind, region=region, after_applying=after_applying))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster) == oracle(cluster, TABLE)
        assert_stats(client, retries=1, region_refreshes=2)

    of_region = [c for c in user_scans(cluster) if c.regions == [region.name]]
    [dropped] = [c for c in of_region if c.dropped]
    reopened = next(c for c in of_region[of_region.index(dropped) + 1:] if c.scan is not None and c.scan.kind == "open")
    assert reopened.server == region.server and reopened.connection != dropped.connection


@pytest.mark.parametrize(("java_class", "kind"), [(CALL_QUEUE, "open"), (BUSY_CLASS, "next")],
                         ids=["CallQueueTooBigException-open", "RegionTooBusyException-next"])
async def test_a_busy_server_is_waited_out_without_a_meta_re_read(cluster: FakeCluster, small_pages: int,
                                                                  java_class: str, kind: ScanKind) -> None:
    fault = FailCall(java_class, method="Scan", table=TABLE, scan=kind, skip=2)  # the third of its kind
    cluster.inject(fault)
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster) == oracle(cluster, TABLE)
        assert_stats(client, retries=1, region_refreshes=1)
        assert cluster.open_scanners() == []  # a scanner whose next page was refused is closed, not left to expire
    assert fault.used == 1 and [c.exception for c in user_scans(cluster) if c.exception] == [java_class]


async def test_retries_are_counted_per_region(cluster: FakeCluster) -> None:
    """One retry allowed, and every region's first open answered busy: each region takes its retry."""
    cluster.inject(*(FailCall(BUSY_CLASS, method="Scan", scan="open", region=r) for r in cluster.regions(TABLE)))
    async with native(cluster, retries=1) as client:
        assert await scan_as_rows(client, cluster) == oracle(cluster, TABLE)
        assert_stats(client, retries=4, region_refreshes=1)
    assert not cluster.unconsumed()


async def test_a_region_in_transition_is_waited_for(cluster: FakeCluster) -> None:
    """The region of ``h`` has no server in meta until the third meta read: the scan waits for it (a
    failed round), then reads it on its server."""
    h = cluster.region_of(TABLE, b"h")
    cluster.move(h, None)
    cluster.inject(BeforeCall(lambda: cluster.move(h, 2), method="Scan", table="hbase:meta", skip=2))
    async with native(cluster) as client:
        assert await scan_as_rows(client, cluster) == oracle(cluster, TABLE)
        assert_stats(client, retries=1, region_refreshes=3)
    assert [c.server for c in opens(cluster) if c.regions == [h.name]] == [2]


# -- failures a scan does not retry -----------------------------------------------------------------


async def test_a_non_retryable_exception_raises_at_once(cluster: FakeCluster) -> None:
    cluster.inject(FailCall(DO_NOT_RETRY, method="Scan", table=TABLE, skip=1))
    async with native(cluster) as client:
        with pytest.raises(HBaseRequestError, match="DoNotRetryIOException"):
            await client.scan(TABLE)
        assert_stats(client, retries=0)
    assert len(user_scans(cluster)) == 2


async def test_a_missing_table_raises_at_once(cluster: FakeCluster) -> None:
    async with native(cluster) as client:
        with pytest.raises(TableNotFound, match="nope"):
            await client.scan("nope")
        assert_stats(client, retries=0)
    assert user_scans(cluster) == []


async def test_a_family_the_table_lacks_raises_at_once(cluster: FakeCluster) -> None:
    async with native(cluster) as client:
        with pytest.raises(HBaseRequestError, match="NoSuchColumnFamilyException"):
            await client.scan(TABLE, columns=[b"d:a", b"nope"])
        assert_stats(client, retries=0)
    [refused] = user_scans(cluster)
    assert refused.exception == NO_SUCH_FAMILY


@pytest.mark.parametrize(("java_class", "error", "refreshes"), [
    (NOT_SERVING, RegionMapStale, 1 + 2), (BUSY_CLASS, HBaseUnavailable, 1), (UNKNOWN_SCANNER, HBaseRequestError, 1),
], ids=["relocate", "busy", "scanner-lost"])
async def test_a_region_failing_forever_exhausts_the_retries(cluster: FakeCluster, java_class: str,
                                                            error: type[Exception], refreshes: int) -> None:
    h = cluster.region_of(TABLE, b"h")
    fault = FailCall(java_class, method="Scan", region=h, times=None)
    cluster.inject(fault)
    retries = 2
    async with native(cluster, retries=retries) as client:
        with pytest.raises(error, match=f"retries exhausted: .*{java_class}"):
            await client.scan(TABLE)
        assert_stats(client, retries=retries, region_refreshes=refreshes)
    assert fault.used == retries + 1
    assert opened(cluster) == [cluster.region_of(TABLE, b"a").name] + [h.name] * (retries + 1)
