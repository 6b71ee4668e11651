"""An in-memory twin of the Kafka adapter (the :class:`pipeline.ports.Broker` port and its sources and
sinks), for fast runtime tests.

It behaves like a broker where runtime can tell:

- topics of N partitions; records get consecutive offsets per partition; :meth:`MemoryBroker.delete_before`
  moves a partition's log start forward (retention), and a consumer positioned before it resumes at
  the log start (``auto_offset_reset = earliest``), so the offsets in between are never delivered;
  :meth:`MemoryBroker.append_gap` leaves offsets out (transaction markers, compaction);
- consumer groups: members that ``subscribe`` share the topics' partitions (round-robin over the
  sorted partitions, members in join order); a join or a leave rebalances every member, and each
  member's listener hears it inside its next :meth:`MemorySource.fetch`: revocation of everything it
  held, then its new assignment (the eager protocol aiokafka uses). A commit by a member for a
  partition it does not hold is refused with :class:`~pipeline.errors.KafkaCommitFailed`;
- a new member starts at the group's committed offset, else at the log start;
- fetches return records of assigned, unpaused partitions in offset order, at most ``max_records``,
  and wait up to ``timeout_ms`` for data when there is none;
- failures on demand: :meth:`MemoryBroker.fail_next` makes the next N calls of one operation
  (``fetch``, ``commit``, ``send``, ``committed``, ``position``, ``admin``: topic creation and the
  look-up of missing topics) raise the error given.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import anyio
import anyio.lowlevel

from pipeline.core.model import TopicPartition
from pipeline.errors import KafkaCommitFailed, KafkaError, TopicNotCreated
from pipeline.ports import AssignmentListener, KafkaRecord

__all__ = ["MemoryBroker", "MemoryRecord", "MemorySink", "MemorySource"]


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass
class _Partition:
    records: list[MemoryRecord] = field(default_factory=list)
    log_start: int = 0
    log_end: int = 0


@dataclass
class _Group:
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    members: list[MemorySource] = field(default_factory=list)
    generation: int = 0


class MemoryBroker:
    """Topics, groups and failures on demand. ``clock`` gives record timestamps (ms) when none is given."""

    bootstrap = "memory"

    def __init__(self) -> None:
        self.topics: dict[str, list[_Partition]] = {}
        self.groups: dict[str, _Group] = {}
        self._failures: dict[str, list[KafkaError]] = {}
        self._data = anyio.Event()
        self._round_robin = itertools.count()
        self.commits = 0

    def __repr__(self) -> str:
        return f"MemoryBroker(topics={sorted(self.topics)}, groups={sorted(self.groups)})"

    # -- set-up, inspection and failures on demand -------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self.topics.setdefault(topic, [_Partition() for _ in range(partitions)])

    def produce(self, topic: str, value: bytes | None, *, key: bytes | None = None, partition: int | None = None,
                headers: Sequence[tuple[str, bytes | None]] = (), timestamp: int = 0) -> MemoryRecord:
        """Append one record (round-robin over partitions unless one is given) and wake fetchers."""
        parts = self._parts(topic)
        p = next(self._round_robin) % len(parts) if partition is None else partition
        part = parts[p]
        record = MemoryRecord(topic, p, part.log_end, timestamp, key, value, tuple(headers))
        part.records.append(record)
        part.log_end += 1
        self._wake()
        return record

    def append_gap(self, topic: str, partition: int, count: int) -> None:
        """Offsets that will never be delivered (transaction markers, compacted records)."""
        self._parts(topic)[partition].log_end += count

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Retention: records before ``offset`` are gone; the log start moves there."""
        part = self._parts(topic)[partition]
        part.log_start = max(part.log_start, offset)
        part.records = [r for r in part.records if r.offset >= part.log_start]

    def records(self, topic: str) -> list[MemoryRecord]:
        """Every stored record of ``topic``, partition by partition, in offset order."""
        return [r for part in self._parts(topic) for r in part.records]

    def fail_next(self, operation: Literal["fetch", "commit", "send", "committed", "position", "admin"],
                  error: KafkaError, times: int = 1) -> None:
        self._failures.setdefault(operation, []).extend([error] * times)

    def _check(self, operation: str) -> None:
        pending = self._failures.get(operation)
        if pending:
            raise pending.pop(0)

    def _parts(self, topic: str) -> list[_Partition]:
        parts = self.topics.get(topic)
        if parts is None:
            raise KafkaError(f"topic {topic!r} does not exist")
        return parts

    def _wake(self) -> None:
        self._data.set()
        self._data = anyio.Event()

    # -- groups ------------------------------------------------------------------------------------

    def _group(self, group: str) -> _Group:
        return self.groups.setdefault(group, _Group())

    def _join(self, group: str, member: MemorySource) -> None:
        g = self._group(group)
        g.members.append(member)
        self._rebalance(g)

    def _leave(self, group: str, member: MemorySource) -> None:
        g = self._group(group)
        if member in g.members:
            g.members.remove(member)
            member.held = set()
            self._rebalance(g)

    def _rebalance(self, g: _Group) -> None:
        g.generation += 1
        topics = sorted({t for m in g.members for t in m.topics})
        tps = [TopicPartition(t, p) for t in topics if t in self.topics for p in range(len(self.topics[t]))]
        plan: dict[int, set[TopicPartition]] = {id(m): set() for m in g.members}
        for i, tp in enumerate(tps):
            members = [m for m in g.members if tp.topic in m.topics]
            if members:
                plan[id(members[i % len(members)])].add(tp)
        for m in g.members:
            m.pending = plan[id(m)]
        self._wake()

    # -- the port: clients -------------------------------------------------------------------------

    def source(self, group_id: str | None) -> MemorySource:
        return MemorySource(self, group_id)

    def sink(self, *, max_request_size: int | None = None, linger_ms: int | None = None,
             max_batch_size: int | None = None) -> MemorySink:
        return MemorySink(self)

    # -- the port: topics --------------------------------------------------------------------------

    async def create_topics(self, topics: Mapping[str, int], replication: int | None = 1) -> list[str]:
        await anyio.lowlevel.checkpoint()
        self._check("admin")
        created = [t for t in topics if t not in self.topics]
        for t in created:
            self.create_topic(t, topics[t])
        return created

    async def ensure_topic(self, topic: str, partitions: int = 1) -> bool:
        created = await self.create_topics({topic: partitions})
        if topic not in self.topics:
            raise TopicNotCreated(f"topic {topic!r} does not exist, and the cluster did not create it")
        return bool(created)

    async def delete_topics(self, topics: Collection[str]) -> None:
        await anyio.lowlevel.checkpoint()
        for t in topics:
            self.topics.pop(t, None)

    async def partitions(self, topic: str) -> list[int]:
        await anyio.lowlevel.checkpoint()
        return list(range(len(self._parts(topic))))

    async def missing_topics(self, topics: Collection[str]) -> list[str]:
        await anyio.lowlevel.checkpoint()
        self._check("admin")
        return [t for t in topics if t not in self.topics]

    # -- the port: offsets -------------------------------------------------------------------------

    async def log_offsets(self, tps: Collection[TopicPartition], which: Literal["start", "end"]
                          ) -> dict[TopicPartition, int]:
        await anyio.lowlevel.checkpoint()
        out = {}
        for tp in tps:
            part = self._parts(tp.topic)[tp.partition]
            out[tp] = part.log_start if which == "start" else part.log_end
        return out

    async def offsets_for_time(self, tps: Collection[TopicPartition], ms: int) -> dict[TopicPartition, int | None]:
        await anyio.lowlevel.checkpoint()
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            found = [r.offset for r in self._parts(tp.topic)[tp.partition].records if r.timestamp >= ms]
            out[tp] = found[0] if found else None
        return out

    @asynccontextmanager
    async def offset_reader(self) -> AsyncIterator[MemoryBroker]:
        yield self

    async def group_offsets(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int | None]:
        await anyio.lowlevel.checkpoint()
        committed = self._group(group).committed
        return {tp: committed.get(tp) for tp in tps}

    async def commit_group(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        await anyio.lowlevel.checkpoint()
        g = self._group(group)
        if g.members:
            raise KafkaCommitFailed(f"group {group!r} has active members; a commit from outside is refused")
        g.committed.update(offsets)


class MemorySource:
    """A consumer of the twin (see the module docstring for the group protocol it follows)."""

    def __init__(self, broker: MemoryBroker, group_id: str | None) -> None:
        self.broker = broker
        self.group_id = group_id
        self.topics: list[str] = []
        self.listener: AssignmentListener | None = None
        self.held: set[TopicPartition] = set()
        self.pending: set[TopicPartition] | None = None  # a new assignment to deliver at the next fetch
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.started = False

    def __repr__(self) -> str:
        return f"MemorySource(group={self.group_id!r}, held={sorted(map(str, self.held))})"

    def subscribe(self, topics: Sequence[str], listener: AssignmentListener) -> None:
        self.topics = list(topics)
        self.listener = listener

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self.held = set(partitions)
        for tp in partitions:
            self._position_from_commit(tp)

    def _position_from_commit(self, tp: TopicPartition) -> None:
        committed = self.broker._group(self.group_id).committed.get(tp) if self.group_id else None
        part = self.broker._parts(tp.topic)[tp.partition]
        self.positions[tp] = part.log_start if committed is None else committed

    async def start(self) -> None:
        await anyio.lowlevel.checkpoint()
        self.started = True
        if self.topics and self.group_id is not None:
            self.broker._join(self.group_id, self)

    async def stop(self) -> None:
        await anyio.lowlevel.checkpoint()
        if self.started and self.topics and self.group_id is not None:
            self.broker._leave(self.group_id, self)
        self.started = False

    async def _deliver_rebalance(self) -> None:
        new, self.pending = self.pending, None
        if new is None or self.listener is None:
            return
        old = set(self.held)
        await self.listener.on_revoked(sorted(old, key=_order))  # still held: its commits go through
        for tp in old:
            self.positions.pop(tp, None)
            self.paused.discard(tp)
        self.held = set(new)
        for tp in new:
            self._position_from_commit(tp)
        await self.listener.on_assigned(sorted(new, key=_order))

    async def fetch(self, timeout_ms: int, max_records: int) -> Mapping[TopicPartition, Sequence[KafkaRecord]]:
        self.broker._check("fetch")
        if timeout_ms <= 0:  # what is in hand now, without waiting (a pending rebalance is delivered first)
            if self.pending is not None:
                await self._deliver_rebalance()
            return self._collect(max_records)
        with anyio.move_on_after(timeout_ms / 1000):
            while True:
                if self.pending is not None:
                    await self._deliver_rebalance()
                got = self._collect(max_records)
                if got:
                    return got
                await self.broker._data.wait()
        return {}

    def _collect(self, max_records: int) -> dict[TopicPartition, list[KafkaRecord]]:
        out: dict[TopicPartition, list[KafkaRecord]] = {}
        room = max_records
        for tp in sorted(self.held - self.paused, key=_order):
            part = self.broker._parts(tp.topic)[tp.partition]
            position = max(self.positions.get(tp, part.log_start), part.log_start)
            taken: list[KafkaRecord] = []
            for r in part.records:
                if r.offset >= position:
                    taken.append(r)
                    if len(taken) >= room:
                        break
            if taken:
                out[tp] = taken
                room -= len(taken)
                self.positions[tp] = taken[-1].offset + 1
            elif position < part.log_end:
                self.positions[tp] = part.log_end  # only never-delivered offsets left
            if room <= 0:
                break
        return out

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        await anyio.lowlevel.checkpoint()
        self.broker._check("commit")
        if self.group_id is None:
            raise KafkaError("a group-less consumer cannot commit")
        not_held = [str(tp) for tp in offsets if tp not in self.held]
        if not_held or self.pending is not None:
            raise KafkaCommitFailed(f"group {self.group_id!r} is rebalancing; {not_held or 'nothing'} not held")
        self.broker._group(self.group_id).committed.update(offsets)
        self.broker.commits += 1

    async def committed(self, tp: TopicPartition) -> int | None:
        await anyio.lowlevel.checkpoint()
        self.broker._check("committed")
        return self.broker._group(self.group_id).committed.get(tp) if self.group_id else None

    async def position(self, tp: TopicPartition) -> int:
        await anyio.lowlevel.checkpoint()
        self.broker._check("position")
        if tp not in self.held:
            raise KafkaError(f"{tp} is not assigned to this consumer")
        part = self.broker._parts(tp.topic)[tp.partition]
        return max(self.positions.get(tp, part.log_start), part.log_start)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)
        self.broker._wake()

    def assignment(self) -> set[TopicPartition]:
        return set(self.held)


class MemorySink:
    """A producer of the twin: every send is acknowledged at once unless a failure was asked for."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker
        self.sent = 0

    async def start(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def stop(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   headers: Sequence[tuple[str, bytes | None]] | None = None) -> Awaitable[None]:
        await anyio.lowlevel.checkpoint()
        self.broker._check("send")
        self.broker.produce(topic, value, key=key, headers=headers or ())
        self.sent += 1
        return anyio.lowlevel.checkpoint()

    async def send_and_wait(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                            headers: Sequence[tuple[str, bytes | None]] | None = None) -> None:
        await (await self.send(topic, value, key=key, headers=headers))


def _order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition
