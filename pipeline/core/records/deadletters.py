"""The dead-letter topic's headers, as routing reads them back: a dead letter names where its record
came from and which route refused it, so that it can be re-driven into that route.

Headers (values UTF-8), after the record's own: ``hbase-ingest.source.topic``,
``hbase-ingest.source.partition``, ``hbase-ingest.source.offset``, ``hbase-ingest.source.timestamp``
(the record's Kafka timestamp, ms), ``hbase-ingest.route`` (absent when the record as a whole was
refused), ``hbase-ingest.reason`` and ``hbase-ingest.error``. A dead letter of a dead letter (a
re-drive refused again) keeps its first source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HEADER_PREFIX", "REASON", "ROUTE", "SOURCE_OFFSET", "SOURCE_PARTITION", "SOURCE_TIMESTAMP", "SOURCE_TOPIC",
           "DeadLetterSource", "dead_letter_source", "own_headers"]

HEADER_PREFIX = "hbase-ingest."
SOURCE_TOPIC = HEADER_PREFIX + "source.topic"
SOURCE_PARTITION = HEADER_PREFIX + "source.partition"
SOURCE_OFFSET = HEADER_PREFIX + "source.offset"
SOURCE_TIMESTAMP = HEADER_PREFIX + "source.timestamp"
ROUTE = HEADER_PREFIX + "route"
REASON = HEADER_PREFIX + "reason"


@dataclass(frozen=True, slots=True)
class DeadLetterSource:
    """Where a dead letter's record came from, and the route that refused it (None: every route)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    route: str | None
    reason: str | None


def dead_letter_source(headers: Iterable[tuple[str, bytes | None]]) -> DeadLetterSource | None:
    """The source a dead letter's headers name; None when they name none (not a dead letter of ours,
    or headers that do not parse)."""
    ours = {k: v for k, v in headers or () if k.startswith(HEADER_PREFIX) and v is not None}
    try:
        topic = ours[SOURCE_TOPIC].decode()
        partition, offset = int(ours[SOURCE_PARTITION]), int(ours[SOURCE_OFFSET])
        stamp = ours.get(SOURCE_TIMESTAMP)
        route, reason = ours.get(ROUTE), ours.get(REASON)
        return DeadLetterSource(topic, partition, offset, int(stamp) if stamp is not None else None,
                                route.decode() if route is not None else None,
                                reason.decode() if reason is not None else None)
    except (KeyError, ValueError):
        return None


def own_headers(headers: Iterable[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """A record's headers without ours (a dead letter's are added anew when it is sent again)."""
    return [(k, v) for k, v in headers or () if not k.startswith(HEADER_PREFIX)]
