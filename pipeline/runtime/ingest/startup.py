"""The worker's start-up: checks of what it reads and writes, and waiting while they are missing or unreachable.

Starting while Kafka or HBase is unreachable: wait and retry with backoff, as a running worker does.

Contract of :func:`until_reachable`: ``step`` (a start-up check or call) is retried while it raises a
*retryable* :class:`~pipeline.errors.HBaseError`, :class:`~pipeline.errors.KafkaError` or
:class:`~pipeline.errors.RegistryError` (gateway, broker or schema registry unreachable, timeouts), with
exponential backoff and full jitter between ``initial_ms`` and
``max_ms``; anything else (a missing table, a refused ACL, bad configuration) is raised at once. One
``waiting_for_dependency`` warning is logged per ``log_interval_s`` (not per attempt), and
``on_wait`` is told what is awaited (None once it answered) so ``/readyz`` can say so. With
``fail_fast`` the first failure is raised.

Contract of :func:`wait_for_topics`: every topic the routes read must exist (the worker does not
create them; a broker that does not create topics on demand would otherwise fail the consumer's
start after its request timeout). With ``fail_fast`` a missing one is a
:class:`~pipeline.errors.ConfigError` naming it, the cluster and the routes that read it (``topic 'X'
does not exist on <bootstrap> (routes: r1, r2)``, joined by ``; `` when several are missing);
otherwise it is waited for with backoff, one ``waiting_for_dependency`` warning naming it per step.

Both waits are plain awaits: cancelling the caller's scope (a stop request at start-up) ends them
at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import anyio
import structlog

from pipeline.core.backoff import Backoff, Jitter
from pipeline.core.ingest.regions import RegionMaps
from pipeline.core.routes.router import CompiledRoute
from pipeline.errors import (
    ConfigError,
    HBaseAuthError,
    HBaseError,
    KafkaError,
    RegistryError,
    TableNotFound,
    TopicNotCreated,
)
from pipeline.ports import HBase, TopicAdmin
from pipeline.runtime.ingest.writer import load_region_map

__all__ = ["check_tables", "ensure_dead_letter_topic", "missing_topics_message", "until_reachable",
           "wait_for_topics"]

log = structlog.get_logger("hbase_ingest.worker")
#: the permissions HBase asks for to describe a table (its families)
_DESCRIBE_RIGHTS = ("CREATE", "ADMIN")
T = TypeVar("T")


async def until_reachable(step: Callable[[], Awaitable[T]], what: str, *, fail_fast: bool,
                          on_wait: Callable[[str | None], None] = lambda _: None,
                          initial_ms: float = 200, max_ms: float = 10_000, log_interval_s: float = 30.0) -> T:
    backoff = Backoff(initial_ms, max_ms)
    attempt = 0
    started = time.monotonic()
    last_log: float | None = None
    while True:
        try:
            result = await step()
        except (HBaseError, KafkaError, RegistryError) as exc:
            if fail_fast or not exc.retryable:
                raise
            on_wait(f"waiting for {what}: {exc}")
            now = time.monotonic()
            delay_s = backoff.delay_ms(attempt, random.random()) / 1000
            if last_log is None or now - last_log >= log_interval_s:
                last_log = now
                log.warning("waiting_for_dependency", what=what, attempts=attempt + 1,
                            waited_s=round(now - started, 1), error=str(exc),
                            hint="retrying with backoff; --fail-fast (or [runtime] fail_fast) stops instead")
            attempt += 1
            await anyio.sleep(delay_s)
        else:
            if attempt:
                log.info("dependency_reachable", what=what, attempts=attempt + 1,
                         waited_s=round(time.monotonic() - started, 1))
            on_wait(None)
            return result


async def check_tables(hbase: HBase, routes: Sequence[CompiledRoute], maps: RegionMaps) -> None:
    """Fail, naming the route, when a table or family does not exist (:class:`~pipeline.errors.ConfigError`);
    load each table's region map into ``maps``. HBase unreachable raises its retryable error. A user whom
    HBase does not allow to describe a table (no CREATE or ADMIN right on it: a writer granted READ and WRITE
    only) gets a ``families_unchecked`` warning instead of the families' check; a missing WRITE right is then
    the first write's :class:`~pipeline.errors.HBaseAuthError`."""
    for route in routes:
        try:
            families = await hbase.families(route.table)
        except TableNotFound as exc:
            raise ConfigError(f"route {route.name!r}: table {route.table!r} does not exist in HBase "
                              f"(create it with `hbase-ingest tables create --config ...`)") from exc
        except HBaseAuthError as exc:
            if exc.action not in _DESCRIBE_RIGHTS:
                raise
            # a writer granted READ and WRITE only may not describe the table: its writes tell
            log.warning("families_unchecked", route=route.name, table=route.table, user=exc.user,
                        reason=f"no {exc.action} permission to describe the table")
            families = None
        missing = [] if families is None else [f for f in route.families if f not in families]
        if missing:
            raise ConfigError(f"route {route.name!r}: table {route.table!r} has no column family "
                              f"{', '.join(missing)} (it has: {', '.join(sorted(families or ()))})")
        if route.table not in maps:
            maps.replace(route.table, await load_region_map(hbase, route.table))


async def ensure_dead_letter_topic(kafka: TopicAdmin, topic: str) -> None:
    """Make sure the dead-letter topic exists before any record is read: create it when missing (one
    partition, as Kafka Connect does for its dead-letter queues), or fail naming it when the cluster
    refuses (the first bad record would otherwise wait on it)."""
    try:
        if await kafka.ensure_topic(topic):
            log.info("dead_letter_topic_created", topic=topic)
    except TopicNotCreated as exc:
        raise ConfigError(f"the dead-letter topic: {exc}; create it, or name an existing one in "
                          "[kafka].dead_letter_topic") from exc


def missing_topics_message(missing: Sequence[str], readers: Mapping[str, Sequence[str]], where: str) -> str:
    """``topic 'X' does not exist on <where> (routes: r1, r2)`` for each of ``missing`` (``readers``:
    topic -> the names of the routes that read it), joined by ``; ``."""
    return "; ".join(f"topic {t!r} does not exist on {where} (routes: {', '.join(readers.get(t, ()))})"
                     for t in missing)


async def wait_for_topics(kafka: TopicAdmin, readers: Mapping[str, Sequence[str]], where: str, *, fail_fast: bool,
                          on_wait: Callable[[str | None], None] = lambda _: None,
                          initial_ms: float = 1000, max_ms: float = 30_000) -> None:
    """Return once every topic of ``readers`` (topic -> the routes that read it) exists on the
    cluster at ``where`` (see the module docstring). Between look-ups: equal jitter (a topic is
    created by someone, not restored by a retry: no need to hammer the broker), from ``initial_ms``
    up to ``max_ms``. Kafka unreachable meanwhile is waited for as :func:`until_reachable` does."""
    backoff = Backoff(initial_ms, max_ms, jitter=Jitter.EQUAL)
    topics = list(readers)
    attempt = 0
    started = time.monotonic()
    while True:
        missing = await until_reachable(lambda: kafka.missing_topics(topics), f"Kafka at {where}",
                                        fail_fast=fail_fast, on_wait=on_wait)
        if not missing:
            if attempt:
                log.info("dependency_reachable", what=f"topics {', '.join(map(repr, topics))}",
                         attempts=attempt + 1, waited_s=round(time.monotonic() - started, 1))
            on_wait(None)
            return
        message = missing_topics_message(missing, readers, where)
        if fail_fast:
            raise ConfigError(message)
        on_wait(f"waiting for the topics read to be created: {message}")
        log.warning("waiting_for_dependency", what=f"topic{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(map(repr, missing))} on {where}", attempts=attempt + 1,
                    waited_s=round(time.monotonic() - started, 1), error=message,
                    hint="create the topic; --fail-fast (or [runtime] fail_fast) stops instead")
        await anyio.sleep(backoff.delay_ms(attempt, random.random()) / 1000)
        attempt += 1
