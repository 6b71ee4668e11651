"""``NativeClient.write``'s retries against a fake cluster speaking HBase's RPC over TCP
(:mod:`tests.unit.native.fake_cluster`): every retryable exception, at the level of an action, a region
action and a whole call, moved and split regions, lost connections and answers, refusals and exhausted
retries. Each retry round must carry exactly the actions that failed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from connectors.hbase.native.client import NativeClient, _Batch
from connectors.hbase.native.failures import (
    BACK_OFF,
    CONNECTION_LOST,
    META_UNREADABLE,
    RELOCATE,
    UNASSIGNED,
    short_name,
)
from connectors.hbase.native.regions import Region
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.errors import HBaseRequestError, HBaseUnavailable, RegionMapStale
from tests.unit.native.fake_cluster import (
    DO_NOT_RETRY,
    NO_SUCH_FAMILY,
    NOT_SERVING,
    REGION_MOVED,
    BeforeCall,
    Directive,
    DropConnection,
    FailActions,
    FailCall,
    FailRegion,
    FakeCluster,
    GoSilent,
    ReceivedCall,
)

TABLE = "t"
#: four regions [, g) [g, p) [p, w) [w, ) on servers 0 (which holds meta too), 1, 2, 1
SPLITS = (b"g", b"p", b"w")
PLACEMENT = (0, 1, 2, 1)
#: four rows in each region
ROWS = [b"%c%d" % (c, i) for c in b"ahqx" for i in range(4)]
TS = 5
BUSY_CLASS = "org.apache.hadoop.hbase.RegionTooBusyException"
CALL_QUEUE = "org.apache.hadoop.hbase.CallQueueTooBigException"
#: the Java exceptions the client retries (the others of RELOCATE are the client's own names)
RETRYABLE = sorted(c for c in RELOCATE | BACK_OFF if "." in c)


def put(row: bytes, column: bytes = b"d:q") -> Mutation:
    return Mutation(TABLE, row, MutationKind.PUT, {column: b"v-" + row}, TS, Origin(TopicPartition("t", 0), 0))


def increment(row: bytes, amount: int, offset: int) -> Mutation:
    return Mutation(TABLE, row, MutationKind.INCREMENT, {b"d:n": b""}, None, Origin(TopicPartition("t", 0), offset),
                    amount=amount)


def native(cluster: FakeCluster, retries: int = 3) -> NativeClient:
    return NativeClient([cluster.master], retries=retries, backoff_s=0.001, max_backoff_s=0.004, timeout_s=10.0)


def multis(cluster: FakeCluster, first: int = 0) -> list[ReceivedCall]:
    """The ``Multi`` calls received, from the ``first``-th on."""
    return [c for c in cluster.calls if c.method == "Multi"][first:]


def assert_stats(client: NativeClient, **expected: int) -> None:
    """The client's counters named in ``expected`` have those values."""
    stats = client.statistics()
    assert {name: stats[name] for name in expected} == expected


def assert_landed_once(cluster: FakeCluster, rows: list[bytes]) -> None:
    """Each row holds its put's one version, applied once."""
    for row in rows:
        assert cluster.versions(TABLE, row, b"d:q") == {TS: b"v-" + row}, row
        assert cluster.applied[(TABLE, row)] == 1, row


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    async with FakeCluster(3) as fake:
        fake.create_table(TABLE, SPLITS, servers=PLACEMENT)
        yield fake


def test_the_client_s_own_failure_names_are_covered() -> None:
    """Besides Java exceptions (each answered below), the client retries three failures it names itself:
    a lost connection (the dead-connection tests), a row without a server (the region in transition)
    and a meta re-read that failed (the busy meta server)."""
    assert {c for c in RELOCATE | BACK_OFF if "." not in c} == {CONNECTION_LOST, UNASSIGNED, META_UNREADABLE}
    assert "org.apache.hadoop.hbase.ipc.ServerTooBusyException" in BACK_OFF


@pytest.mark.parametrize("java_class", RETRYABLE, ids=short_name)
@pytest.mark.parametrize("level", ["action", "region", "call"])
async def test_a_retryable_exception_resends_exactly_the_failed_actions(cluster: FakeCluster, java_class: str,
                                                                        level: str) -> None:
    """Answered once for some actions (every other action of one region), for a whole region action, or
    for the whole call to a server holding two regions: the write succeeds after one retry round that
    carries exactly the failed actions, and every row lands once. Relocating exceptions re-read meta
    first; busy ones only wait."""
    h = cluster.region_of(TABLE, b"h")  # server 1, with the region of "x"
    fault: Directive = {"action": FailActions(java_class, region=h, every=2),
                        "region": FailRegion(java_class, h),
                        "call": FailCall(java_class, server=1)}[level]
    failed = {"action": [b"h1", b"h3"], "region": [b"h0", b"h1", b"h2", b"h3"],
              "call": [b"h0", b"h1", b"h2", b"h3", b"x0", b"x1", b"x2", b"x3"]}[level]
    cluster.inject(fault)
    async with native(cluster) as client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=4, actions_sent=len(ROWS) + len(failed), actions_failed=len(failed),
                     retries=1, region_refreshes=2 if java_class in RELOCATE else 1)

    first_round, retry = multis(cluster)[:3], multis(cluster)[3:]
    assert sorted(c.server for c in first_round) == [0, 1, 2]
    [failing] = [c for c in first_round if c.server == 1]
    assert failing.failed_rows == failed and set(failing.failed.values()) == {java_class}
    assert [(c.server, c.rows, c.failed) for c in retry] == [(1, failed, {})]
    assert_landed_once(cluster, ROWS)
    assert fault.used == 1 and not cluster.unconsumed()


@pytest.mark.parametrize(("remembered", "answer"), [(True, REGION_MOVED), (False, NOT_SERVING)],
                         ids=["RegionMovedException", "NotServingRegionException"])
async def test_a_region_moved_mid_write_is_written_on_its_new_server(cluster: FakeCluster, remembered: bool,
                                                                     answer: str) -> None:
    h = cluster.region_of(TABLE, b"h")
    cluster.inject(BeforeCall(lambda: cluster.move(h, 2, remembered=remembered), region=h))
    async with native(cluster) as client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, retries=1, region_refreshes=2)
        located = {r.name: r.port for r in await client.regions(TABLE)}

    [old] = [c for c in multis(cluster)[:3] if c.server == 1]
    assert old.failed_rows == [b"h0", b"h1", b"h2", b"h3"] and set(old.failed.values()) == {answer}
    [retry] = multis(cluster, 3)
    assert (retry.server, retry.regions, retry.rows, retry.failed) == (2, [h.name], old.failed_rows, {})
    assert located[h.name] == cluster.servers[2].port
    assert_landed_once(cluster, ROWS)


async def test_a_region_split_mid_write_is_written_to_its_daughters(cluster: FakeCluster) -> None:
    q = cluster.region_of(TABLE, b"q")  # server 2
    cluster.inject(BeforeCall(lambda: cluster.split(q, b"q2", servers=(2, 0)), region=q))
    async with native(cluster) as client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, retries=1, region_refreshes=2)

    left, right = cluster.region_of(TABLE, b"q1"), cluster.region_of(TABLE, b"q2")
    assert (left.start_key, left.end_key, right.start_key, right.end_key) == (b"p", b"q2", b"q2", b"w")
    [parent_call] = [c for c in multis(cluster)[:3] if c.server == 2]
    assert parent_call.regions == [q.name] and set(parent_call.failed.values()) == {NOT_SERVING}
    assert sorted((c.server, c.regions, c.rows) for c in multis(cluster, 3)) == [
        (0, [right.name], [b"q2", b"q3"]), (2, [left.name], [b"q0", b"q1"])]
    assert_landed_once(cluster, ROWS)


async def test_a_region_without_a_server_is_written_once_meta_names_one(cluster: FakeCluster) -> None:
    """A region in transition (no server in meta): its rows are not sent; meta is read again until it names
    a server."""
    h = cluster.region_of(TABLE, b"h")
    cluster.move(h, None)
    async with native(cluster) as client:
        assert [r.host for r in await client.regions(TABLE)] == ["127.0.0.1", "", "127.0.0.1", "127.0.0.1"]
        cluster.inject(BeforeCall(lambda: cluster.move(h, 2), method="Scan"))
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=4, actions_failed=4, retries=1, region_refreshes=2)

    assert all(not set(c.rows) & {b"h0", b"h1", b"h2", b"h3"} for c in multis(cluster)[:3])
    [retry] = multis(cluster, 3)
    assert (retry.server, retry.rows) == (2, [b"h0", b"h1", b"h2", b"h3"])
    assert_landed_once(cluster, ROWS)


async def test_meta_moved_is_found_again_through_the_registry(cluster: FakeCluster) -> None:
    h = cluster.region_of(TABLE, b"h")
    async with native(cluster) as client:
        await client.regions(TABLE)
        cluster.move_meta(2)
        cluster.move(h, 0)  # the write's relocation re-reads meta, which has moved
        await client.write(TABLE, [put(r) for r in ROWS])

    scans = [(c.method, c.server, c.exception) for c in cluster.calls if c.method != "Multi"]
    assert scans == [("GetMetaRegionLocations", 0, None), ("Scan", 0, None),
                     ("Scan", 0, REGION_MOVED), ("GetMetaRegionLocations", 0, None), ("Scan", 2, None)]
    assert [(c.server, c.rows) for c in multis(cluster, 3)] == [(0, [b"h0", b"h1", b"h2", b"h3"])]
    assert_landed_once(cluster, ROWS)


async def test_a_ping_reads_meta_and_after_meta_moved_asks_the_registry_again(cluster: FakeCluster) -> None:
    """Readiness: a ping reads one row of meta where the registry said; once meta moved, the ping fails
    (its server says the region is not there) and the next one finds it through the registry again."""
    async with native(cluster) as client:
        await client.ping()
        cluster.move_meta(2)
        with pytest.raises(RegionMapStale, match="RegionMovedException"):
            await client.ping()
        await client.ping()

    calls = [(c.method, c.server, c.exception) for c in cluster.calls]
    assert calls == [("GetMetaRegionLocations", 0, None), ("Scan", 0, None), ("Scan", 0, REGION_MOVED),
                     ("GetMetaRegionLocations", 0, None), ("Scan", 2, None)]


async def test_a_call_level_exception_resends_the_whole_call(cluster: FakeCluster) -> None:
    """``CallQueueTooBigException`` in the ResponseHeader: nothing of the call was applied; the retry
    carries the same region actions, after a wait and without a meta re-read."""
    cluster.inject(FailCall(CALL_QUEUE, server=1))
    async with native(cluster) as client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=4, actions_failed=8, retries=1, region_refreshes=1)

    [refused] = [c for c in multis(cluster)[:3] if c.server == 1]
    [retry] = multis(cluster, 3)
    assert refused.exception == CALL_QUEUE and retry.exception is None
    assert (retry.server, retry.region_actions) == (1, refused.region_actions)
    assert_landed_once(cluster, ROWS)


@pytest.mark.parametrize("after_applying", [False, True], ids=["before-applying", "after-applying"])
async def test_a_dead_connection_is_retried_over_a_new_one_and_counts_once(cluster: FakeCluster,
                                                                           after_applying: bool) -> None:
    """Server 0 (which holds meta too) closes the connection instead of answering, before or after
    applying: the client reconnects (for the meta re-read and the retry), puts keep one version each,
    and increments count once although the fake received their nonces twice."""
    counted = {b"a9": 3, b"b9": -2, b"h9": 5, b"q9": 7}  # a9, b9 on server 0
    batch = [put(r) for r in ROWS] + [increment(r, n, i) for i, (r, n) in enumerate(counted.items())]
    cluster.inject(DropConnection(server=0, after_applying=after_applying))
    async with native(cluster) as client:
        await client.write(TABLE, batch)
        assert_stats(client, multi_calls=4, actions_failed=6, retries=1, region_refreshes=2)

    [dropped] = [c for c in multis(cluster)[:3] if c.server == 0]
    [retry] = multis(cluster, 3)
    assert dropped.dropped and retry.server == 0 and retry.connection != dropped.connection
    assert retry.rows == dropped.rows == [b"a0", b"a1", b"a2", b"a3", b"a9", b"b9"]
    assert [a.nonce for a in retry.actions] == [a.nonce for a in dropped.actions]
    group = retry.nonce_group
    assert group is not None and group == dropped.nonce_group
    assert {row: cluster.counter(TABLE, row, b"d:n") for row in counted} == counted
    seen = {a.row: cluster.nonces_seen[(group, a.nonce)] for c in multis(cluster) for a in c.actions
            if a.nonce is not None}
    assert seen == {b"a9": 2, b"b9": 2, b"h9": 1, b"q9": 1}
    for row in ROWS:
        assert cluster.versions(TABLE, row, b"d:q") == {TS: b"v-" + row}
        assert cluster.applied[(TABLE, row)] == (2 if after_applying and row < b"g" else 1)


async def test_a_silent_connection_is_closed_at_the_timeout_and_the_retry_goes_over_a_new_one(
        cluster: FakeCluster) -> None:
    """Server 1 leaves a call unanswered, and its connection with it (a cut network): the call times
    out, the client closes that connection, and the retry reaches the server over a new one. A retry
    over the silent connection would time out again, and every retry after it."""
    cluster.inject(GoSilent(server=1))
    client = NativeClient([cluster.master], retries=3, backoff_s=0.001, max_backoff_s=0.004, timeout_s=0.5)
    async with client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=4, actions_failed=8, retries=1, region_refreshes=2)

    [silenced] = [c for c in multis(cluster)[:3] if c.server == 1]
    [retry] = multis(cluster, 3)
    assert silenced.silenced and not retry.silenced
    assert (retry.server, retry.region_actions) == (1, silenced.region_actions)
    assert retry.connection != silenced.connection
    assert_landed_once(cluster, ROWS)


async def test_a_batch_written_again_after_a_lost_answer_counts_once_per_client(cluster: FakeCluster) -> None:
    """The answer lost after applying and no retry left: the caller writes the batch again with the same
    client, and its increments count once (same nonces, same group); a new client (a restarted worker)
    draws a new nonce group, and they count again."""
    batch = [increment(b"a9", 3, 0), increment(b"h9", 5, 1)]  # servers 0 and 1
    cluster.inject(DropConnection(server=0, after_applying=True))
    async with native(cluster, retries=0) as client:
        with pytest.raises(RegionMapStale, match=f"retries exhausted: 1 action.*{CONNECTION_LOST}"):
            await client.write(TABLE, batch)
        await client.write(TABLE, batch)
    assert (cluster.counter(TABLE, b"a9", b"d:n"), cluster.counter(TABLE, b"h9", b"d:n")) == (3, 5)

    async with native(cluster) as restarted:
        await restarted.write(TABLE, batch)
    assert (cluster.counter(TABLE, b"a9", b"d:n"), cluster.counter(TABLE, b"h9", b"d:n")) == (6, 10)
    assert len({c.nonce_group for c in multis(cluster)}) == 2


async def test_partial_failures_on_two_servers_resend_only_their_failed_actions(cluster: FakeCluster) -> None:
    """Server 1 is busy for every third of its actions, server 2 no longer serves rows ending in 1,
    server 0 answers all: the retry round sends each failed server exactly its failed actions, and
    nothing to server 0."""
    cluster.inject(FailActions(BUSY_CLASS, server=1, every=3),
                   FailActions(NOT_SERVING, server=2, rows=lambda row: row.endswith(b"1")))
    async with native(cluster) as client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=5, actions_sent=len(ROWS) + 3, actions_failed=3, retries=1,
                     region_refreshes=2)

    assert sorted((c.server, c.failed_rows) for c in multis(cluster)[:3]) == [
        (0, []), (1, [b"h2", b"x1"]), (2, [b"q1"])]
    assert sorted((c.server, c.rows, c.failed) for c in multis(cluster, 3)) == [
        (1, [b"h2", b"x1"], {}), (2, [b"q1"], {})]
    assert_landed_once(cluster, ROWS)


async def test_deletes_are_resent_like_puts(cluster: FakeCluster) -> None:
    """A column up to a timestamp, a family, a whole row: deletes refused by busy servers are resent and
    remove what they name."""
    rows = [b"a1", b"h1", b"q1"]
    origin = Origin(TopicPartition("t", 0), 0)

    def delete(row: bytes, cells: dict[bytes, bytes]) -> Mutation:
        return Mutation(TABLE, row, MutationKind.DELETE, cells, 4, origin)

    async with native(cluster) as client:
        await client.write(TABLE, [Mutation(TABLE, r, MutationKind.PUT, {b"d:q": b"old", b"d:r": b"kept"}, 3, origin)
                                   for r in rows])
        cluster.inject(FailActions(BUSY_CLASS, times=3))  # every action of the next three calls
        await client.write(TABLE, [delete(b"a1", {b"d:q": b""}), delete(b"h1", {b"d": b""}), delete(b"q1", {})])
        assert_stats(client, multi_calls=9, actions_failed=3, retries=1)

    assert [(c.server, c.rows, c.failed) for c in sorted(multis(cluster, 6), key=lambda c: c.server)] == [
        (0, [b"a1"], {}), (1, [b"h1"], {}), (2, [b"q1"], {})]
    assert [cluster.row(TABLE, r) for r in rows] == [{b"d:r": b"kept"}, {}, {}]


@pytest.mark.parametrize("case", ["missing-family", "region-refused", "call-refused"])
async def test_a_refused_mutation_raises_at_once_naming_the_unapplied(cluster: FakeCluster, case: str) -> None:
    """No retry can fix a ``NoSuchColumnFamilyException`` (the table has no family ``nope``), nor a
    ``DoNotRetryIOException`` for a whole region action or a whole call: the write raises after its first
    round; the error's ``unapplied`` names exactly the refused mutations, and every other one was applied."""
    batch = [put(r) for r in ROWS]
    java_class = DO_NOT_RETRY
    if case == "missing-family":
        refused = [2, 9]  # a2, q1
        for i in refused:
            batch[i] = put(ROWS[i], b"nope:q")
        java_class = NO_SUCH_FAMILY
    elif case == "region-refused":
        refused = [4, 5, 6, 7]  # the region of "h"
        cluster.inject(FailRegion(DO_NOT_RETRY, cluster.region_of(TABLE, b"h")))
    else:
        refused = [4, 5, 6, 7, 12, 13, 14, 15]  # server 1's regions: those of "h" and "x"
        cluster.inject(FailCall(DO_NOT_RETRY, server=1))
    async with native(cluster) as client:
        with pytest.raises(HBaseRequestError, match=short_name(java_class)) as info:
            await client.write(TABLE, batch)
        assert_stats(client, multi_calls=3, retries=0)

    assert info.value.unapplied == tuple(refused) and info.value.table == TABLE
    assert {f.java_class for f in info.value.failures} == {java_class}  # type: ignore[attr-defined]
    assert_landed_once(cluster, [r for i, r in enumerate(ROWS) if i not in refused])
    assert all(cluster.row(TABLE, ROWS[i]) == {} for i in refused)


async def test_a_server_s_part_over_the_request_cap_goes_as_several_multis_in_order(cluster: FakeCluster) -> None:
    """Under a cap that fits four rows' request but not eight, server 1's part (regions of "h" and "x")
    goes as two Multi calls, cut in request order; servers 0 and 2 get one each; every row lands once."""
    cap = 300
    h, x = (Region(cluster.region_of(TABLE, k).name, TABLE, b"", b"", 1, "", 0) for k in (b"h", b"x"))
    batch = _Batch(TABLE, [put(r) for r in ROWS])
    _, *four = batch.request([(h, range(4, 8))], 1)
    _, *eight = batch.request([(h, range(4, 8)), (x, range(12, 16))], 1)
    assert sum(map(len, four)) <= cap < sum(map(len, eight))
    client = NativeClient([cluster.master], retries=3, backoff_s=0.001, max_backoff_s=0.004, max_request_bytes=cap)
    async with client:
        await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=4, actions_failed=0, retries=0)

    assert sorted((c.server, c.rows) for c in multis(cluster)) == [
        (0, ROWS[0:4]), (1, ROWS[4:8]), (1, ROWS[12:16]), (2, ROWS[8:12])]
    assert_landed_once(cluster, ROWS)


async def test_a_mutation_over_the_request_cap_is_refused_alone_and_the_rest_lands(cluster: FakeCluster) -> None:
    """A put that alone encodes past the cap is never sent: the write raises a request error naming it
    unapplied, after the others were written."""
    batch = [put(r) for r in ROWS]
    batch[5] = Mutation(TABLE, ROWS[5], MutationKind.PUT, {b"d:q": bytes(4000)}, TS, Origin(TopicPartition("t", 0), 0))
    client = NativeClient([cluster.master], retries=3, backoff_s=0.001, max_backoff_s=0.004, max_request_bytes=1024)
    async with client:
        with pytest.raises(HBaseRequestError, match="request-too-large") as info:
            await client.write(TABLE, batch)
        assert_stats(client, retries=0)

    assert info.value.unapplied == (5,)
    assert_landed_once(cluster, [r for i, r in enumerate(ROWS) if i != 5])
    assert cluster.row(TABLE, ROWS[5]) == {}


@pytest.mark.parametrize(("java_class", "error"), [(BUSY_CLASS, HBaseUnavailable), (NOT_SERVING, RegionMapStale)],
                         ids=["busy", "relocate"])
async def test_a_region_that_keeps_failing_exhausts_the_retries(cluster: FakeCluster, java_class: str,
                                                               error: type[Exception]) -> None:
    h = cluster.region_of(TABLE, b"h")
    fault = FailActions(java_class, region=h, times=None)
    cluster.inject(fault)
    retries = 2
    async with native(cluster, retries=retries) as client:
        with pytest.raises(error) as info:
            await client.write(TABLE, [put(r) for r in ROWS])
        assert_stats(client, multi_calls=3 + retries, retries=retries,
                     region_refreshes=1 + retries if error is RegionMapStale else 1)

    message = str(info.value)
    assert message.startswith(f"retries exhausted: 4 action(s) failed on table {TABLE!r}; first: region ")
    assert h.name.decode() in message and java_class in message
    assert sorted(f.index for f in info.value.failures) == [4, 5, 6, 7]  # type: ignore[attr-defined]
    assert fault.used == retries + 1
    assert [c.rows for c in multis(cluster, 3)] == [[b"h0", b"h1", b"h2", b"h3"]] * retries
    assert all(cluster.row(TABLE, r) == {} for r in (b"h0", b"h1", b"h2", b"h3"))


async def test_a_busy_meta_server_during_a_re_read_is_waited_out(cluster: FakeCluster) -> None:
    """A relocation's meta re-read answered ``CallQueueTooBigException`` twice: a busy answer like any
    other, to be waited out within the write's retries (here 3)."""
    h = cluster.region_of(TABLE, b"h")
    async with native(cluster) as client:
        await client.regions(TABLE)
        cluster.inject(FailActions(NOT_SERVING, region=h), FailCall(CALL_QUEUE, method="Scan", times=2))
        await client.write(TABLE, [put(r) for r in ROWS])

    assert_landed_once(cluster, ROWS)
