"""Producing example events to Kafka (``hbase-ingest produce`` and the demo)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

import anyio
import orjson

from pipeline.core.ratelimit import RateLimiter
from pipeline.ports import Broker

__all__ = ["produce_events"]


async def produce_events(kafka: Broker, topic: str, events: Iterable[tuple[bytes, object]], *,
                         partitions: int = 8, rate: float | None = None, chunk: int = 5000,
                         encode: Callable[[object], bytes] = orjson.dumps) -> int:
    """Send ``events`` (key, value) to ``topic`` (created with ``partitions`` if missing), each value
    as ``encode`` makes it (JSON by default), at most ``rate`` events/s when given. Returns the number
    sent; every send is acknowledged."""
    await kafka.create_topics({topic: partitions})
    producer = kafka.sink(linger_ms=20, max_batch_size=256 * 1024)
    limiter = RateLimiter(rate, burst=max(1, int(rate / 10))) if rate else None
    sent = 0
    await producer.start()
    try:
        pending: list[Awaitable[None]] = []
        for key, value in events:
            if limiter is not None:
                wait = limiter.acquire(1, time.monotonic())
                if wait > 0:
                    await anyio.sleep(wait)
            pending.append(await producer.send(topic, encode(value), key=key))
            sent += 1
            if len(pending) >= chunk:
                for fut in pending:
                    await fut
                pending.clear()
        for fut in pending:
            await fut
    finally:
        await producer.stop()
    return sent
