"""aiokafka clients built from :class:`~pipeline.settings.KafkaSettings`, and the topic and offset
calls made with short-lived ones (admin, group-less consumers).

Security options (protocol, SASL, SSL files) are passed through unchanged. aiokafka errors are
translated into the project's :class:`~pipeline.errors.KafkaError` tree at this edge
(:mod:`connectors.kafka.errors`). Runtime reaches these through :class:`connectors.kafka.KafkaBroker`;
the raw ``make_*`` constructors are for adapters and tests that inspect Kafka directly.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError as _AioKafkaError
from aiokafka.errors import TopicAlreadyExistsError

from connectors.kafka.errors import translate
from connectors.kafka.security import sasl_options, sasl_password, ssl_context, start_client
from pipeline.errors import KafkaAuthError, KafkaError, TopicNotCreated
from pipeline.settings import KafkaSettings

_UNKNOWN_TOPIC_OR_PARTITION = 3  # Kafka's error codes in a topic's metadata or creation result
_TOPIC_AUTHORIZATION_FAILED = 29
_TOPIC_ALREADY_EXISTS = 36
_COORDINATOR_RETRY_S = 0.2  # between look-ups of a group coordinator not available yet

log = structlog.get_logger("hbase_ingest.kafka")

__all__ = [
    "TopicPartition",
    "close_shielded",
    "common_options",
    "create_topics",
    "delete_topics",
    "end_offsets",
    "ensure_topic",
    "make_admin",
    "make_consumer",
    "make_producer",
    "missing_topics",
    "partitions",
    "start_offsets",
    "wait_for_coordinator",
]


def common_options(s: KafkaSettings, client_suffix: str = "") -> dict[str, Any]:
    """Connection options shared by consumers, producers and admin clients.

    The SASL password comes from ``sasl_plain_password`` or the file ``sasl_password_file``
    (:func:`connectors.kafka.security.sasl_password`); GSSAPI's service and host names and Kerberos login,
    and OAUTHBEARER's token provider, from :func:`connectors.kafka.security.sasl_options`; the TLS context
    from ``ssl_cafile`` (and a client certificate). Raises :class:`~pipeline.errors.ConfigError` naming the
    file when one of them is missing or unreadable, :class:`~pipeline.errors.KafkaAuthError` when no
    Kerberos ticket can be had."""
    opts: dict[str, Any] = {
        "bootstrap_servers": s.bootstrap_servers,
        "client_id": s.client_id + client_suffix,
        "security_protocol": s.security_protocol,
        "request_timeout_ms": s.request_timeout_ms,
    }
    if s.sasl_mechanism:
        opts["sasl_mechanism"] = s.sasl_mechanism
    if s.sasl_plain_username is not None:
        opts["sasl_plain_username"] = s.sasl_plain_username
    password = sasl_password(s)
    if password is not None:
        opts["sasl_plain_password"] = password
    opts.update(sasl_options(s))
    if s.security_protocol in ("SSL", "SASL_SSL"):
        opts["ssl_context"] = ssl_context(s)
    return opts


def make_consumer(s: KafkaSettings, *, group_id: str | None, topics: Sequence[str] = (),
                  **overrides: Any) -> AIOKafkaConsumer:
    """A consumer with auto-commit OFF: the caller commits only what HBase acknowledged.

    ``group_id`` is explicit: a group name, or None for a consumer outside any group (manual
    assignment, offset look-ups). Callers wanting the configured group pass ``s.group_id``."""
    opts = common_options(s, "-consumer")
    opts.update(group_id=group_id, enable_auto_commit=False,
                auto_offset_reset=s.auto_offset_reset, max_poll_records=s.max_poll_records,
                fetch_max_bytes=s.fetch_max_bytes, fetch_min_bytes=s.fetch_min_bytes,
                fetch_max_wait_ms=s.fetch_max_wait_ms, session_timeout_ms=s.session_timeout_ms,
                heartbeat_interval_ms=s.heartbeat_interval_ms, isolation_level="read_committed")
    opts.update(overrides)
    return AIOKafkaConsumer(*topics, **opts)


def make_producer(s: KafkaSettings, **overrides: Any) -> AIOKafkaProducer:
    """An idempotent producer that waits for all in-sync replicas (dead letters must not be lost)."""
    opts = common_options(s, "-producer")
    opts.update(acks="all", enable_idempotence=True, linger_ms=5)
    opts.update(overrides)
    return AIOKafkaProducer(**opts)


def make_admin(s: KafkaSettings) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(**common_options(s, "-admin"))


async def close_shielded(close: Callable[[], Awaitable[None]]) -> None:
    """Await ``close()`` (an aiokafka client's ``close`` or ``stop``) even when the caller is being
    cancelled (a stop request at start-up): a client left half open complains about its unclosed
    connections when it is collected, after the command's output."""
    with anyio.CancelScope(shield=True):
        await close()


async def create_topics(s: KafkaSettings, topics: Mapping[str, int], replication: int | None = 1) -> list[str]:
    """Create each ``topic -> partition count`` that does not exist yet. Returns the ones created.
    ``replication`` None means min(3, live brokers). Raises :class:`KafkaError` when Kafka cannot be
    reached, :class:`TopicNotCreated` when the cluster refused a creation (ACLs, a create policy)."""
    admin = make_admin(s)
    try:
        try:
            await start_client(admin.start, s, f"connecting to Kafka at {s.bootstrap_servers}")
            existing = set(await admin.list_topics())
            if replication is None and not set(topics) <= existing:
                replication = min(3, len((await admin.describe_cluster()).get("brokers") or []) or 1)
        except _AioKafkaError as exc:
            raise translate(exc, f"listing topics at {s.bootstrap_servers}") from exc
        new = [NewTopic(t, n, replication) for t, n in topics.items() if t not in existing]
        if new:
            try:
                with contextlib.suppress(TopicAlreadyExistsError):  # created concurrently elsewhere
                    response = await admin.create_topics(new)
                    _check_created(s, response)
            except _AioKafkaError as exc:
                what = f"creating topics {sorted(t.name for t in new)}"
                error = translate(exc, what)
                if not error.retryable:  # the cluster answered and refused (ACLs, a create policy)
                    raise TopicNotCreated(f"{what} failed: {exc!r}") from exc
                raise error from exc
        return [t.name for t in new]
    finally:
        await close_shielded(admin.close)


def _check_created(s: KafkaSettings, response: Any) -> None:
    """Raise for a topic the cluster refused to create: :class:`KafkaAuthError` naming it when an ACL
    is missing, :class:`TopicNotCreated` otherwise (a topic created concurrently elsewhere is fine)."""
    for entry in getattr(response, "topic_errors", None) or ():
        topic, code = entry[0], entry[1]
        if code == _TOPIC_AUTHORIZATION_FAILED:
            raise KafkaAuthError(f"creating topic {topic!r} at {s.bootstrap_servers}: not authorized: Kafka's ACLs "
                                 f"refuse this user access to topic {topic!r} (TopicAuthorizationFailedError); "
                                 "grant the user an ACL for it, or create the topic beforehand")
        if code and code != _TOPIC_ALREADY_EXISTS:
            message = entry[2] if len(entry) > 2 else ""
            raise TopicNotCreated(f"creating topic {topic!r} failed: Kafka error code {code} {message or ''}".strip())


async def ensure_topic(s: KafkaSettings, topic: str, count: int = 1) -> bool:
    """Create ``topic`` when it does not exist, with ``count`` partitions and a replication factor of
    min(3, live brokers); True when it was created here. Raises as :func:`create_topics`, and
    :class:`TopicNotCreated` when the topic still does not exist afterwards."""
    if not await create_topics(s, {topic: count}, replication=None):
        return False
    try:
        await partitions(s, topic)
    except KafkaAuthError:
        raise
    except KafkaError as exc:
        raise TopicNotCreated(f"topic {topic!r} does not exist, and the cluster did not create it") from exc
    return True


async def delete_topics(s: KafkaSettings, topics: Iterable[str]) -> None:
    admin = make_admin(s)
    try:
        await start_client(admin.start, s, f"connecting to Kafka at {s.bootstrap_servers}")
        existing = set(await admin.list_topics())
        doomed = [t for t in topics if t in existing]
        if doomed:
            await admin.delete_topics(doomed)
    except _AioKafkaError as exc:
        raise translate(exc, "deleting topics") from exc
    finally:
        await close_shielded(admin.close)


async def partitions(s: KafkaSettings, topic: str) -> list[int]:
    """The topic's partition ids; raises :class:`KafkaError` when the topic does not exist."""
    admin = make_admin(s)
    try:
        await start_client(admin.start, s, f"connecting to Kafka at {s.bootstrap_servers}")
        described = await admin.describe_topics([topic])
    except _AioKafkaError as exc:
        raise translate(exc, f"describing topic {topic!r}") from exc
    finally:
        await close_shielded(admin.close)
    for entry in described:
        if entry.get("topic") == topic and entry.get("error_code") == _TOPIC_AUTHORIZATION_FAILED:
            raise KafkaAuthError(f"describing topic {topic!r} at {s.bootstrap_servers}: not authorized: Kafka's "
                                 f"ACLs refuse this user access to topic {topic!r} (TopicAuthorizationFailedError); "
                                 "grant the user an ACL for it")
        if entry.get("topic") == topic and not entry.get("error_code"):
            return sorted(int(p["partition"]) for p in entry.get("partitions", []))
    raise KafkaError(f"topic {topic!r} does not exist")


async def missing_topics(s: KafkaSettings, topics: Collection[str]) -> list[str]:
    """Those of ``topics`` that the cluster does not have, in the order given, from one metadata
    request (a broker that creates topics on demand, ``auto.create.topics.enable``, creates them
    then, as a consumer subscribing to them would). Raises :class:`KafkaAuthError` naming a topic the
    user may not describe, :class:`KafkaError` (retryable) when Kafka cannot be reached."""
    if not topics:
        return []
    admin = make_admin(s)
    try:
        await start_client(admin.start, s, f"connecting to Kafka at {s.bootstrap_servers}")
        described = await admin.describe_topics(list(topics))
    except _AioKafkaError as exc:
        raise translate(exc, f"describing topics {sorted(topics)}") from exc
    finally:
        await close_shielded(admin.close)
    codes = {entry.get("topic"): entry.get("error_code") for entry in described}
    for topic in topics:
        if codes.get(topic) == _TOPIC_AUTHORIZATION_FAILED:
            raise KafkaAuthError(f"describing topic {topic!r} at {s.bootstrap_servers}: not authorized: Kafka's "
                                 f"ACLs refuse this user access to topic {topic!r} (TopicAuthorizationFailedError); "
                                 "grant the user an ACL for it")
    # a topic being created answers LEADER_NOT_AVAILABLE for a moment: it exists
    return [t for t in topics if codes.get(t, _UNKNOWN_TOPIC_OR_PARTITION) == _UNKNOWN_TOPIC_OR_PARTITION]


async def wait_for_coordinator(s: KafkaSettings, group: str, timeout_s: float) -> None:
    """Return once a broker names the coordinator of ``group``, or after ``timeout_s``.

    On a cluster just started no broker coordinates a group until the offsets topic exists (the
    first look-up has it created, which takes a few seconds): a consumer's own look-up logs an
    ERROR for each of its retries meanwhile. Looking up here first, quietly, spares those lines
    (a ``group_coordinator_found`` event tells how long it took when the first look-up failed).
    Best effort: any failure to look up (Kafka unreachable, a refused ACL, a login that fails)
    returns, and the consumer's start reports it."""
    admin = make_admin(s)
    started = time.monotonic()
    try:
        with anyio.move_on_after(timeout_s):
            await admin.start()
            for attempt in itertools.count(1):
                try:
                    await admin.find_coordinator(group)
                except _AioKafkaError as exc:
                    if not exc.retriable:
                        return
                else:
                    if attempt > 1:
                        log.info("group_coordinator_found", group=group, attempts=attempt,
                                 waited_s=round(time.monotonic() - started, 1))
                    return
                await anyio.sleep(_COORDINATOR_RETRY_S)
    except Exception:  # best effort: the consumer's start that follows reports the failure
        return
    finally:
        await close_shielded(admin.close)


async def end_offsets(s: KafkaSettings, topic: str) -> dict[int, int]:
    """Partition -> log end offset (the offset the next record will get)."""
    return await _log_offsets(s, topic, "end")


async def start_offsets(s: KafkaSettings, topic: str) -> dict[int, int]:
    """Partition -> log start offset (the first offset still stored; retention and DeleteRecords
    move it forward)."""
    return await _log_offsets(s, topic, "start")


async def _log_offsets(s: KafkaSettings, topic: str, which: Literal["start", "end"]) -> dict[int, int]:
    parts = await partitions(s, topic)
    consumer = make_consumer(s, group_id=None)
    try:
        await start_client(consumer.start, s, f"connecting to Kafka at {s.bootstrap_servers}")
        tps = [TopicPartition(topic, p) for p in parts]
        found = await (consumer.end_offsets(tps) if which == "end" else consumer.beginning_offsets(tps))
        return {tp.partition: off for tp, off in found.items()}
    except _AioKafkaError as exc:
        raise translate(exc, f"reading {which} offsets of {topic!r}") from exc
    finally:
        await close_shielded(consumer.stop)
