"""The acknowledgement ledger: a diagnostic record, per written batch, of what HBase acknowledged.

Off by default (``[writer] ack_ledger_dir``). When on, each worker process appends JSON lines to
``<dir>/acks-<pid>.jsonl``; a restarted worker gets a new file (a new pid), so a run of several
workers killed and restarted leaves one file per process. Each line is written with one ``write``
to a file opened with ``O_APPEND`` and is in the kernel's page cache when ``write`` returns: a worker
killed with SIGKILL loses no line it wrote. It costs one system call and one small JSON line per
batch attempt: a diagnostic for fault hunts, not for steady-state runs.

Line layout (times are wall-clock milliseconds since the epoch, to line up with the servers' logs)::

    {"ev": "ack",   "sent_ms": int, "ack_ms": int, "table": str, "regions": [str, ...], "server": str,
     "gateway": str, "attempt": int, "rows": [[partition, offset, "rowkey hex"], ...]}
    {"ev": "retry", "sent_ms": int, "fail_ms": int, "table": str, "regions": [str, ...], "server": str,
     "attempt": int, "error": str, "n": int}
    {"ev": "refused", ... as retry ...}

``regions`` names the regions of the batch's rows and ``server`` the region server the worker's region
map named for them when the batch was sealed (the gateway's own HBase client may have found them
elsewhere); ``gateway`` is the
gateway whose reply acknowledged the batch; ``rows`` holds each mutation's source partition, offset
and row key. An ``ack`` line means: the gateway answered ``putMultiple``/``deleteMultiple`` with
success for every row of the batch.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson

from pipeline.core.ingest.batcher import Batch

__all__ = ["AckLedger"]


class AckLedger:
    """Appends the lines of the module docstring to ``<directory>/acks-<pid>.jsonl``."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"acks-{os.getpid()}.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _line(self, record: dict[str, object]) -> None:
        os.write(self._fd, orjson.dumps(record) + b"\n")

    def acknowledged(self, batch: Batch, sent_ms: int, gateway: str | None, attempt: int) -> None:
        rows = [[m.origin.tp.partition, m.origin.offset, m.row.hex()] for m in batch.mutations]
        self._line({"ev": "ack", "sent_ms": sent_ms, "ack_ms": now_ms(), "table": batch.table,
                    "regions": list(batch.regions), "server": batch.server, "gateway": gateway,
                    "attempt": attempt, "rows": rows})

    def failed(self, batch: Batch, sent_ms: int, attempt: int, error: str, refused: bool = False) -> None:
        self._line({"ev": "refused" if refused else "retry", "sent_ms": sent_ms, "fail_ms": now_ms(),
                    "table": batch.table, "regions": list(batch.regions), "server": batch.server,
                    "attempt": attempt, "error": error, "n": batch.rows})

    def close(self) -> None:
        os.close(self._fd)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
