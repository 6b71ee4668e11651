"""The record sink: one idempotent aiokafka producer (``acks=all``) behind :class:`pipeline.ports.RecordSink`.

:meth:`KafkaSink.send` queues a record and returns an awaitable that completes when Kafka
acknowledged it; :meth:`KafkaSink.send_and_wait` does both. Failures come out as the project's
errors (:mod:`connectors.kafka.errors`), from the queueing call or from the awaitable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from connectors.kafka.admin import close_shielded, make_producer
from connectors.kafka.errors import map_errors
from connectors.kafka.security import start_client
from pipeline.settings import KafkaSettings

__all__ = ["KafkaSink"]


class KafkaSink:
    def __init__(self, settings: KafkaSettings, **overrides: Any) -> None:
        self.settings = settings
        self._producer: AIOKafkaProducer = make_producer(settings, **overrides)
        self._started = False

    def __repr__(self) -> str:
        return f"KafkaSink(bootstrap={self.settings.bootstrap_servers!r})"

    async def start(self) -> None:
        """Connect; on failure or cancellation the producer is closed, then the error raised (a
        producer left open complains when it is collected)."""
        try:
            await start_client(self._producer.start, self.settings,
                               f"starting a producer at {self.settings.bootstrap_servers}")
        except BaseException:
            with contextlib.suppress(Exception):  # the start's own error is the one to report
                await close_shielded(self._producer.stop)
            raise
        self._started = True

    async def stop(self) -> None:
        """Flush and close; idempotent. A sink never started is closed too (aiokafka's producer
        complains when it is collected unclosed, started or not)."""
        if not self._started:
            await close_shielded(self._producer.stop)  # nothing to flush: no error worth reporting
            return
        self._started = False
        with map_errors("stopping a producer"):
            await self._producer.stop()

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None) -> Awaitable[None]:
        with map_errors(f"sending to topic {topic!r}"):
            future = await self._producer.send(topic, value, key=key,
                                               headers=list(headers) if headers is not None else None)
        return self._delivered(topic, future)

    async def _delivered(self, topic: str, future: asyncio.Future[Any]) -> None:
        with map_errors(f"sending to topic {topic!r}"):
            await future

    async def send_and_wait(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                            headers: Sequence[tuple[str, bytes | None]] | None = None) -> None:
        await (await self.send(topic, value, key=key, headers=headers))
