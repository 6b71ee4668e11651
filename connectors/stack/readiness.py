"""Readiness is proven by real round trips, never by sleeps or open ports:

- Kafka: create a probe topic (once), produce one record, consume that very record back.
- HBase: create a probe table (once), put a unique value, get it back, delete it; and one Thrift2
  call (``tableExists``), proving both gateways reach the master and the region server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import happybase
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from connectors.hbase.thrift2 import load_idl, open_client

__all__ = ["PROBE_TABLE", "PROBE_TOPIC", "hbase_round_trip", "kafka_round_trip", "run_in_new_loop", "wait_until"]

PROBE_TOPIC = "hbase-ingest.ready"
PROBE_TABLE = "hbase_ingest_ready"
T = TypeVar("T")


def run_in_new_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on a fresh event loop in a helper thread (safe to call from inside a loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, name="stack-readiness")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


async def _kafka_once(bootstrap: str, timeout_s: float) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
    await admin.start()
    try:
        if PROBE_TOPIC not in await admin.list_topics():
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)])
    finally:
        await admin.close()
    token = uuid.uuid4().bytes
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
    await producer.start()
    try:
        meta = await producer.send_and_wait(PROBE_TOPIC, token, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                request_timeout_ms=int(timeout_s * 1000))
    await consumer.start()
    try:
        tp = TopicPartition(PROBE_TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        msg = await asyncio.wait_for(consumer.getone(), timeout_s)
        if msg.value != token:
            raise RuntimeError("Kafka returned a different record than the one just produced")
    finally:
        await consumer.stop()


def kafka_round_trip(bootstrap: str, timeout_s: float = 10.0) -> None:
    """One produce/consume round trip; raises on failure."""
    # aiokafka logs every refused connection at ERROR while the broker starts; the outcome is what counts
    log = logging.getLogger("aiokafka")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        run_in_new_loop(asyncio.wait_for(_kafka_once(bootstrap, timeout_s), timeout_s * 2))
    finally:
        log.setLevel(level)


def hbase_round_trip(host: str, port: int, thrift2_port: int, timeout_s: float = 10.0) -> None:
    """Create-if-missing/put/get/delete through Thrift1, plus a Thrift2 call; raises on failure."""
    conn = happybase.Connection(host, port, timeout=int(timeout_s * 1000), autoconnect=True)
    try:
        if PROBE_TABLE.encode() not in conn.tables():
            try:
                conn.create_table(PROBE_TABLE, {"d": {"max_versions": 1}})
            except Exception as exc:  # created concurrently by another process
                if "exists" not in str(exc).lower():
                    raise
        table = conn.table(PROBE_TABLE)
        row, value = b"probe", uuid.uuid4().bytes
        table.put(row, {b"d:v": value})
        got = table.row(row).get(b"d:v")
        table.delete(row)
        if got != value:
            raise RuntimeError("HBase returned a different value than the one just written")
    finally:
        conn.close()
    client = open_client(host, thrift2_port, int(timeout_s * 1000))
    try:
        idl = load_idl()
        if not client.tableExists(idl.TTableName(ns=b"default", qualifier=PROBE_TABLE.encode())):
            raise RuntimeError("Thrift2 does not see the probe table that Thrift1 created")
    finally:
        client.close()


def wait_until(check: Any, deadline: float, pause_s: float = 1.0) -> None:
    """Call ``check()`` until it succeeds or ``deadline`` (monotonic) passes; re-raise the last error."""
    while True:
        try:
            check()
            return
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause_s)
