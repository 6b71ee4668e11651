"""Apache Flume as the benchmark peer: its agent configuration, row keys, split keys, metrics and
classpath, as pure functions (no I/O; :mod:`bench.peer_provision` and :mod:`bench.peer_procs` do it).

The agent is ``KafkaSource -> memory channel -> HBase2Sink`` with Flume's regex serializer, which
writes the three cells the ``bench_worker`` design writes (``l:v`` value, ``l:lv`` level, ``l:m``
message, each the event's JSON text of that field) under a row key it can take from the event:
one regex group, ``<hostname>","log_event":"<log_event>","timestamp":<timestamp>`` (unique per
event, leading with the host). Flume cannot compute the design's salt byte, so its table is split
at quantiles of those keys instead (:func:`split_keys`), into as many regions as the design's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COLUMNS",
    "EVENT_REGEX",
    "FLUME_VERSION",
    "FlumeAgent",
    "PeerRun",
    "agent_properties",
    "drained",
    "jar_artifact",
    "merge_classpath",
    "row_key",
    "split_keys",
]

FLUME_VERSION = "1.11.0"

#: The serializer's pattern for a ``logs`` example event (orjson's compact field order). Group 1
#: is the row key, then level, value and message; the whole body must match (Java's
#: ``Matcher.matches``), else Flume writes nothing for that event. Every quantifier is possessive
#: and the message's escapes are matched as an unrolled loop (runs of plain characters, then one
#: escape): an alternation tried per character, with backtracking, cost Flume's JVM about twice the
#: CPU per event. Python's ``re`` reads the same syntax (3.11+).
EVENT_REGEX = (r'\{"hostname":"([^"]++","log_event":"[^"]++","timestamp":\d++),"level":"([^"]*+)",'
               r'"value":([^,]++),"dc":"[^"]*+","message":"([^"\\]*+(?:\\.[^"\\]*+)*+)",.*')
#: ``serializer.colNames``: one name per regex group; ``ROW_KEY`` marks the row key's group.
COLUMNS = ("ROW_KEY", "lv", "v", "m")

_EVENT = re.compile(EVENT_REGEX, re.DOTALL)


def row_key(body: bytes) -> bytes:
    """The row key Flume's regex serializer gives ``body`` (UTF-8 of regex group 1). Raises
    ValueError when the body does not match :data:`EVENT_REGEX` (Flume would drop the event)."""
    m = _EVENT.fullmatch(body.decode())
    if m is None:
        raise ValueError(f"event does not match the Flume serializer's regex: {body[:80]!r}")
    return m.group(1).encode()


def split_keys(keys: Iterable[bytes], regions: int) -> list[bytes]:
    """``regions - 1`` split keys at even quantiles of ``keys`` (sorted, distinct). Raises
    ValueError when ``regions`` < 1 or there are fewer distinct keys than regions."""
    if regions < 1:
        raise ValueError(f"regions must be >= 1, got {regions}")
    ordered = sorted(set(keys))
    if len(ordered) < regions:
        raise ValueError(f"{regions} regions need at least {regions} distinct sample keys, got {len(ordered)}")
    return [ordered[len(ordered) * i // regions] for i in range(1, regions)]


@dataclass(frozen=True)
class PeerRun:
    """What one run of a JVM peer reads and writes: the topic from ``bootstrap`` under a fresh ``group``, into a
    fresh ``table`` (family ``family``) of the HBase ZooKeeper ``zookeeper_quorum`` names."""

    bootstrap: str
    topic: str
    group: str
    table: str
    zookeeper_quorum: str
    family: str = "l"


@dataclass(frozen=True)
class FlumeAgent(PeerRun):
    """One Flume agent run (:class:`PeerRun`) and its batch and channel sizes."""

    source_batch: int = 5000
    source_batch_ms: int = 200
    channel_capacity: int = 200_000
    channel_transaction: int = 10_000
    sink_batch: int = 1000
    #: records one poll of the source's consumer returns (Kafka's default 500 caps a 5,000-event batch
    #: at ten polls)
    poll_records: int = 5000


def agent_properties(agent: FlumeAgent, name: str = "agent") -> str:
    """The agent's properties file (``flume-ng ... -n <name>``): source ``r1``, channel ``c1``,
    sink ``k1``. Raises ValueError on an empty value: Flume ignores an empty property and applies
    its default instead, which silently changes the run."""
    src, ch, sink = f"{name}.sources.r1", f"{name}.channels.c1", f"{name}.sinks.k1"
    props: list[tuple[str, str | int]] = [
        (f"{name}.sources", "r1"), (f"{name}.channels", "c1"), (f"{name}.sinks", "k1"),
        (f"{src}.type", "org.apache.flume.source.kafka.KafkaSource"),
        (f"{src}.channels", "c1"),
        (f"{src}.kafka.bootstrap.servers", agent.bootstrap),
        (f"{src}.kafka.topics", agent.topic),
        (f"{src}.kafka.consumer.group.id", agent.group),
        (f"{src}.kafka.consumer.auto.offset.reset", "earliest"),
        (f"{src}.kafka.consumer.max.poll.records", agent.poll_records),
        (f"{src}.batchSize", agent.source_batch),
        (f"{src}.batchDurationMillis", agent.source_batch_ms),
        # the defaults (1 s, then up to 5 s) delay the first writes by seconds while the group forms
        (f"{src}.backoffSleepIncrement", 100),
        (f"{src}.maxBackoffSleep", 500),
        (f"{ch}.type", "memory"),
        (f"{ch}.capacity", agent.channel_capacity),
        (f"{ch}.transactionCapacity", agent.channel_transaction),
        (f"{sink}.type", "hbase2"),
        (f"{sink}.channel", "c1"),
        (f"{sink}.table", agent.table),
        (f"{sink}.columnFamily", agent.family),
        (f"{sink}.zookeeperQuorum", agent.zookeeper_quorum),
        (f"{sink}.znodeParent", "/hbase"),
        (f"{sink}.batchSize", agent.sink_batch),
        (f"{sink}.serializer", "org.apache.flume.sink.hbase2.RegexHBase2EventSerializer"),
        (f"{sink}.serializer.regex", EVENT_REGEX),
        (f"{sink}.serializer.colNames", ",".join(COLUMNS)),
        # without it the serializer generates keys (time + nonce) and writes group 1 as a ROW_KEY cell
        (f"{sink}.serializer.rowKeyIndex", COLUMNS.index("ROW_KEY")),
    ]
    lines = []
    for key, value in props:
        text = str(value)
        if not text.strip():
            raise ValueError(f"Flume property {key} is empty (Flume would ignore it and use its default)")
        # properties files treat a backslash as an escape: double it so the regex arrives intact
        lines.append(f"{key} = {text.replace(chr(92), chr(92) * 2)}")
    return "\n".join(lines) + "\n"


def drained(metrics: bytes | str, sink: str = "k1") -> int:
    """Events the sink has written and HBase acknowledged (``SINK.<sink>.EventDrainSuccessCount``)
    in the agent's ``/metrics`` JSON; 0 before the sink reports. Raises ValueError on a body that
    is not a JSON object."""
    try:
        doc = json.loads(metrics)
    except json.JSONDecodeError as exc:
        raise ValueError(f"Flume metrics are not JSON: {str(metrics)[:80]!r}") from exc
    if not isinstance(doc, dict):
        # a body of another shape is a bad value from the agent, not a caller's type error
        raise ValueError(f"Flume metrics are not a JSON object: {str(metrics)[:80]!r}")  # noqa: TRY004
    entry = doc.get(f"SINK.{sink}") or {}
    return int(entry.get("EventDrainSuccessCount", 0))


# artifactId-version[-classifier].jar as maven-dependency-plugin names copied jars. The version
# starts with a digit; what follows it is qualifiers ("-hadoop3", "-linux-x86_64") or one build
# number ("-6"): so "log4j-1.2-api-2.17.2.jar" is log4j-1.2-api at 2.17.2.
_JAR = re.compile(r"(?P<artifact>.+?)-(?P<version>\d[\w.]*(?:-(?:[A-Za-z][\w.]*|\d+))*)\.jar")
# the first word of a platform classifier (netty's native transports: "linux-x86_64", "osx-aarch_64")
_PLATFORMS = frozenset({"linux", "osx", "windows"})


def jar_artifact(name: str) -> str:
    """The artifactId of a jar file named ``artifactId-version[-classifier].jar``, with its
    classifier when it has one (``netty-transport-native-epoll:linux-x86_64``), so that platform
    variants of one artifact are kept apart. Raises ValueError on another shape of name."""
    m = _JAR.fullmatch(name)
    if m is None:
        raise ValueError(f"not a Maven jar name (artifactId-version.jar): {name!r}")
    version = m.group("version")
    parts = version.split("-")
    at = next((i for i, part in enumerate(parts) if part in _PLATFORMS), None)
    if at is None:
        return m.group("artifact")
    return f"{m.group('artifact')}:{'-'.join(parts[at:])}"


def merge_classpath(first: Sequence[Path], then: Sequence[Path]) -> list[Path]:
    """``first`` in order, then the jars of ``then`` whose artifact is not in ``first`` (first wins:
    one version of each artifact on the classpath). Raises ValueError on a name that is not a jar
    of Maven's naming."""
    seen = {jar_artifact(p.name) for p in first}
    out = list(first)
    for p in then:
        artifact = jar_artifact(p.name)
        if artifact not in seen:
            seen.add(artifact)
            out.append(p)
    return out
