"""The project's exception tree. Every foreign exception (happybase, thriftpy2, aiokafka, socket, OS)
is translated into one of these at the I/O edge and raised ``from`` its cause. Every class the
project defines appears below (a test checks it); those defined elsewhere name their module.

::

    HBaseIngestError
    ├── ConfigError                 settings or a route cannot work (names the key / route)
    ├── RowKeyError                 (pipeline.rowkey)
    │   ├── SpecSyntaxError         a rowkey spec does not parse (carries .position)
    │   ├── EventFieldError         an event cannot feed a key: missing/wrong-typed/too long (.field, .value)
    │   ├── KeyDecodeError          bytes that the spec cannot decode
    │   └── PlanError               a query the design cannot answer as key ranges (ambiguous boundary)
    ├── EventError                  an event the worker cannot write (goes to the dead-letter topic)
    │   └── PartlyRefused           (pipeline.core.routes.reference) a route's refusal that still gives some mutations
    ├── WriteAbandoned              (pipeline.runtime.ingest.writer) HBase unavailable past the retry deadline
    ├── QueryError                  (pipeline.runtime.read.errors) a read failed: names the table and range
    ├── RowDecodeError              (pipeline.runtime.read.errors) a stored row the route cannot decode
    ├── CellDecodeError             (pipeline.runtime.read.columns) a stored cell the column mapping cannot decode
    ├── StackError                  the local Kafka/HBase stack cannot be provisioned or started
    ├── KafkaError                  a Kafka client call failed
    │   ├── KafkaUnavailable        the brokers cannot be reached, or a request timed out: retry with backoff
    │   ├── KafkaCommitFailed       the group refused a commit (rebalance in progress): the next tick retries
    │   ├── KafkaAuthError          authentication or authorization failed (names the topic/group): do not retry
    │   └── TopicNotCreated         a topic is missing and the cluster refused to create it
    ├── RegistryError               a schema registry call failed (names the registry and what was asked)
    │   ├── RegistryUnavailable     unreachable, timed out or a 5xx answer: retry with backoff
    │   └── SchemaNotFound          the registry has no schema of that id (.schema_id): its records are dead letters
    └── HBaseError                  a Thrift/HBase call failed
        ├── HBaseUnavailable        connection refused/reset, gateway down: retry with backoff
        ├── HBaseTimeout            the call did not finish within its timeout: retry with backoff
        ├── RegionMapStale          the region map no longer matches the table: refresh, then retry
        ├── TableNotFound           the table does not exist
        ├── HBaseRequestError       HBase rejected the request (IOError/IllegalArgument): do not retry
        └── HBaseAuthError          a gateway or server refused the credentials, QOP or certificate, or HBase
                                    denied a permission (names the user, table and action): do not retry
"""

from __future__ import annotations

from typing import Any, Self

__all__ = [
    "ConfigError",
    "EventError",
    "HBaseAuthError",
    "HBaseError",
    "HBaseIngestError",
    "HBaseRequestError",
    "HBaseTimeout",
    "HBaseUnavailable",
    "KafkaAuthError",
    "KafkaCommitFailed",
    "KafkaError",
    "KafkaUnavailable",
    "RegionMapStale",
    "RegistryError",
    "RegistryUnavailable",
    "SchemaNotFound",
    "StackError",
    "TableNotFound",
    "TopicNotCreated",
]


class HBaseIngestError(Exception):
    """Root of every error this project raises on purpose.

    Every one pickles (and copies) as itself, whatever its constructor's signature: the arguments it
    was built with are kept and given to the constructor again, then its attributes are restored.
    (``Exception`` alone rebuilds from ``args``, which a subclass that formats its message from
    several arguments, or takes keyword-only ones, cannot be rebuilt from.) Errors raised in a scan
    worker process, or in any other process, thus reach the caller with their type and fields.
    """

    _init_args: tuple[tuple[Any, ...], dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        self = super().__new__(cls, *args)
        self._init_args = (args, kwargs)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._init_args
        return (_rebuild, (type(self), args, kwargs), self.__dict__)


def _rebuild(cls: type[HBaseIngestError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> HBaseIngestError:
    return cls(*args, **kwargs)


class ConfigError(HBaseIngestError):
    """Configuration that cannot work. The message names the key or route and what was expected."""


class EventError(HBaseIngestError):
    """An event that cannot be written. ``reason`` is a short machine-readable code
    (``undecodable``, ``missing_field``, ``bad_type``, ``key_too_long``, ``value_too_large``, ...)
    that goes into the dead-letter headers together with the message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class StackError(HBaseIngestError):
    """The local stack cannot be provisioned or started. The message says what to do."""


class KafkaError(HBaseIngestError):
    """A Kafka client call failed. ``retryable`` tells the caller whether a retry can help."""

    retryable: bool = False


class KafkaUnavailable(KafkaError):
    """The brokers cannot be reached (refused, closed, no metadata), or a request timed out."""

    retryable = True


class KafkaCommitFailed(KafkaError):
    """The group coordinator refused a commit (a rebalance is in progress, the member was fenced):
    nothing was committed; the next commit after the rebalance carries the same offsets."""

    retryable = True


class KafkaAuthError(KafkaError):
    """Kafka refused the credentials (authentication), or the user lacks an ACL (authorization)."""


class TopicNotCreated(KafkaError):
    """A topic does not exist, and creating it failed (ACLs, a create policy): the cluster answered."""


class RegistryError(HBaseIngestError):
    """A schema registry call failed (refused credentials, a bad request). ``retryable`` tells the caller
    whether a retry can help."""

    retryable: bool = False


class RegistryUnavailable(RegistryError):
    """The registry cannot be reached, timed out, or answered 5xx."""

    retryable = True


class SchemaNotFound(RegistryError):
    """The registry answered that it has no schema ``schema_id``."""

    def __init__(self, message: str, *, schema_id: int) -> None:
        super().__init__(message)
        self.schema_id = schema_id


class HBaseError(HBaseIngestError):
    """A Thrift/HBase call failed. ``retryable`` tells the caller whether a retry can help."""

    retryable: bool = False

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


class HBaseUnavailable(HBaseError):
    """The gateway or HBase cannot be reached (refused, reset, closed)."""

    retryable = True


class HBaseTimeout(HBaseError):
    """The call did not finish within its timeout."""

    retryable = True


class RegionMapStale(HBaseError):
    """The region layout changed (split, move, NotServingRegion): refresh the region map, retry."""

    retryable = True


class TableNotFound(HBaseError):
    """The named table does not exist."""


class HBaseRequestError(HBaseError):
    """HBase rejected the request itself (bad family, bad argument). Retrying will not help.

    ``unapplied``: when the sink knows which mutations of the batch written were not applied (HBase's
    native ``Multi`` answers per action), their positions in it, in order; the others were applied.
    None: not known, any of them may not have been."""

    def __init__(self, message: str, *, table: str | None = None, unapplied: tuple[int, ...] | None = None) -> None:
        super().__init__(message, table=table)
        self.unapplied = unapplied


class HBaseAuthError(HBaseError):
    """A secured gateway or HBase server refused the client (Kerberos credentials, SASL QOP, TLS certificate,
    HTTP 401/403, the native RPC's SASL login), or the client's own credentials cannot be had; or HBase's
    AccessController refused an authenticated user a call (``AccessDeniedException``): then ``user`` is the user
    HBase named and ``action`` the missing permission (READ, WRITE, CREATE...), the message names the table.
    Every gateway and server would refuse the same: not retryable, and not a gateway failure (no failover)."""

    def __init__(self, message: str, *, table: str | None = None, user: str | None = None,
                 action: str | None = None) -> None:
        super().__init__(message, table=table)
        self.user = user
        self.action = action
