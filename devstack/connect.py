"""Kafka Connect of the CDC stack: a standalone worker running the Debezium PostgreSQL connector (pure:
settings and paths in, properties, argv and a status verdict out).

**Worker** (:func:`worker_properties`): Kafka at ``127.0.0.1:<kafka_port>`` (plaintext), REST on
``http://127.0.0.1:<connect_port>``, ``plugin.path`` = the cached Debezium plugin (found through its
service manifests, no class scanning), source offsets in ``<state>/connect/offsets.dat``.
``offset.flush.interval.ms`` is 1000 (Kafka's default: 60000): a standalone worker writes its offsets
file only at a flush, and Debezium confirms a position to the replication slot only once it is
flushed. With a minute, a restarted or killed Connect re-sends up to a minute of change events and
PostgreSQL keeps that much more WAL; with a second, both stay small on a local stack.

**Converters**: ``JsonConverter`` for keys and values, with ``schemas.enable=false`` for both: a
record's key is the row's primary key as a plain JSON object (``{"order_id": 42}``) and its value the
plain Debezium envelope (``before``, ``after``, ``source``, ``op``, ``ts_ms``, ...), not wrapped in
``{"schema": ..., "payload": ...}``, which is what a JSON consumer reads and a fraction of the size.

**Connector** (:func:`connector_properties`, named :data:`CONNECTOR_NAME`): ``plugin.name=pgoutput``
(PostgreSQL's built-in logical decoding output: no server plugin to install); the publication and the
slot are the stack's (``publication.autocreate.mode=disabled``: Debezium must not widen it); the
captured tables ``[stack] cdc_tables`` plus the readiness probe's; topics ``<cdc_topic_prefix>.<schema>.
<table>``, created by Connect with 1 partition and replication factor 1 (the broker does not create
topics on demand); ``snapshot.mode=initial`` (existing rows as ``op: r`` events when there are no
offsets); ``tombstones.on.delete`` left at Debezium's default, true: a delete is followed by a record
with the same key and a null value, so that a compacted topic can drop the key; ``poll.interval.ms``
100 (default 500) so that a change reaches Kafka in well under a second. The CDC user's password is
not in the connector's configuration: ``${file:...}`` makes the worker's ``FileConfigProvider`` read it
from its 0600 file when the connector starts (the REST API shows the reference, not the password).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from .layout import StackLayout
from .pgserver import CDC_USER, DATABASE, PUBLICATION, SLOT, captured_tables
from .settings import StackSettings

__all__ = [
    "CONNECTOR_NAME",
    "connect_argv",
    "connector_problem",
    "connector_properties",
    "render_properties",
    "table_pattern",
    "topic_of",
    "worker_properties",
]

CONNECTOR_NAME = "hbase-ingest-cdc"
_JSON = "org.apache.kafka.connect.json.JsonConverter"
_JVM = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:OnOutOfMemoryError=kill -9 %p", "-Djava.awt.headless=true"]


def topic_of(s: StackSettings, table: str) -> str:
    """The topic of ``table``'s (``schema.table``) change events."""
    return f"{s.cdc_topic_prefix}.{table}"


def table_pattern(table: str) -> str:
    """``table.include.list`` takes regular expressions matched against the whole ``schema.table``:
    escape the dot, which would match any character."""
    return table.replace(".", "\\.")


def worker_properties(s: StackSettings, lay: StackLayout) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{s.kafka_port}",
        "listeners": f"http://127.0.0.1:{s.connect_port}",
        "key.converter": _JSON,
        "value.converter": _JSON,
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "offset.storage.file.filename": str(lay.connect_state / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "plugin.path": str(lay.connect_plugins),
        "plugin.discovery": "service_load",
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    }


def connector_properties(s: StackSettings, password_file: Path) -> dict[str, str]:
    """The Debezium connector's configuration. Raises ValueError when ``password_file``'s path has a
    ``:`` or ``}``, which a ``${file:path:key}`` reference cannot hold."""
    if ":" in str(password_file) or "}" in str(password_file):
        raise ValueError(f"the password file's path {password_file} has a ':' or '}}': move the state folder")
    return {
        "name": CONNECTOR_NAME,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": str(s.postgres_port),
        "database.user": CDC_USER,
        "database.password": f"${{file:{password_file}:password}}",
        "database.dbname": DATABASE,
        "topic.prefix": s.cdc_topic_prefix,
        "table.include.list": ",".join(table_pattern(t) for t in captured_tables(s)),
        "publication.name": PUBLICATION,
        "publication.autocreate.mode": "disabled",
        "slot.name": SLOT,
        "snapshot.mode": "initial",
        "poll.interval.ms": "100",
        "topic.creation.default.partitions": "1",
        "topic.creation.default.replication.factor": "1",
    }


def render_properties(props: Mapping[str, str], header: str = "") -> str:
    """``props`` as a Java properties file: backslashes doubled (the format's escape character), and
    ``=``, ``:`` and spaces in keys escaped; one ``key=value`` line each, in the given order."""
    def esc(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n")
        if key:
            for ch in ("=", ":", " "):
                text = text.replace(ch, "\\" + ch)
        elif text.startswith(" "):
            text = "\\" + text
        return text

    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{esc(k, True)}={esc(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def connect_argv(s: StackSettings, lay: StackLayout, worker: Path, connector: Path) -> list[str]:
    heap = s.connect_heap_mb
    return ["java", f"-Xms{max(64, heap // 4)}m", f"-Xmx{heap}m", *_JVM,
            f"-Dlog4j2.configurationFile={lay.conf / 'log4j2.properties'}", "-cp", f"{lay.connect_lib}/*",
            "org.apache.kafka.connect.cli.ConnectStandalone", str(worker), str(connector)]


def connector_problem(status: str | Mapping[str, object]) -> str | None:
    """None when the connector's status (``GET /connectors/<name>/status``, as text or parsed) has the
    connector and at least one task RUNNING; else one line saying what is not, with the first line of
    a failed task's trace."""
    data = json.loads(status) if isinstance(status, str) else status
    connector = data.get("connector") if isinstance(data, Mapping) else None
    tasks = data.get("tasks") if isinstance(data, Mapping) else None
    if not isinstance(connector, Mapping) or not isinstance(tasks, list):
        return "Kafka Connect returned a status without a connector and tasks"
    if connector.get("state") != "RUNNING":
        return f"connector {CONNECTOR_NAME} is {connector.get('state')}{_trace(connector)}"
    if not tasks:
        return f"connector {CONNECTOR_NAME} has no task yet"
    for task in tasks:
        if isinstance(task, Mapping) and task.get("state") != "RUNNING":
            return f"task {task.get('id')} of {CONNECTOR_NAME} is {task.get('state')}{_trace(task)}"
    return None


def _trace(entry: Mapping[str, object]) -> str:
    trace = str(entry.get("trace") or "").strip()
    if not trace:
        return ""
    line = trace.splitlines()[0]
    return ": " + (line if len(line) <= 240 else line[:237] + "...")
