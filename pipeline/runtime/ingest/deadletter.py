"""The dead-letter topic: records that cannot be written, with their original bytes and headers
saying where they came from and why.

The original record's key, value and headers are kept, and ours are added after them. Ours (all
UTF-8; their names: :mod:`pipeline.core.records.deadletters`): ``hbase-ingest.source.topic``,
``hbase-ingest.source.partition``, ``hbase-ingest.source.offset``, ``hbase-ingest.source.timestamp``
(when the record had one), ``hbase-ingest.route`` (the route that refused the record; absent when
the record as a whole was refused: undecodable, not an object, or a topic whose ``on_route_error`` is
``dead_letter_record``; a record refused by two routes is sent once per route),
``hbase-ingest.reason`` (a short code: undecodable, not_an_object, missing_field, bad_type, too_long,
contains_delimiter, empty_key, key_too_long, value_too_large, unmapped_code, out_of_range, null_key,
tombstone, no_before_image, unsupported_op, unknown_schema, schema_mismatch, hbase_rejected),
``hbase-ingest.error`` (the message). For ``hbase_rejected`` the value is a JSON
description of the refused mutation (table, row in HBase shell escaping, columns), because the
original record is no longer held once its mutations were batched. A re-driven dead letter that is
refused again keeps the source headers it had.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

import anyio
import orjson
import structlog

from pipeline.core.backoff import Backoff
from pipeline.core.model import Mutation, Origin
from pipeline.core.records.deadletters import (
    HEADER_PREFIX,
    REASON,
    ROUTE,
    SOURCE_OFFSET,
    SOURCE_PARTITION,
    SOURCE_TIMESTAMP,
    SOURCE_TOPIC,
    own_headers,
)
from pipeline.errors import KafkaError
from pipeline.ports import RecordSink
from pipeline.rowkey import format_key
from pipeline.runtime.ingest.observer import WorkerStats
from pipeline.runtime.ingest.report import EventWarnings

__all__ = ["HEADER_PREFIX", "DeadLetters"]

_SOURCE = (SOURCE_TOPIC, SOURCE_PARTITION, SOURCE_OFFSET, SOURCE_TIMESTAMP)

log = structlog.get_logger("hbase_ingest.deadletter")


class DeadLetters:
    """Sends to the dead-letter topic and retries until Kafka acknowledges: nothing is lost. Once Kafka
    has a record, it is counted (``stats``) and reported (``warnings``: metrics, a bounded log)."""

    def __init__(self, producer: RecordSink, topic: str, stats: WorkerStats, warnings: EventWarnings) -> None:
        self.producer = producer
        self.topic = topic
        self.stats = stats
        self.warnings = warnings
        self._backoff = Backoff(100, 10_000)

    async def send(self, origin: Origin, key: bytes | None, value: bytes | None, reason: str, error: str,
                   original_headers: Iterable[tuple[str, bytes | None]] = (), route: str | None = None,
                   timestamp: int | None = None) -> None:
        """Send one record: the original's key, value and headers (except ours), then ours. A header's
        value may be null (Kafka allows it): it is kept null. A record that is itself a dead letter
        (a re-drive) keeps the source headers it names; ``origin`` and ``timestamp`` are the record's
        own otherwise."""
        original = [(k, None if v is None else bytes(v)) for k, v in original_headers or ()]
        first = {k: v for k, v in original if k in _SOURCE and v is not None}
        if SOURCE_TOPIC in first:
            source = [(k, first[k]) for k in _SOURCE if k in first]
        else:
            source = [(SOURCE_TOPIC, origin.tp.topic.encode()), (SOURCE_PARTITION, str(origin.tp.partition).encode()),
                      (SOURCE_OFFSET, str(origin.offset).encode()),
                      *(((SOURCE_TIMESTAMP, str(timestamp).encode()),) if timestamp is not None else ())]
        headers = [
            *own_headers(original),
            *source,
            *(((ROUTE, route.encode()),) if route is not None else ()),
            (REASON, reason.encode()),
            (HEADER_PREFIX + "error", error.encode()[:4000]),
        ]
        attempt = 0
        while True:
            try:
                await self.producer.send_and_wait(self.topic, value, key=key, headers=headers)
                break
            except KafkaError as exc:  # any producer failure: retry, never drop
                delay = self._backoff.delay_ms(attempt, random.random())
                log.warning("dead_letter_retry", topic=self.topic, attempt=attempt + 1, error=str(exc))
                attempt += 1
                await anyio.sleep(delay / 1000)
        self.stats.dead_lettered += 1
        self.stats.dead_by_reason[reason] += 1
        self.warnings.dead_lettered(reason, {"tp": str(origin.tp), "offset": origin.offset, "route": route,
                                             "error": error})

    async def send_mutation(self, m: Mutation, error: str) -> None:
        body: dict[str, Any] = {
            "table": m.table, "row": format_key(m.row), "kind": m.kind.value, "timestamp": m.timestamp,
            "columns": {c.decode("utf-8", "replace"): format_key(v) for c, v in m.cells.items()},
        }
        await self.send(m.origin, m.row, orjson.dumps(body), "hbase_rejected", error)
