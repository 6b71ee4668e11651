"""Apache Flink as the benchmark peer: its SQL job, Flink settings, row keys, classpath and command
line, as pure functions (no I/O; :mod:`bench.peer_provision` and :mod:`bench.bench_peer` do it).

The job (``infra/flink/FlinkPeerJob.java``) runs a local MiniCluster in one JVM (heap 1 GB,
parallelism 2, a checkpoint every 5 s) executing Flink SQL: a Kafka source table over the bench's
topic (``format = json``, from the earliest offset, a fresh group per run), an HBase sink table
(``connector = hbase-2.2``; its buffer flushes at 2,000 rows, 4 MB or 200 ms, as hbase-ingest's
batches seal) and ``INSERT INTO ... SELECT`` writing the three cells the ``bench_worker`` design
writes (``l:v`` value, ``l:lv`` level, ``l:m`` message, each the event's JSON text of that field,
as Flume's) under the row key ``<hostname>|<log_event>|<timestamp>`` built in SQL (unique per
event, leading with the host, as Flume's). Like Flume, Flink cannot compute the design's salt byte:
its table is split at quantiles of its own keys (:func:`bench.peer_flume.split_keys`).

Delivery: the Kafka source commits its offsets when a checkpoint completes, and each checkpoint
flushes the HBase sink first: at-least-once, offsets behind the rows by up to one interval.

Progress: Flink has no "rows written" metric. The sink table sets HBase's
``hbase.client.connection.impl`` to the job's ``CountingConnection``, whose BufferedMutator counts
a row as written once a ``flush()`` after it returns (HBase acknowledged it); the job prints
``{"written": N}`` lines like the hbase-ingest child (:func:`bench.peer_ingest.parse_progress`).
Every row is also counted in HBase after the run.

Latency (:mod:`bench.bench_steady`): the same wrapper puts each acknowledged Put's milliseconds from
its event's timestamp (the row key's third field) into a histogram of 1 ms buckets, printed every
second while it changes as ``{"latency_hist": [[ms, puts], ...], "flushes": F}``. Its cost, in the
sink's own threads: per Put, the key's digits parsed at ``mutate()`` and one subtraction and array
increment at the acknowledgement; per mutate() call one lock, per flush three locks and two atomic
adds.

The sink merges the Puts of one buffer that share a row key (the newest wins) before they reach the
wrapper. Events of one millisecond, host and log event share ``hostname|log_event|timestamp``, so
a topic produced at thousands of events a second (each stamped when sent) would lose Puts there;
``job_sql(..., offset_in_key=True)`` appends ``|<partition>|<offset>`` of the Kafka record, which
makes every event its own Put (``bench_steady``; the peer benchmark's generated events have
distinct keys and keep the plain one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .peer_flume import PeerRun, jar_artifact

__all__ = [
    "ABSENT",
    "COUNTING_CONNECTION",
    "FLINK_HBASE_VERSION",
    "FLINK_JDK17",
    "FLINK_KAFKA_VERSION",
    "FLINK_VERSION",
    "JOB_CLASS",
    "PINS",
    "FlinkJob",
    "config_properties",
    "flink_classpath",
    "flink_command",
    "flink_config",
    "jar_version",
    "job_sql",
    "row_key",
    "sql_literal",
]

FLINK_VERSION = "1.19.3"
FLINK_KAFKA_VERSION = "3.3.0-1.19"
FLINK_HBASE_VERSION = "4.0.0-1.19"

#: artifact -> the version infra/flink/pom.xml pins (Flink 1.19's parent pom, HBase 2.2.3's
#: ZooKeeper); hadoop-common 2.8.5 would otherwise bring older ones, and commons-compress 1.4.1
#: crashes Flink at start (NoClassDefFoundError: org/apache/commons/compress/utils/Sets)
PINS: Mapping[str, str] = {
    "commons-compress": "1.26.0",
    "commons-io": "2.15.1",
    "commons-codec": "1.15",
    "commons-lang3": "3.12.0",
    "zookeeper": "3.4.10",
    "slf4j-api": "1.7.36",
    "log4j-core": "2.17.1",
}
#: artifacts the pom excludes: Hadoop's log4j 1 and its SLF4J binding (a second binding beside log4j 2's)
ABSENT = frozenset({"log4j", "slf4j-log4j12"})

#: the job's main class and the HBase connection class it counts rows with (infra/flink/FlinkPeerJob.java)
JOB_CLASS = "FlinkPeerJob"
COUNTING_CONNECTION = "FlinkPeerJob$CountingConnection"

#: what Flink's own conf.yaml passes to its JVMs on JDK 17 (env.java.opts.all)
FLINK_JDK17: tuple[str, ...] = (
    *(f"--add-exports={p}=ALL-UNNAMED" for p in (
        "java.base/sun.net.util", "java.rmi/sun.rmi.registry", "java.security.jgss/sun.security.krb5")),
    *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text",
        "java.time", "java.util", "java.util.concurrent", "java.util.concurrent.atomic",
        "java.util.concurrent.locks")),
)


@dataclass(frozen=True)
class FlinkJob(PeerRun):
    """One Flink job run (:class:`~bench.peer_flume.PeerRun`) and how it runs."""

    parallelism: int = 2
    checkpoint_interval_s: int = 5
    flush_max_rows: int = 2000
    flush_max_size: str = "4mb"
    flush_interval_ms: int = 200
    #: records per poll of the source's Kafka consumer (the client's default is 500): with 500 the job
    #: ran at about 30k events/s with both task threads waiting on the source; 5,000 (what hbase-ingest
    #: and Flume are given) about doubled it, and 20,000 gained nothing more
    max_poll_records: int = 5000
    heap_mb: int = 1024


def row_key(event: Mapping[str, Any]) -> bytes:
    """The row key the job's SQL builds for ``event``: UTF-8 of ``hostname|log_event|timestamp``
    (the timestamp's JSON text, an integer). Raises KeyError when a field is missing (the SQL key
    would be NULL and the sink would fail)."""
    return f"{event['hostname']}|{event['log_event']}|{int(event['timestamp'])}".encode()


def sql_literal(text: str) -> str:
    """``text`` as a Flink SQL string literal (single quotes doubled). Raises ValueError on an
    empty text or one holding a line break or ``;`` (the job splits statements at ``;`` + end
    of line, and an empty option would silently mean the connector's default)."""
    if not text.strip():
        raise ValueError("an empty SQL option value")
    if any(c in text for c in "\r\n;"):
        raise ValueError(f"SQL option value {text!r} holds a line break or ';'")
    return "'" + text.replace("'", "''") + "'"


def _with(options: Iterable[tuple[str, str | int]]) -> str:
    return ",\n".join(f"  {sql_literal(k)} = {sql_literal(str(v))}" for k, v in options)


def job_sql(job: FlinkJob, *, offset_in_key: bool = False) -> str:
    """The job's statements, each ending with ``;`` at the end of a line: ``CREATE TABLE src``
    (Kafka), ``CREATE TABLE sink`` (HBase) and ``INSERT INTO sink SELECT ... FROM src``. The
    source declares the used fields as STRING, so each cell holds the field's JSON text (a
    number's digits as sent). With ``offset_in_key``, the row key ends with ``|<partition>|<offset>``
    of the Kafka record (the source's metadata columns), unique per event (see the module
    docstring). Raises ValueError on an empty or unsafe name (see :func:`sql_literal`)."""
    source = _with([
        ("connector", "kafka"),
        ("topic", job.topic),
        ("properties.bootstrap.servers", job.bootstrap),
        ("properties.group.id", job.group),
        ("scan.startup.mode", "earliest-offset"),
        ("format", "json"),
        ("properties.max.poll.records", job.max_poll_records),
    ])
    sink = _with([
        ("connector", "hbase-2.2"),
        ("table-name", job.table),
        ("zookeeper.quorum", job.zookeeper_quorum),
        ("zookeeper.znode.parent", "/hbase"),
        ("sink.buffer-flush.max-rows", job.flush_max_rows),
        ("sink.buffer-flush.max-size", job.flush_max_size),
        ("sink.buffer-flush.interval", f"{job.flush_interval_ms}ms"),
        # the row count the harness watches (see the module docstring)
        ("properties.hbase.client.connection.impl", COUNTING_CONNECTION),
    ])
    fam = job.family
    if not fam.isidentifier():
        raise ValueError(f"column family {fam!r} is not a plain SQL identifier")
    metadata = ("kafka_partition INT METADATA FROM 'partition' VIRTUAL,\n"
                "  kafka_offset BIGINT METADATA FROM 'offset' VIRTUAL,\n  ") if offset_in_key else ""
    suffix = ", '|', CAST(kafka_partition AS STRING), '|', CAST(kafka_offset AS STRING)" if offset_in_key else ""
    return (
        "CREATE TABLE src (\n"
        "  hostname STRING,\n  log_event STRING,\n  `timestamp` STRING,\n"
        f"  `level` STRING,\n  `value` STRING,\n  {metadata}message STRING\n"
        f") WITH (\n{source}\n);\n"
        "CREATE TABLE sink (\n"
        f"  rowkey STRING,\n  {fam} ROW<v STRING, lv STRING, m STRING>,\n"
        "  PRIMARY KEY (rowkey) NOT ENFORCED\n"
        f") WITH (\n{sink}\n);\n"
        "INSERT INTO sink\n"
        f"SELECT CONCAT(hostname, '|', log_event, '|', `timestamp`{suffix}), ROW(`value`, `level`, message)\n"
        "FROM src;\n"
    )


def flink_config(job: FlinkJob) -> dict[str, str]:
    """The MiniCluster's Flink configuration: ``job.parallelism`` (slots to match), a checkpoint
    every ``job.checkpoint_interval_s`` in at-least-once mode (the HBase sink is at-least-once
    whatever the mode; this skips barrier alignment), and a REST endpoint on a free port."""
    return {
        "parallelism.default": str(job.parallelism),
        "taskmanager.numberOfTaskSlots": str(job.parallelism),
        "execution.checkpointing.interval": f"{job.checkpoint_interval_s} s",
        "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "rest.bind-port": "0",
        "pipeline.name": f"bench-peer-{job.table}",
    }


def config_properties(config: Mapping[str, str]) -> str:
    """``config`` as a Java properties file (``key=value`` lines, sorted). Raises ValueError on an
    empty value or one holding a backslash or line break (escapes this writer does not do)."""
    lines = []
    for key, value in sorted(config.items()):
        if not value.strip() or any(c in key + value for c in "\\\r\n"):
            raise ValueError(f"Flink setting {key}={value!r} is empty or needs escaping")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def jar_version(name: str) -> str:
    """The version of a jar named ``artifactId-version.jar`` (no classifier). Raises ValueError on
    another shape of name, or one with a platform classifier."""
    artifact = jar_artifact(name)
    if ":" in artifact:
        raise ValueError(f"{name!r} has a platform classifier")
    return name[len(artifact) + 1:-len(".jar")]


def flink_classpath(jars: Sequence[Path], classes: Path) -> list[Path]:
    """The job's classpath: ``classes`` (the compiled job), then ``jars`` sorted by name. Raises
    ValueError when a pinned artifact of :data:`PINS` is missing, present twice or at another
    version, or an artifact of :data:`ABSENT` is present. (Other artifact ids may repeat: Maven
    resolves per group, and Hadoop brings both ``asm:asm`` 3.1 and ``org.ow2.asm:asm`` 5.0.4.)"""
    found: dict[str, list[str]] = {}
    for jar in jars:
        found.setdefault(jar_artifact(jar.name), []).append(jar.name)
    for artifact, version in PINS.items():
        names = found.get(artifact, [])
        if not names:
            raise ValueError(f"{artifact} {version} is missing from Flink's jars (infra/flink/pom.xml pins it)")
        if len(names) > 1:
            raise ValueError(f"two versions of {artifact} on Flink's classpath: {', '.join(sorted(names))}")
        if (got := jar_version(names[0])) != version:
            raise ValueError(f"{artifact} is {got} on Flink's classpath, expected {version} "
                             "(infra/flink/pom.xml pins it)")
    present = sorted(ABSENT & found.keys())
    if present:
        raise ValueError(f"{', '.join(present)} must not be on Flink's classpath (the pom excludes them)")
    return [classes, *sorted(jars, key=lambda p: p.name)]


def flink_command(classpath: Sequence[Path], config_file: Path, sql_file: Path, log4j: Path, heap_mb: int,
                  jdk_flags: Sequence[str] = ()) -> list[str]:
    """The ``java`` command line of one job run: at most ``heap_mb`` of heap, G1, IPv4,
    ``jdk_flags`` (e.g. the HBase JVM's) then :data:`FLINK_JDK17`'s flags not among them."""
    flags = list(jdk_flags) + [f for f in FLINK_JDK17 if f not in jdk_flags]
    return ["java", f"-Xmx{heap_mb}m", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true",
            *flags, f"-Dlog4j2.configurationFile={log4j}", "-cp", ":".join(str(p) for p in classpath),
            JOB_CLASS, str(config_file), str(sql_file)]
