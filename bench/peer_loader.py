"""HBase's native ceiling for the peer benchmark: ``infra/loader/BufferedMutatorLoader.java`` run on
the stack's cached jars, writing prebuilt rows (the ``bench_worker`` design's keys and cells) through
one BufferedMutator. :func:`encode_rows` writes the file it reads (its format is in the Java source).
"""

from __future__ import annotations

import json
import struct
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from devstack.launch import HBASE_JDK17

__all__ = ["LOADER_JDK_FLAGS", "Row", "encode_rows", "loader_command", "run_loader"]

#: key, cells (b"family:qualifier" -> value), cell timestamp in ms
Row = tuple[bytes, Mapping[bytes, bytes], int]


#: the HBase JVM's JDK 17 flags (--add-opens ...), as the stack starts it: the HBase client in the
#: loader and in Flume needs the same
LOADER_JDK_FLAGS: list[str] = list(HBASE_JDK17)


def encode_rows(rows: Iterable[Row]) -> bytes:
    """The loader's rows file (big-endian): int32 row count, then per row uint16 key length, key,
    int64 timestamp, uint8 cell count, and per cell uint16 family length, family, uint16
    qualifier length, qualifier, int32 value length, value. Raises ValueError on a column
    without ``:``, an empty key, or a key, family, qualifier or cell count too long for its field."""
    parts: list[bytes] = []
    count = 0
    for key, cells, ts in rows:
        if not key or len(key) > 0xFFFF:
            raise ValueError(f"row key of {len(key)} bytes: must be 1..65535")
        if len(cells) > 0xFF:
            raise ValueError(f"row {key!r} has {len(cells)} cells: at most 255")
        parts.append(struct.pack(">H", len(key)) + key + struct.pack(">qB", ts, len(cells)))
        for column, value in cells.items():
            family, sep, qualifier = column.partition(b":")
            if not sep or not family:
                raise ValueError(f"column {column!r} of row {key!r} is not family:qualifier")
            if len(family) > 0xFFFF or len(qualifier) > 0xFFFF:
                raise ValueError(f"column {column[:40]!r} is too long")
            parts.append(struct.pack(">H", len(family)) + family + struct.pack(">H", len(qualifier)) + qualifier
                         + struct.pack(">i", len(value)) + value)
        count += 1
    return struct.pack(">i", count) + b"".join(parts)


def loader_command(source: Path, classpath: Sequence[Path] | str, quorum: str, zk_port: int, table: str,
                   rows_file: Path, buffer_mb: int = 8) -> list[str]:
    """The ``java`` command line running the loader's single-file source on ``classpath``."""
    cp = classpath if isinstance(classpath, str) else ":".join(str(p) for p in classpath)
    return ["java", "-Xmx1g", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true", *LOADER_JDK_FLAGS,
            "-cp", cp, str(source), quorum, str(zk_port), table, str(rows_file), str(buffer_mb)]


def run_loader(cmd: Sequence[str], log: Path, on_ready: Callable[[], None] = lambda: None,
               on_done: Callable[[], None] = lambda: None, timeout_s: float = 1800) -> dict[str, Any]:
    """Run the loader, calling ``on_ready`` when it starts writing and ``on_done`` when its result
    line arrives (to read meters over exactly the writes); returns that line (rows, seconds,
    rows_per_s). Raises RuntimeError with the log's last lines when it fails or prints no result."""
    result: dict[str, Any] | None = None
    with open(log, "wb") as err, subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=err) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line == "ready":
                on_ready()
            elif line.startswith("{"):
                on_done()
                result = dict(json.loads(line))
        code = proc.wait(timeout=timeout_s)
    if code != 0 or result is None:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"the BufferedMutator loader failed (exit {code}); see {log}:\n{tail}")
    return result
