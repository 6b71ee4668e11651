"""The worker end to end on the in-memory twins of Kafka and HBase (connectors.memory): offsets and
commits, dead letters, backpressure, rebalances and failures on demand, in milliseconds. The same
guarantees against the real servers are in tests/integration/test_worker*.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from structlog.testing import capture_logs

from connectors.memory import MemoryBroker, MemoryHBase
from connectors.memory.kafka import MemorySource
from pipeline.core.ingest.batcher import SealReason
from pipeline.core.model import TopicPartition
from pipeline.errors import (
    ConfigError,
    HBaseRequestError,
    HBaseUnavailable,
    KafkaCommitFailed,
    KafkaUnavailable,
    RegionMapStale,
)
from pipeline.runtime.ingest.deadletter import HEADER_PREFIX
from pipeline.runtime.ingest.worker import Worker, WorkerSummary, seals_when_caught_up
from pipeline.runtime.ingest.writer import WriteAbandoned
from pipeline.settings import Settings, load_settings

TOPIC = "events"
TABLE = "t"
DLQ = "events.dead"
PARTITIONS = 4


def _settings(max_poll_records: int = 2000, **writer: Any) -> Settings:
    routes = [{"name": "r", "topic": TOPIC, "table": TABLE, "rowkey": "[id]", "timestamp_field": "ts",
               "columns": {"f:v": "v"}}]
    w = {"max_batch_rows": 50, "max_batch_age_ms": 5, "commit_interval_ms": 10, "concurrency": 2,
         "retry_initial_ms": 1, "retry_max_ms": 5, **writer}
    return load_settings(None, routes=routes, tables=[{"name": TABLE, "families": {"f": {}}}],
                         writer=w, kafka={"dead_letter_topic": DLQ, "group_id": "g",
                                                 "max_poll_records": max_poll_records})


def _stack(n: int, *, splits: tuple[bytes, ...] = (b"e3",), bad: tuple[int, ...] = ()) -> tuple[MemoryBroker,
                                                                                                    MemoryHBase]:
    broker, hbase = MemoryBroker(), MemoryHBase()
    broker.create_topic(TOPIC, PARTITIONS)
    hbase.add_table(TABLE, families=["f"], splits=splits)
    for i in range(n):
        value = b"{not json" if i in bad else orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i})
        broker.produce(TOPIC, value, key=b"%d" % i)
    return broker, hbase


def _ends(broker: MemoryBroker) -> dict[TopicPartition, int]:
    return {TopicPartition(TOPIC, p): part.log_end for p, part in enumerate(broker.topics[TOPIC])}


def _check_rows(hbase: MemoryHBase, n: int, bad: tuple[int, ...] = ()) -> None:
    for i in range(n):
        if i in bad:
            continue
        assert hbase.row(TABLE, f"e{i}".encode()) == {b"f:v": {1_000 + i: b"%d" % i}}  # one version, byte for byte
    assert hbase.row_count(TABLE) == n - len(bad)


async def _run(worker: Worker, limit_s: float = 10) -> WorkerSummary:
    with anyio.fail_after(limit_s):
        return await worker.run()


async def test_every_event_is_written_once_and_offsets_committed_to_the_end() -> None:
    broker, hbase = _stack(500)
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker))
    summary = await _run(worker)
    _check_rows(hbase, 500)
    assert summary.consumed == 500 and summary.rows_written == 500 and summary.dead_lettered == 0
    assert broker.groups["g"].committed == _ends(broker) == summary.committed
    assert summary.skipped == {}


async def test_a_dead_letter_keeps_the_originals_null_header_values() -> None:
    """Kafka allows a header with no value; the dead letter carries it as it came, null."""
    broker, hbase = _stack(10)
    broker.produce(TOPIC, b"{not json", partition=0, headers=[("trace", b"t-1"), ("empty", None)])
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert summary.dead_lettered == 1
    (dead,) = broker.records(DLQ)
    assert dead.headers[:2] == (("trace", b"t-1"), ("empty", None))
    assert dict(dead.headers)[HEADER_PREFIX + "reason"] == b"undecodable"


async def test_bad_events_go_to_the_dead_letter_topic_and_do_not_hold_back_commits() -> None:
    bad = (3, 77)
    broker, hbase = _stack(200, bad=bad)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    _check_rows(hbase, 200, bad)
    dead = broker.records(DLQ)
    assert [r.value for r in dead] == [b"{not json", b"{not json"]
    headers = [{k: v for k, v in r.headers if v is not None} for r in dead]
    assert {h[HEADER_PREFIX + "reason"] for h in headers} == {b"undecodable"}
    assert sorted(int(h[HEADER_PREFIX + "source.offset"]) for h in headers) == sorted(
        r.offset for r in broker.records(TOPIC) if r.value == b"{not json")
    assert summary.dead_lettered == 2 and broker.groups["g"].committed == _ends(broker)


async def test_retryable_write_failures_are_retried_and_nothing_is_lost() -> None:
    broker, hbase = _stack(300)
    hbase.fail_writes(5)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    _check_rows(hbase, 300)
    assert summary.retries == 5


async def test_a_write_that_stays_unavailable_is_abandoned_without_committing() -> None:
    broker, hbase = _stack(100)
    hbase.fail_writes(10_000, HBaseUnavailable("gateway down"))
    worker = Worker(_settings(retry_deadline_s=0.05), hbase, broker, stop_at=_ends(broker))
    with pytest.raises(ExceptionGroup) as info:
        await _run(worker)
    assert info.group_contains(WriteAbandoned)
    assert broker.groups["g"].committed == {}  # never past unwritten data


async def test_mutations_hbase_refuses_become_dead_letters_one_by_one() -> None:
    broker, hbase = _stack(60)
    hbase.fail_writes(1, HBaseRequestError("NoSuchColumnFamilyException: f"))  # the first batch only
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    # the refused batch was isolated: each of its mutations written alone, and all went through
    _check_rows(hbase, 60)
    assert summary.dead_lettered == 0
    broker2, hbase2 = _stack(20)
    hbase2.fail_writes(10_000, HBaseRequestError("NoSuchColumnFamilyException: f"))  # every write refused
    summary2 = await _run(Worker(_settings(), hbase2, broker2, stop_at=_ends(broker2)), limit_s=20)
    assert summary2.dead_lettered == 20 and hbase2.row_count(TABLE) == 0
    assert {dict(r.headers)[HEADER_PREFIX + "reason"] for r in broker2.records(DLQ)} == {b"hbase_rejected"}
    assert broker2.groups["g"].committed == _ends(broker2)


async def test_a_bug_in_the_write_path_stops_the_worker_without_dead_letters_or_commits() -> None:
    # connectors.hbase lets a TypeError of our own through untranslated: the worker stops, uncommitted,
    # instead of dead-lettering valid events as refused by HBase
    broker, hbase = _stack(60)
    hbase.fail_writes(1, TypeError("a bug of ours"))  # type: ignore[arg-type]
    with pytest.raises(ExceptionGroup) as info:
        await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert info.group_contains(TypeError)
    assert broker.records(DLQ) == [] and broker.groups["g"].committed == {}


async def test_a_refused_commit_is_retried_at_the_next_tick() -> None:
    broker, hbase = _stack(100)
    broker.fail_next("commit", KafkaCommitFailed("rebalance in progress"), times=3)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert summary.committed == _ends(broker)


async def test_a_dead_letter_send_is_retried_until_kafka_has_it() -> None:
    broker, hbase = _stack(30, bad=(5,))
    broker.fail_next("send", KafkaUnavailable("broker restarting"), times=2)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert len(broker.records(DLQ)) == 1 and summary.dead_lettered == 1


class _SlowHBase(MemoryHBase):
    """Writes wait for the test to open the gate: in-flight bytes pile up."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()

    async def write(self, table: str, mutations: Any, *, server: str | None = None) -> None:
        await self.gate.wait()
        await super().write(table, mutations, server=server)


async def test_fetching_pauses_at_the_in_flight_budget_and_resumes_after_writes() -> None:
    broker = MemoryBroker()
    broker.create_topic(TOPIC, PARTITIONS)
    hbase = _SlowHBase()
    hbase.add_table(TABLE, families=["f"])
    for i in range(2000):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}))
    budget = 16 * 1024  # under two sealed batches: the budget, not the bounded stream, stops the reading
    worker = Worker(_settings(max_poll_records=20, max_in_flight_bytes=budget), hbase, broker,
                    stop_at=_ends(broker))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(5):
            while not worker.progress.paused:
                await anyio.sleep(0.001)
        consumed = worker.stats.consumed
        await anyio.sleep(0.05)
        assert worker.stats.consumed == consumed < 2000  # paused: nothing more read
        assert worker.in_flight >= budget
        hbase.gate.set()
        with anyio.fail_after(10):
            while not worker.done:
                await anyio.sleep(0.005)
    _check_rows(hbase, 2000)
    assert worker.stats.pauses >= 1


async def test_a_stop_request_wakes_a_worker_paused_at_its_budget_and_commits_nothing_unwritten() -> None:
    # the consume loop waits on the drained event alone: the stop request must set it, or a worker whose
    # writes hang would never see the stop
    broker = MemoryBroker()
    broker.create_topic(TOPIC, PARTITIONS)
    hbase = _SlowHBase()  # its gate stays shut: nothing is ever written
    hbase.add_table(TABLE, families=["f"])
    for i in range(2000):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}))
    worker = Worker(_settings(max_poll_records=20, max_in_flight_bytes=16 * 1024, shutdown_timeout_s=0.2),
                    hbase, broker)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            while not worker.progress.paused:
                await anyio.sleep(0.001)
            worker.request_stop()
    assert hbase.row_count(TABLE) == 0 and broker.groups["g"].committed == {}


class _RevocationsSeen(Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.revocations: list[list[TopicPartition]] = []

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        self.revocations.append(list(revoked))
        await super().on_revoked(revoked)


async def test_a_member_joining_mid_stream_rebalances_and_the_group_loses_nothing() -> None:
    broker, hbase = _stack(0)
    for i in range(3000):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}))
    ends = _ends(broker)
    a = _RevocationsSeen(_settings(), hbase, broker, stop_at=ends)
    b = Worker(_settings(), hbase, broker, stop_at=ends)
    revoked = a.revocations
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            while a.stats.consumed == 0:
                await anyio.sleep(0.001)
            tg.start_soon(b.run)  # joins: every member is revoked, then reassigned
            while broker.groups["g"].committed != ends:
                await anyio.sleep(0.005)
            a.request_stop()
            b.request_stop()
    assert any(revoked[1:]) or len(revoked) > 1  # a gave partitions up at the join
    _check_rows(hbase, 3000)
    assert a.stats.consumed + b.stats.consumed >= 3000
    assert b.stats.consumed > 0


async def test_offsets_kafka_never_delivers_are_counted_and_a_stop_past_them_is_reached() -> None:
    broker, hbase = _stack(40)
    tp = TopicPartition(TOPIC, 0)
    broker.delete_before(TOPIC, 0, 4)  # retention: 4 records of partition 0 gone before they were read
    broker.append_gap(TOPIC, 0, 3)  # then transaction markers at its end
    ends = _ends(broker)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=ends))
    assert summary.skipped == {tp: 3}  # the markers; the deleted head is below the log start, not a gap
    assert summary.committed == ends
    assert hbase.row_count(TABLE) == 40 - 4


async def test_a_stop_requested_mid_stream_commits_only_what_was_written() -> None:
    broker, hbase = _stack(1000)
    worker = Worker(_settings(), hbase, broker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(5):
            while worker.stats.rows_written < 100:
                await anyio.sleep(0.001)
        worker.request_stop()
    committed = broker.groups["g"].committed
    written = {r.offset for r in broker.records(TOPIC) if r.partition == 0
               and hbase.row(TABLE, orjson.loads(r.value or b"{}")["id"].encode())}
    # every offset below partition 0's commit was written
    assert all(o in written for o in range(committed.get(TopicPartition(TOPIC, 0), 0)))


class _DownHBase(MemoryHBase):
    """HBase unreachable for the first ``down`` calls of families() (a gateway still starting)."""

    def __init__(self, down: int) -> None:
        super().__init__()
        self.down = down

    async def families(self, table: str) -> dict[str, int]:
        if self.down > 0:
            self.down -= 1
            raise HBaseUnavailable("Thrift gateway unreachable or closed the connection")
        return await super().families(table)


async def test_a_worker_started_while_hbase_is_unreachable_waits_then_ingests() -> None:
    broker, _ = _stack(50)
    hbase = _DownHBase(down=4)
    hbase.add_table(TABLE, families=["f"])
    worker = Worker(_settings(), hbase, broker, stop_at=_ends(broker))
    seen: list[str | None] = []
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(20):
                while not worker.done:
                    seen.append(worker.waiting)
                    await anyio.sleep(0.01)
    _check_rows(hbase, 50)
    assert any(w and "waiting for HBase" in w and "unreachable" in w for w in seen)  # what /readyz says
    assert worker.waiting is None
    assert [e["event"] for e in logs].count("waiting_for_dependency") == 1  # one line per interval, not per try
    assert any(e["event"] == "dependency_reachable" for e in logs)


async def test_fail_fast_stops_at_once_when_hbase_is_unreachable() -> None:
    broker, _ = _stack(5)
    hbase = _DownHBase(down=1)
    hbase.add_table(TABLE, families=["f"])
    settings = _settings()
    settings = settings.model_copy(update={"runtime": settings.runtime.model_copy(update={"fail_fast": True})})
    with pytest.raises(HBaseUnavailable):
        await _run(Worker(settings, hbase, broker, stop_at=_ends(broker)))
    assert broker.groups == {}  # never joined


async def test_a_worker_started_while_kafka_is_unreachable_waits_then_ingests() -> None:
    broker, hbase = _stack(30)
    broker.fail_next("admin", KafkaUnavailable("no brokers available"), times=3)
    summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)), limit_s=20)
    _check_rows(hbase, 30)
    assert summary.committed == _ends(broker)


async def test_a_missing_table_is_not_waited_for() -> None:
    broker, _ = _stack(5)
    with pytest.raises(ConfigError, match="table 't' does not exist"):
        await _run(Worker(_settings(), MemoryHBase(), broker))


async def test_many_dead_letters_log_one_line_then_a_digest() -> None:
    bad = tuple(range(0, 400, 2))
    broker, hbase = _stack(400, bad=bad)
    with capture_logs() as logs:
        summary = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert summary.dead_lettered == 200 and len(broker.records(DLQ)) == 200  # every one kept, with headers
    full = [e for e in logs if e["event"] == "dead_lettered"]
    digests = [e for e in logs if e["event"] == "dead_lettered_digest"]
    assert len(full) == 1 and full[0]["reason"] == "undecodable" and full[0]["topic"] == DLQ
    assert sum(d["more"] for d in digests) == 199 and len(digests) <= 2
    assert "offset" in digests[0]["first"] and digests[0]["what"] == "undecodable"


async def test_regions_split_and_move_while_writing_and_the_region_map_follows() -> None:
    broker, hbase = _stack(0, splits=())
    for i in range(1500):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}))
    worker = Worker(_settings(max_poll_records=100), hbase, broker, stop_at=_ends(broker))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        with anyio.fail_after(10):
            while worker.stats.rows_written < 300:
                await anyio.sleep(0.001)
        hbase.split(TABLE, b"e5")
        hbase.move(TABLE, b"e5", "rs-2:16020")
        hbase.fail_writes(1, RegionMapStale("NotServingRegionException: region moved", table=TABLE))
        with anyio.fail_after(10):
            while not worker.done:
                await anyio.sleep(0.005)
    _check_rows(hbase, 1500)
    regions = worker.maps[TABLE].regions
    assert [r.start_key for r in regions] == [b"", b"e5"] and regions[1].server == "rs-2:16020"


async def test_the_acknowledgement_ledger_names_every_acknowledged_row_and_every_retry(tmp_path: Path) -> None:
    broker, hbase = _stack(300)
    hbase.fail_writes(2)
    settings = _settings()
    settings = settings.model_copy(update={"writer": settings.writer.model_copy(update={"ack_ledger_dir": tmp_path})})
    await _run(Worker(settings, hbase, broker, stop_at=_ends(broker)))
    lines = _ledger_lines(tmp_path)
    acks = [line for line in lines if line["ev"] == "ack"]
    retries = [line for line in lines if line["ev"] == "retry"]
    assert len(retries) == 2 and all("HBaseUnavailable" in r["error"] and r["n"] > 0 for r in retries)
    rows = [(p, o) for line in acks for p, o, _ in line["rows"]]
    assert sorted(set(rows)) == sorted((tp.partition, o) for tp, end in _ends(broker).items() for o in range(end))
    assert all(line["sent_ms"] <= line["ack_ms"] and line["gateway"] is None and line["regions"] for line in acks)
    assert {bytes.fromhex(r) for line in acks for _, _, r in line["rows"]} == {b"e%d" % i for i in range(300)}


def _ledger_lines(directory: Path) -> list[dict[str, Any]]:
    (path,) = directory.glob("acks-*.jsonl")  # one worker process: one file
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


class _AheadSource(MemorySource):
    """A consumer whose position after an assignment is 40 offsets past the committed one, the first
    time: records fetched before a rebalance moved its position back to the commit."""

    seen: set[TopicPartition]

    def _position_from_commit(self, tp: TopicPartition) -> None:
        super()._position_from_commit(tp)
        seen = self.__dict__.setdefault("seen", set())
        if tp not in seen:
            seen.add(tp)
            self.positions[tp] += 40


class _AheadBroker(MemoryBroker):
    def source(self, group_id: str | None) -> MemorySource:
        return _AheadSource(self, group_id)


async def test_a_fetch_that_starts_past_the_committed_offset_is_not_taken_for_a_gap() -> None:
    broker, hbase = _AheadBroker(), MemoryHBase()
    broker.create_topic(TOPIC, PARTITIONS)
    hbase.add_table(TABLE, families=["f"], splits=(b"e3",))
    for i in range(400):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}), key=b"%d" % i)
    # the group committed offset 10 of every partition; the consumer first hands out records from 50
    broker._group("g").committed.update({TopicPartition(TOPIC, p): 10 for p in range(PARTITIONS)})
    await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    due = [orjson.loads(r.value or b"{}")["id"] for part in broker.topics[TOPIC] for r in part.records
           if r.offset >= 10]
    missing = [i for i in due if not hbase.row(TABLE, i.encode())]
    assert not missing, f"{len(missing)} records past the commit never written, e.g. {missing[:3]}"


async def test_a_redrive_writes_what_the_route_refused_and_a_second_refusal_keeps_its_first_source() -> None:
    """Dead letters of route r, re-driven after the route was fixed (a bounded run of the dead-letter
    topic, as ``backfill --route`` makes it): the fixed ones land; one refused again goes back to the
    dead-letter topic naming where it first came from."""
    from pipeline.runtime.backfill.redrive import redrive_settings

    broker, hbase = MemoryBroker(), MemoryHBase()
    broker.create_topic(TOPIC, 1)
    hbase.add_table(TABLE, families=["f"])
    for i, ts in enumerate([5, 2**63, 7, "x"]):  # the route refuses the 2nd and the 4th
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": ts}) if ts != 2**63 else
                       b'{"id": "e1", "v": 1, "ts": 9223372036854775808}', partition=0, headers=[("trace", b"t")])
    first = await _run(Worker(_settings(), hbase, broker, stop_at=_ends(broker)))
    assert first.dead_lettered == 2 and hbase.row_count(TABLE) == 2
    fixed = _settings().model_dump()
    fixed["routes"][0]["timestamp_field"] = None  # the fix: cells stamped by HBase
    settings = redrive_settings(load_settings(None, **{k: fixed[k] for k in ("routes", "tables", "writer", "kafka")}),
                                "r", DLQ)
    with pytest.raises(ConfigError, match="must be bounded"):
        Worker(settings, hbase, broker, topics=[DLQ])
    ends = {TopicPartition(DLQ, 0): broker.topics[DLQ][0].log_end}
    second = await _run(Worker(settings, hbase, broker, topics=[DLQ], stop_at=ends, group_id="redrive"))
    assert second.dead_lettered == 0 and hbase.row_count(TABLE) == 4
    # a re-drive of a route that still refuses: the dead letter keeps its first source
    settings = redrive_settings(_settings(), "r", DLQ)
    ends = {TopicPartition(DLQ, 0): broker.topics[DLQ][0].log_end}
    third = await _run(Worker(settings, hbase, broker, topics=[DLQ], stop_at=ends, group_id="again"))
    assert third.dead_lettered == 2
    again = [dict(r.headers) for r in broker.records(DLQ)][2:]
    # (a record that its topic's only route refuses is refused as a whole: no route header)
    assert [(h["trace"], h[HEADER_PREFIX + "source.topic"], h[HEADER_PREFIX + "source.offset"],
             HEADER_PREFIX + "route" in h) for h in again] == [(b"t", TOPIC.encode(), b"1", False),
                                                               (b"t", TOPIC.encode(), b"3", False)]


@pytest.mark.parametrize(("mode", "min_bytes", "wait_ms", "age_ms", "seals"), [
    ("auto", 1_048_576, 250, 200, True),
    ("auto", 1_048_576, 100, 200, False),  # a fetch comes back before the age rule would seal
    ("auto", 1, 500, 200, False),  # fetches come back with a byte: calls would be tiny
    ("always", 1, 0, 200, True),
    ("never", 1_048_576, 250, 200, False),
])
def test_seal_when_caught_up_resolves(mode: str, min_bytes: int, wait_ms: int, age_ms: int, seals: bool) -> None:
    s = load_settings(None, writer={"seal_when_caught_up": mode, "max_batch_age_ms": age_ms},
                      kafka={"fetch_min_bytes": min_bytes, "fetch_max_wait_ms": wait_ms})
    assert seals_when_caught_up(s.writer, s.kafka) is seals


async def test_caught_up_batches_go_at_once_and_each_record_gets_a_latency() -> None:
    """Batches that would wait a minute for their age go as soon as the worker has read everything."""
    broker, hbase = MemoryBroker(), MemoryHBase()
    broker.create_topic(TOPIC, PARTITIONS)
    hbase.add_table(TABLE, families=["f"])
    for i in range(20):
        broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i, "ts": 1_000 + i}),
                       timestamp=time.time_ns() // 1_000_000)
    worker = Worker(_settings(max_batch_age_ms=60_000, seal_when_caught_up="always"), hbase, broker,
                    stop_at=_ends(broker))
    summary = await _run(worker, limit_s=5)
    _check_rows(hbase, 20)
    assert worker.batcher.statistics().sealed.get(SealReason.CAUGHT_UP, 0) >= 1
    assert worker.latency.histogram.count == 20
    assert summary.latency_p50_ms is not None and summary.latency_p99_ms is not None
