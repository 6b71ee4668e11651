"""What orchestration needs from the outside world, as typing Protocols.

``pipeline.runtime`` depends on these alone (an import-linter contract forbids it to import
``connectors``); the composition root (``pipeline.cli``) builds the adapters that satisfy them:

==========================  ===================================  ====================================
port                        real adapter                         in-memory twin (fast tests)
==========================  ===================================  ====================================
:class:`Broker`             ``connectors.kafka.KafkaBroker``     ``connectors.memory.MemoryBroker``
:class:`RecordSource`       ``connectors.kafka.KafkaSource``     ``connectors.memory.MemorySource``
:class:`RecordSink`         ``connectors.kafka.KafkaSink``       ``connectors.memory.MemorySink``
:class:`HBase`              ``connectors.hbase.HBaseClient``     ``connectors.memory.MemoryHBase``
:class:`SchemaRegistry`     ``connectors.registry.RegistryClient``  (tests: an httpx mock transport)
==========================  ===================================  ====================================

Contracts every adapter keeps (the twins too, and their tests check it):

- Errors are the project's own (:mod:`pipeline.errors`): :class:`~pipeline.errors.KafkaError` and
  its subclasses for Kafka, :class:`~pipeline.errors.HBaseError` and its subclasses for HBase. A
  foreign exception never crosses a port.
- Offsets are Kafka offsets: a committed offset is the *next* offset to read (last done + 1).
- Scan bounds: ``start`` inclusive, ``stop`` exclusive, ``b""`` an open end; with ``reverse`` the
  scan runs from ``start`` (inclusive, the upper bound) down to ``stop`` (exclusive), as in HBase.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio

from pipeline.core.model import Mutation, TopicPartition
from pipeline.core.records.schemas import RegisteredSchema
from pipeline.settings import FamilySpec

__all__ = [
    "AssignmentListener",
    "Broker",
    "CellLike",
    "HBase",
    "HBaseAdmin",
    "KafkaRecord",
    "OffsetLookup",
    "OffsetReader",
    "PageTransform",
    "RecordSink",
    "RecordSource",
    "RegionInfo",
    "RegionLocator",
    "RowScanner",
    "RowSink",
    "SchemaRegistry",
    "TopicAdmin",
]

Row = tuple[bytes, dict[bytes, bytes]]
#: a callable building a page function in a scan worker process, and its (picklable) arguments
PageTransform = tuple[Callable[..., Any], tuple[Any, ...]]


# -- Kafka ----------------------------------------------------------------------------------------


class KafkaRecord(Protocol):
    """One consumed record, as the source delivers it (read-only attributes). Its topic and partition
    are those of the fetch that delivered it (:meth:`RecordSource.fetch` maps partition -> records)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...  # epoch ms (the producer's CreateTime, or the broker's LogAppendTime)
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


class AssignmentListener(Protocol):
    """Told of partition assignment changes of a group member, in the member's fetch task: revocation
    first (commit what is done before the partitions go), then the new assignment."""

    async def on_revoked(self, revoked: list[TopicPartition]) -> None: ...
    async def on_assigned(self, assigned: list[TopicPartition]) -> None: ...


class RecordSource(Protocol):
    """A consumer: a member of a group (``subscribe``) or group-less (``assign``). Auto-commit is off:
    the caller commits only what it has written. Raises :class:`~pipeline.errors.KafkaError`."""

    def subscribe(self, topics: Sequence[str], listener: AssignmentListener) -> None: ...
    def assign(self, partitions: Sequence[TopicPartition]) -> None: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...  # leaves the group; idempotent
    async def fetch(self, timeout_ms: int, max_records: int) -> Mapping[TopicPartition, Sequence[KafkaRecord]]:
        """Records of the assigned, unpaused partitions, in offset order per partition; ``{}`` when
        none arrived within ``timeout_ms``. Assignment changes are delivered to the listener inside
        this call."""
        ...
    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None: ...
    async def committed(self, tp: TopicPartition) -> int | None: ...
    async def position(self, tp: TopicPartition) -> int: ...
    def seek(self, tp: TopicPartition, offset: int) -> None: ...
    def pause(self, *tps: TopicPartition) -> None: ...
    def resume(self, *tps: TopicPartition) -> None: ...
    def assignment(self) -> set[TopicPartition]: ...


class RecordSink(Protocol):
    """A producer that waits for every in-sync replica (nothing acknowledged is lost)."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None) -> Awaitable[None]:
        """Queue one record; the returned awaitable completes when Kafka acknowledged it (raises
        :class:`~pipeline.errors.KafkaError` otherwise)."""
        ...
    async def send_and_wait(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                            headers: Sequence[tuple[str, bytes | None]] | None = None) -> None: ...


class TopicAdmin(Protocol):
    async def create_topics(self, topics: Mapping[str, int], replication: int | None = 1) -> list[str]:
        """Create each missing ``topic -> partitions``; the names created. ``replication`` None:
        min(3, live brokers). Raises :class:`~pipeline.errors.TopicNotCreated` when refused."""
        ...
    async def ensure_topic(self, topic: str, partitions: int = 1) -> bool: ...
    async def delete_topics(self, topics: Collection[str]) -> None: ...
    async def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids; :class:`~pipeline.errors.KafkaError` when it does not exist."""
        ...
    async def missing_topics(self, topics: Collection[str]) -> list[str]:
        """Those of ``topics`` the cluster does not have, in the order given; a retryable
        :class:`~pipeline.errors.KafkaError` when Kafka cannot be reached."""
        ...


class OffsetReader(Protocol):
    """Log offset look-ups, outside any consumer group."""

    async def log_offsets(self, tps: Collection[TopicPartition], which: Literal["start", "end"]
                          ) -> dict[TopicPartition, int]:
        """Log start (first offset still stored) or end (the next offset to be written) per partition."""
        ...
    async def offsets_for_time(self, tps: Collection[TopicPartition], ms: int) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is ``>= ms`` per partition (None: no such record)."""
        ...


class OffsetLookup(OffsetReader, Protocol):
    def offset_reader(self) -> AbstractAsyncContextManager[OffsetReader]:
        """One connection kept open for repeated look-ups (a metrics refresher); the broker's own
        look-ups open and close one per call."""
        ...
    async def group_offsets(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: no commit)."""
        ...
    async def commit_group(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit for ``group`` without joining it (the group must have no active members)."""
        ...


class Broker(TopicAdmin, OffsetLookup, Protocol):
    """The Kafka cluster: consumers and producers on demand, topic admin and offset look-ups."""

    @property
    def bootstrap(self) -> str: ...  # for messages: where the cluster was looked for
    def source(self, group_id: str | None) -> RecordSource: ...
    def sink(self, *, max_request_size: int | None = None, linger_ms: int | None = None,
             max_batch_size: int | None = None) -> RecordSink: ...


# -- schema registry ------------------------------------------------------------------------------


class SchemaRegistry(Protocol):
    """Writer schemas by id (``connectors.registry.RegistryClient``). ``schema`` raises
    :class:`~pipeline.errors.SchemaNotFound` for an id the registry does not have,
    :class:`~pipeline.errors.RegistryUnavailable` when it does not answer (retry), another
    :class:`~pipeline.errors.RegistryError` otherwise."""

    url: str

    async def check(self) -> None: ...
    async def schema(self, schema_id: int) -> RegisteredSchema: ...
    async def aclose(self) -> None: ...


# -- HBase ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegionInfo:
    """One region of a table: ``[start_key, end_key)``; ``b""`` is the open end on either side.
    ``server``/``port``: the region server holding it; ``region_id``: HBase's numeric region id;
    ``name``: HBase's region name (``table,start key,id.encoded.``) in HBase shell escaping, since
    it holds the raw start key: printable in logs and metric labels. What every
    :class:`RegionLocator` returns (the Thrift client and the in-memory twin alike)."""

    table: str
    start_key: bytes
    end_key: bytes
    server: str
    port: int
    region_id: int
    name: str


class CellLike(Protocol):
    @property
    def value(self) -> bytes: ...
    @property
    def timestamp(self) -> int: ...


class RegionLocator(Protocol):
    async def regions(self, table: str) -> Sequence[RegionInfo]:
        """The table's regions in key order; :class:`~pipeline.errors.TableNotFound` when missing."""
        ...


class RowSink(Protocol):
    async def write(self, table: str, mutations: Sequence[Mutation], *, server: str | None = None) -> str | None:
        """Apply every mutation (puts and deletes with their timestamps, increments), or raise. Puts
        and deletes are idempotent (cell timestamps); increments are not. ``server`` (``host:port``)
        names the region server the mutations' region is on: a hint for choosing a gateway that sits
        with it. Returns the name of the gateway that acknowledged the write, when the sink has
        gateways (None otherwise): for the acknowledgement ledger."""
        ...


class RowScanner(Protocol):
    @property
    def pool_size(self) -> int: ...  # how many calls may usefully run at once
    async def scan_cells(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                         limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                         filter: str | None = None) -> list[tuple[bytes, dict[bytes, Any]]]:
        """A page of rows with each cell as a :class:`CellLike` (value and timestamp)."""
        ...
    async def scan_page(self, table: str, *, start: bytes = b"", stop: bytes = b"", prefix: bytes | None = None,
                        limit: int = 1000, reverse: bool = False, columns: Sequence[bytes] | None = None,
                        filter: str | None = None) -> list[Row]: ...
    async def scan_in_process(self, table: str, *, start: bytes = b"", stop: bytes = b"", limit: int = 1000,
                              reverse: bool = False, columns: Sequence[bytes] | None = None,
                              transform: PageTransform, label: str, limiter: anyio.CapacityLimiter) -> Any:
        """A page passed through ``transform`` in a worker process (only the transformed page returns)."""
        ...
    async def warm_scan_processes(self, limiter: anyio.CapacityLimiter) -> None: ...


class HBaseAdmin(Protocol):
    async def ping(self) -> None:
        """One round trip on the way writes go (readiness); raises :class:`~pipeline.errors.HBaseError`."""
        ...
    async def tables(self) -> list[str]: ...
    async def table_exists(self, table: str) -> bool: ...
    async def families(self, table: str) -> dict[str, int]: ...
    async def create_table(self, table: str, families: Mapping[str, FamilySpec],
                           split_keys: Sequence[bytes] = ()) -> None: ...
    async def delete_table(self, table: str) -> None: ...


class HBase(RowSink, RowScanner, RegionLocator, HBaseAdmin, Protocol):
    """Everything runtime asks of HBase; :class:`~pipeline.errors.HBaseError` on failure."""

    def statistics(self) -> dict[str, Any]: ...
