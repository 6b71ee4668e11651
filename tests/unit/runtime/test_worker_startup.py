"""The worker's start-up on the in-memory twins: a topic the routes read that does not exist is named
with its routes (an error with fail_fast, else waited for with one warning per backoff step), and a
stop request during any start-up wait ends the run at once with nothing consumed. The same against
the real servers, through the CLI, is in tests/integration/test_startup_signals.py."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import TaskStatus
from structlog.testing import capture_logs

from connectors.memory import MemoryBroker, MemoryHBase
from pipeline.core.model import TopicPartition
from pipeline.errors import ConfigError, HBaseAuthError, HBaseUnavailable, KafkaUnavailable
from pipeline.runtime.ingest.startup import missing_topics_message, wait_for_topics
from pipeline.runtime.ingest.worker import Worker, _close
from pipeline.settings import Settings, load_settings

TOPIC = "events"
TABLE = "t"
DLQ = "events.dead"


def _settings(*, fail_fast: bool = False) -> Settings:
    routes = [{"name": name, "topic": TOPIC, "table": TABLE, "rowkey": key, "columns": {"f:v": "v"}}
              for name, key in (("by_id", "[id]"), ("by_v", "[v][id]"))]
    return load_settings(None, routes=routes, tables=[{"name": TABLE, "families": {"f": {}}}],
                         writer={"max_batch_age_ms": 5, "commit_interval_ms": 10},
                         kafka={"dead_letter_topic": DLQ, "group_id": "g"}, runtime={"fail_fast": fail_fast})


def _hbase() -> MemoryHBase:
    hbase = MemoryHBase()
    hbase.add_table(TABLE, families=["f"])
    return hbase


def test_the_message_names_each_missing_topic_its_cluster_and_its_routes() -> None:
    readers = {"a": ["r1", "r2"], "b": ["r3"], "c": ["r4"]}
    assert missing_topics_message(["a"], readers, "k:9092") == "topic 'a' does not exist on k:9092 (routes: r1, r2)"
    assert missing_topics_message(["a", "c"], readers, "k:9092") == (
        "topic 'a' does not exist on k:9092 (routes: r1, r2); topic 'c' does not exist on k:9092 (routes: r4)")


async def test_fail_fast_names_the_missing_topic_and_its_routes_and_never_joins() -> None:
    broker = MemoryBroker()
    with pytest.raises(ConfigError) as info, anyio.fail_after(5):
        await Worker(_settings(fail_fast=True), _hbase(), broker).run()
    assert str(info.value) == "topic 'events' does not exist on memory (routes: by_id, by_v)"
    assert broker.groups == {}


class _Admin:
    """A topic admin whose topic ``TOPIC`` exists from its ``appears``-th look-up on; Kafka
    unreachable for the look-ups listed in ``down``."""

    def __init__(self, appears: int, down: tuple[int, ...] = ()) -> None:
        self.appears, self.down, self.calls = appears, down, 0

    async def missing_topics(self, topics: Any) -> list[str]:
        self.calls += 1
        if self.calls in self.down:
            raise KafkaUnavailable("no brokers available")
        return [t for t in topics if t == TOPIC and self.calls < self.appears]


async def test_a_missing_topic_is_waited_for_with_one_line_per_step_naming_it() -> None:
    admin = _Admin(appears=5, down=(2,))
    seen: list[str | None] = []
    with capture_logs() as logs, anyio.fail_after(5):
        await wait_for_topics(admin, {TOPIC: ["by_id", "by_v"], "other": ["o"]}, "k:9092",  # type: ignore[arg-type]
                              fail_fast=False, on_wait=seen.append, initial_ms=1, max_ms=2)
    waits = [e for e in logs if e["event"] == "waiting_for_dependency"]
    # look-ups 1, 3 and 4 find the topic missing (one line each); 2 finds Kafka unreachable (its own line)
    assert [w["what"] for w in waits] == ["topic 'events' on k:9092", "Kafka at k:9092",
                                          "topic 'events' on k:9092", "topic 'events' on k:9092"]
    assert {w["error"] for w in waits if w["what"].startswith("topic")} == {
        "topic 'events' does not exist on k:9092 (routes: by_id, by_v)"}
    assert [w["attempts"] for w in waits if w["what"].startswith("topic")] == [1, 2, 3]
    assert any(e["event"] == "dependency_reachable" for e in logs)
    assert any(s and "topic 'events' does not exist" in s for s in seen) and seen[-1] is None  # /readyz


async def test_a_worker_waiting_for_its_topic_ingests_once_it_is_created() -> None:
    broker = MemoryBroker()
    worker = Worker(_settings(), _hbase(), broker)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            while not (worker.waiting and "does not exist" in worker.waiting):
                await anyio.sleep(0.005)
            broker.create_topic(TOPIC, 2)
            for i in range(20):
                broker.produce(TOPIC, orjson.dumps({"id": f"e{i}", "v": i}))
            ends = {TopicPartition(TOPIC, p): part.log_end for p, part in enumerate(broker.topics[TOPIC])}
            while broker.groups.get("g") is None or broker.groups["g"].committed != ends:
                await anyio.sleep(0.01)
            worker.request_stop()
    assert worker.stats.consumed == 20 and worker.waiting is None
    assert [e["event"] for e in logs].count("waiting_for_dependency") == 1


class _DownHBase(MemoryHBase):
    async def families(self, table: str) -> dict[str, int]:
        raise HBaseUnavailable("Thrift gateway unreachable or closed the connection")


class _DownAdminBroker(MemoryBroker):
    async def ensure_topic(self, topic: str, partitions: int = 1) -> bool:
        raise KafkaUnavailable("no brokers available")


@pytest.mark.parametrize("what", ["HBase", "Kafka", "topic"])
async def test_a_stop_request_ends_a_start_up_wait_at_once_with_nothing_consumed(what: str) -> None:
    broker = _DownAdminBroker() if what == "Kafka" else MemoryBroker()
    if what == "HBase":
        broker.create_topic(TOPIC)
    worker = Worker(_settings(), _DownHBase() if what == "HBase" else _hbase(), broker)
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(5):  # before: the wait went on (only a second signal ended it)
            await tg.start(_wait_then_stop, worker)
            summary = await worker.run()
    assert summary.consumed == 0 and summary.committed == {} and broker.groups == {}
    assert not worker.starting and worker.waiting is None


async def _wait_then_stop(worker: Worker, *, task_status: TaskStatus[None]) -> None:
    task_status.started()
    while worker.waiting is None:
        await anyio.sleep(0.001)
    worker.request_stop()


async def test_a_stop_requested_before_the_run_ends_it_before_any_check() -> None:
    hbase = _DownHBase()
    worker = Worker(_settings(), hbase, MemoryBroker())
    worker.request_stop()
    with anyio.fail_after(1):
        summary = await worker.run()
    assert summary.consumed == 0 and worker.waiting is None


class _NoDescribeHBase(MemoryHBase):
    """A table the user may write but not describe (HBase asks for CREATE or ADMIN to describe it), or a
    refused login (an HBaseAuthError without a missing permission)."""

    def __init__(self, action: str | None) -> None:
        super().__init__()
        self.add_table(TABLE, families=["f"])
        self.action = action

    async def families(self, table: str) -> dict[str, int]:
        raise HBaseAuthError(f"describe families on table {table!r}: refused", table=table, user="writer",
                             action=self.action)


async def test_a_writer_that_may_not_describe_its_table_starts_with_a_warning() -> None:
    worker = Worker(_settings(), _NoDescribeHBase("CREATE"), MemoryBroker())
    with capture_logs() as logs:
        await worker.check_tables()
    assert TABLE in worker.maps
    assert [e["reason"] for e in logs if e["event"] == "families_unchecked"] == [
        "no CREATE permission to describe the table"] * 2  # once per route
    with pytest.raises(HBaseAuthError):  # a login refused is no missing permission: it stops the start
        await Worker(_settings(), _NoDescribeHBase(None), MemoryBroker()).check_tables()


class _Part:
    """A consumer or producer whose ``stop`` fails (a broken login fails the group's leave request too)."""

    def __init__(self, fails: bool) -> None:
        self.fails, self.stopped = fails, False

    async def stop(self) -> None:
        self.stopped = True
        if self.fails:
            raise KafkaUnavailable(f"stopping: login failed ({id(self)})")


async def test_the_stop_path_reports_the_failure_that_stopped_the_worker_not_its_own() -> None:
    source, producer = _Part(True), _Part(True)
    with capture_logs() as logs:
        await _close(source, producer, failed=True)  # type: ignore[arg-type]
    assert source.stopped and producer.stopped
    assert [e["part"] for e in logs if e["event"] == "stop_failed"] == ["consumer", "producer"]
    source, producer = _Part(True), _Part(False)
    with pytest.raises(KafkaUnavailable, match=str(id(source))):  # no failure before: the stop's own error
        await _close(source, producer, failed=False)  # type: ignore[arg-type]
    assert producer.stopped  # tried even so
