"""What makes a backfill resumable: its state file and the start offsets of its consumer group.

The resolved slice (:mod:`pipeline.runtime.backfill.slice`) is stored as JSON in the state directory
(``$XDG_STATE_HOME/hbase-ingest/backfill/<group>.json``, default ``~/.local/state/...``), keyed by
the consumer group, whose default name hashes the slice arguments
(``<group_id>.backfill.<topic>.<digest>``). Before the worker starts, ``start`` is committed for
every partition without a commit in that group; the worker then resumes from the group's commits,
which only ever cover offsets HBase acknowledged. Interrupted and started again with the same
arguments, a backfill continues where it stopped: no gaps; what was written after the last commit is
written again, with the same cell timestamps, i.e. rewritten identically (routes should set
``timestamp_field``; ``increment`` counters are not replay-safe).

A finished slice is marked ``completed`` in its state file; running it again does nothing unless
``restart`` is set, which resolves the slice anew and commits its start offsets again.

The state file holds ``version`` (:data:`STATE_VERSION`), ``topic`` and per-partition ``start`` and
``end`` (partition numbers as strings), plus what :class:`~pipeline.runtime.backfill.run.Backfill`
records: the group, the canonical arguments, when it was resolved and whether it completed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.core.model import TopicPartition
from pipeline.errors import ConfigError
from pipeline.ports import Broker
from pipeline.runtime.backfill.slice import ResolvedSlice

__all__ = [
    "STATE_VERSION",
    "commit_start_offsets",
    "default_state_dir",
    "load_state",
    "save_state",
    "slice_from_state",
    "state_path",
]

#: the state file format; a file of another version is refused, never guessed at
STATE_VERSION = 1


# -- state file ----------------------------------------------------------------------------------


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/hbase-ingest/backfill``, or ``~/.local/state/hbase-ingest/backfill``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hbase-ingest" / "backfill"


def state_path(state_dir: Path, group: str) -> Path:
    """The state file of ``group``: its name with characters outside ``[A-Za-z0-9._-]`` as ``_``."""
    return state_dir / (re.sub(r"[^A-Za-z0-9._-]", "_", group) + ".json")


def load_state(path: Path) -> dict[str, Any] | None:
    """The stored state, or ``None`` when there is no file. Raises :class:`ConfigError` when the file
    is unreadable or of another :data:`STATE_VERSION`."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except NotADirectoryError as exc:  # a parent of the state dir is a file: the file is not the problem
        raise ConfigError(f"backfill state folder {path.parent} cannot exist: a part of its path is a "
                          f"file ({exc.strerror}); choose another --state-dir") from exc
    except (OSError, ValueError) as exc:
        raise ConfigError(f"backfill state file {path} is unreadable ({exc}); delete it or pass --restart") from exc
    if data.get("version") != STATE_VERSION:
        raise ConfigError(f"backfill state file {path} has an unknown version; delete it or pass --restart")
    return data


def save_state(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` atomically (a temporary file, then a rename), creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def slice_from_state(data: Mapping[str, Any]) -> ResolvedSlice:
    """The slice a state file stores."""
    return ResolvedSlice(
        str(data["topic"]),
        {int(p): int(o) for p, o in data["start"].items()},
        {int(p): int(o) for p, o in data["end"].items()},
    )


# -- consumer group ------------------------------------------------------------------------------


async def commit_start_offsets(
    kafka: Broker, group: str, slice_: ResolvedSlice, *, overwrite: bool = False
) -> dict[int, int]:
    """Commit ``start`` in ``group`` for every partition without a commit (every partition when
    ``overwrite``). Returns the group's committed offsets afterwards. Raises
    :class:`~pipeline.errors.KafkaError`."""
    tps = {p: TopicPartition(slice_.topic, p) for p in slice_.start}
    current = {} if overwrite else await kafka.group_offsets(group, list(tps.values()))
    committed: dict[int, int] = {}
    to_commit: dict[TopicPartition, int] = {}
    for p, tp in tps.items():
        found = current.get(tp)
        if found is None:
            to_commit[tp] = committed[p] = slice_.start[p]
        else:
            committed[p] = found
    await kafka.commit_group(group, to_commit)
    return committed
