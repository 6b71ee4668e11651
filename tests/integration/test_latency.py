"""The latency proxy (``devstack.latency``: Toxiproxy, built from its Go module) in front of the
stack's Thrift gateway and of Kafka's DISTANT listener: the worker's HBase client and a Kafka producer
work through it, and every call pays at least the round trip set (a lower bound: the proxy cannot
deliver sooner than it holds the data)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, delete_topics, make_producer
from devstack import LocalStack
from devstack.latency import Proxy, Toxiproxy
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.settings import FamilySpec, HBaseSettings, KafkaSettings

from .shown import show

#: loopback ports of this test's two proxies (Thrift1, Thrift2), clear of the stack's and the benchmarks'
PROXY_PORTS = (18560, 18561)


@pytest.fixture(scope="module")
def distance(stack: LocalStack) -> Iterator[tuple[Toxiproxy, list[Proxy]]]:
    server = Toxiproxy(stack.layout)
    server.start(timeout_s=60)
    try:
        distant = stack.settings.distant_port
        yield server, [*(server.proxy(f"test-{up}", mine, up)
                         for mine, up in zip(PROXY_PORTS, (stack.settings.thrift_port, stack.settings.thrift2_port),
                                             strict=True)),
                       server.proxy("test-kafka", distant + 1, distant)]
    finally:
        assert server.stop()


async def _timed_writes(settings: HBaseSettings, table: str, rounds: int) -> list[float]:
    """Create ``table``, then ``rounds`` writes of one row each: the seconds each took; every row read back."""
    origin = Origin(TopicPartition("t", 0), 0)
    took = []
    async with HBaseClient(settings) as hb:
        await hb.create_table(table, {"d": FamilySpec()})
        try:
            for i in range(rounds):
                t0 = time.perf_counter()
                await hb.write(table, [Mutation(table, b"r%03d" % i, MutationKind.PUT, {b"d:v": b"%d" % i}, None,
                                                origin)])
                took.append(time.perf_counter() - t0)
            rows = await hb.scan_cells(table, limit=rounds + 10)
            assert [(row, cols[b"d:v"].value) for row, cols in rows] == [
                (b"r%03d" % i, b"%d" % i) for i in range(rounds)]
        finally:
            await hb.delete_table(table)
    return took


async def test_calls_through_the_proxy_pay_the_round_trip_set(distance: tuple[Toxiproxy, list[Proxy]],
                                                             unique: str) -> None:
    server, proxies = distance
    settings = HBaseSettings(port=PROXY_PORTS[0], thrift2_port=PROXY_PORTS[1], timeout_ms=20_000)
    medians = {}
    for rtt_ms in (0, 20):
        for p in proxies:
            server.set_rtt(p, rtt_ms)
        took = sorted(await _timed_writes(settings, f"t_latency_{rtt_ms}_{unique}", 9))
        # each write is at least one request and its answer: the proxy holds each way for its half
        assert took[0] >= rtt_ms / 1000, (rtt_ms, took)
        medians[rtt_ms] = took[len(took) // 2] * 1000
    show(f"[latency] one-row write through the proxy, median: {medians[0]:.1f} ms at 0 ms of round trip, "
         f"{medians[20]:.1f} ms at 20 ms")


async def test_a_kafka_client_bootstrapped_at_the_proxy_stays_behind_it(
        stack: LocalStack, distance: tuple[Toxiproxy, list[Proxy]], unique: str) -> None:
    server, proxies = distance
    kafka = KafkaSettings(bootstrap_servers=stack.distant_bootstrap)
    topic = f"latency-{unique}"
    await create_topics(kafka, {topic: 1})
    producer = make_producer(kafka)
    await producer.start()
    try:
        server.set_rtt(proxies[-1], 20)
        # the broker advertises its DISTANT listener at the proxy: the client never learns another address
        assert {(b.host, b.port) for b in producer.client.cluster.brokers()} == {
            ("127.0.0.1", stack.settings.distant_port + 1)}
        took = []
        for i in range(5):
            t0 = time.perf_counter()
            await producer.send_and_wait(topic, b"%d" % i)
            took.append(time.perf_counter() - t0)
        assert min(took) >= 0.020, took
    finally:
        server.set_rtt(proxies[-1], 0)
        await producer.stop()
        await delete_topics(kafka, [topic])
    show(f"[latency] Kafka produce through the proxy at 20 ms of round trip: {min(took) * 1000:.1f}-"
         f"{max(took) * 1000:.1f} ms per acknowledged send")
