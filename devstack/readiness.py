"""Readiness is proven by real round trips, never by sleeps or open ports:

- Kafka: create a probe topic (once), produce one record, consume that very record back; on the
  secured listener too (``--secure``), logged in as the worker's SCRAM user over TLS.
- HBase, on every gateway: create a probe table (once), put a unique value through Thrift1, get it
  back, delete it; then the same put and get through Thrift2, proving both servers of the gateway
  reach the master and the region server that holds the probe's region.
- ZooKeeper (cluster only): its ``dump`` command lists the ephemeral node of every live region server
  (``/hbase/rs/<host>,<port>,<startcode>``), so ``up`` waits until each region server has registered.
- Schema registry (``--registry``): a schema registered and read back by its id through the
  Confluent-compatible API (:func:`.registry.schema_round_trip`).
- CDC (``--cdc``): a row written in PostgreSQL must come back as its change event on the row's topic
  (:func:`change_event_round_trip`; :mod:`.cdc` writes the row and recognises the event).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import happybase
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from connectors.hbase.thrift2 import load_idl, open_client

from .processes import ServerExited

__all__ = ["PROBE_TABLE", "PROBE_TOPIC", "change_event_round_trip", "ensure_topics", "hbase_round_trip",
           "kafka_round_trip",
           "parse_region_servers", "registered_region_servers", "run_in_new_loop", "serving_as", "wait_until"]

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


async def _kafka_once(bootstrap: str, timeout_s: float, topic: str, options: dict[str, Any]) -> None:
    opts = {**options, "bootstrap_servers": bootstrap, "request_timeout_ms": int(timeout_s * 1000)}
    admin = AIOKafkaAdminClient(**opts)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    token = uuid.uuid4().bytes
    producer = AIOKafkaProducer(**opts)
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, token, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **opts)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, meta.offset)
        msg = await asyncio.wait_for(consumer.getone(), timeout_s)
        if msg.value != token:
            raise RuntimeError("Kafka returned a different record than the one just produced")
    finally:
        await consumer.stop()


def kafka_round_trip(bootstrap: str, timeout_s: float = 10.0, topic: str = PROBE_TOPIC,
                     options: dict[str, Any] | None = None) -> None:
    """One produce/consume round trip on ``topic`` (created when missing); raises on failure.
    ``options``: more aiokafka client options (security: protocol, SASL login, SSL context)."""
    # aiokafka logs every refused connection at ERROR while the broker starts; the outcome is what counts
    log = logging.getLogger("aiokafka")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        run_in_new_loop(asyncio.wait_for(_kafka_once(bootstrap, timeout_s, topic, options or {}), timeout_s * 2))
    finally:
        log.setLevel(level)


async def _change_event_once(bootstrap: str, topic: str, write: Callable[[], None],
                             match: Callable[[bytes | None], bool], timeout_s: float) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                request_timeout_ms=int(timeout_s * 1000), metadata_max_age_ms=1000)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        # the topic appears with the table's first change event: before that, every event is new
        start = (await consumer.end_offsets([tp]))[tp] if topic in await consumer.topics() else 0
        await asyncio.to_thread(write)
        consumer.assign([tp])
        consumer.seek(tp, start)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=200)
            if any(match(msg.value) for msg in batch.get(tp, ())):
                return
        raise TimeoutError(f"the change event did not reach topic {topic} within {timeout_s:.0f} s")
    finally:
        await consumer.stop()


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout_s: float = 30.0) -> None:
    """Create each ``topic -> partitions`` that does not exist yet (one replica); an existing topic is
    left as it is."""
    async def make() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            missing = [NewTopic(t, n, 1) for t, n in topics.items() if t not in existing]
            if missing:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(missing)
        finally:
            await admin.close()
    run_in_new_loop(asyncio.wait_for(make(), timeout_s))


def change_event_round_trip(bootstrap: str, topic: str, write: Callable[[], None],
                            match: Callable[[bytes | None], bool], timeout_s: float = 10.0) -> None:
    """Note ``topic``'s end (partition 0: the CDC topics have one), call ``write`` (which changes a row
    in the database), then read ``topic`` from that point until a record whose value ``match``es;
    raises TimeoutError when none comes within ``timeout_s``."""
    log = logging.getLogger("aiokafka")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        run_in_new_loop(asyncio.wait_for(_change_event_once(bootstrap, topic, write, match, timeout_s),
                                         timeout_s * 2))
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
        # a row of its own: concurrent probes (several `status` or `up` at once) never read each other's value
        value = uuid.uuid4().bytes
        row = b"probe-" + value.hex().encode()
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
        value2 = uuid.uuid4().bytes
        table2, row2 = PROBE_TABLE.encode(), b"probe2-" + value2.hex().encode()
        client.put(table2, idl.TPut(row=row2, columnValues=[idl.TColumnValue(b"d", b"v", value2)]))
        result = client.get(table2, idl.TGet(row=row2))
        client.deleteSingle(table2, idl.TDelete(row=row2))
        if [cv.value for cv in result.columnValues] != [value2]:
            raise RuntimeError(f"Thrift2 on port {thrift2_port} returned a different value than the one just written")
    finally:
        client.close()


_RS_NODE = re.compile(r"/hbase/rs/([^,\s/]+),(\d+),(\d+)")
_SERVING = re.compile(r"HRegionServer: Serving as ([^,\s/]+),(\d+),(\d+)")


def parse_region_servers(dump: str) -> set[tuple[int, int]]:
    """``(port, start code)`` of each region server whose ``/hbase/rs`` node appears in ZooKeeper's
    ``dump`` output. The start code tells a restarted server from the node its killed predecessor
    left behind until its session expired."""
    return {(int(m.group(2)), int(m.group(3))) for m in _RS_NODE.finditer(dump)}


def serving_as(log_lines: list[str]) -> tuple[int, int] | None:
    """``(port, start code)`` a region server's log announces ("Serving as host,port,code"), the last one."""
    for line in reversed(log_lines):
        if m := _SERVING.search(line):
            return int(m.group(2)), int(m.group(3))
    return None


def registered_region_servers(host: str, zk_port: int, timeout_s: float = 5.0) -> set[tuple[int, int]]:
    """Ask ZooKeeper (four-letter ``dump``) which region servers hold a live session (see
    :func:`parse_region_servers`)."""
    with socket.create_connection((host, zk_port), timeout=timeout_s) as sock:
        sock.sendall(b"dump")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return parse_region_servers(b"".join(chunks).decode(errors="replace"))


def wait_until(check: Any, deadline: float, pause_s: float = 1.0) -> None:
    """Call ``check()`` until it succeeds or ``deadline`` (monotonic) passes; re-raise the last error.
    :class:`~.processes.ServerExited` (a server waited on has exited) is raised at once."""
    while True:
        try:
            check()
        except ServerExited:
            raise
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause_s)
        else:
            return
