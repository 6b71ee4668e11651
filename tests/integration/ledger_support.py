"""Attribution of lost rows from the workers' acknowledgement ledgers (:mod:`pipeline.runtime.ingest.ledger`)
and the HBase servers' logs.

A row that is missing from HBase at the end of a fault test, while every offset was committed, is one
of two things:

- **never acknowledged**: no ledger holds an ``ack`` line with it. The worker committed an offset past
  a row HBase never acknowledged: the client is at fault.
- **acknowledged, then lost**: a gateway answered success for a batch holding it. Then the question
  is when, and by which region server: :func:`attribute` puts each such acknowledgement in a window of
  the fault timeline (before a region server was frozen, while frozen, after it resumed but before it
  aborted as a dead server -- the zombie window -- or after that).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from devstack.webhdfs import WebHdfs

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{3}) ")


def read_ledgers(directory: Path) -> list[dict[str, Any]]:
    """Every line of every ``acks-*.jsonl`` in ``directory`` (a worker killed mid-line leaves at most a
    partial last line, skipped)."""
    out: list[dict[str, Any]] = []
    for path in sorted(directory.glob("acks-*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return out


def log_ms(line: str) -> int | None:
    """The wall-clock milliseconds of an HBase log line (``%d{ISO8601}``, local time), or None."""
    m = _STAMP.match(line)
    if m is None:
        return None
    return int(time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) * 1000) + int(m.group(2))


def first_line_after(log: Path, since_ms: int, pattern: str) -> tuple[int, str] | None:
    """The first line of ``log`` stamped at or after ``since_ms`` that matches ``pattern``."""
    rx = re.compile(pattern)
    for line in log.read_text(errors="replace").splitlines():
        ms = log_ms(line)
        if ms is not None and ms >= since_ms and rx.search(line):
            return ms, line
    return None


def evidence(logs: dict[str, Path], since_ms: int, patterns: list[str], limit: int = 60) -> list[str]:
    """Lines of the servers' ``logs`` (name -> file) stamped at or after ``since_ms`` that match any of
    ``patterns``, each prefixed with its server's name, in time order (at most ``limit``)."""
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    out: list[tuple[int, str]] = []
    for name, log in logs.items():
        if not log.exists():
            continue
        for line in log.read_text(errors="replace").splitlines():
            ms = log_ms(line)
            if ms is not None and ms >= since_ms and rx.search(line):
                out.append((ms, f"{name}: {line[:400]}"))
    return [line for _, line in sorted(out)[:limit]]


def files_holding(root: Path, needles: Iterable[bytes], limit: int = 20) -> dict[str, list[str]]:
    """For each needle (a row key's raw bytes), the files under ``root`` (HBase's root directory:
    its WALs, oldWALs, recovered edits) whose bytes contain it, by path relative to ``root``: where
    an acknowledged edit went (a WAL) and where it did not (the edits a WAL split recovered)."""
    wanted = list(needles)[:limit]
    found: dict[str, list[str]] = {n.hex(): [] for n in wanted}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ("WAL" in str(p) or "recovered.edits" in str(p))):
        data = path.read_bytes()
        for n in wanted:
            if n in data:
                found[n.hex()].append(str(path.relative_to(root)))
    return found


# WAL=file:/<state>/hbase/root/WALs/... on the local filesystem, WAL=hdfs://127.0.0.1:<port>/hbase/WALs/... on HDFS
_SPLIT = re.compile(r"WALSplitter: Processed \d+ edits .*?WAL=(\S+?), size=[^,]*, length=(\d+)")


def wal_tails_after_split(logs: Iterable[Path], root: Path, server: str) -> dict[str, bytes]:
    """What was appended to ``server``'s WAL files (``server`` as in their names: ``localhost,16420,``)
    after HBase's WAL split had read them: per WAL file (its name), the bytes of the archived file
    beyond the length the split log line names. ``root``: a local folder laid out as HBase's root
    directory (on HDFS, a copy of its WAL files: :func:`copy_wal_files`). On a filesystem that fences
    a dead server's WAL (HDFS's lease recovery) this is empty; on the local filesystem, a region server
    that resumes after it was declared dead can still append -- and acknowledge -- edits that no split
    will see."""
    out: dict[str, bytes] = {}
    for log in logs:
        if not log.exists():
            continue
        for m in _SPLIT.finditer(log.read_text(errors="replace")):
            path, length = m.group(1), int(m.group(2))
            if server not in path:
                continue
            name = path.rsplit("/", 1)[-1]
            archived = [p for p in (root / "oldWALs").glob(name)] + [p for p in root.glob(f"WALs/*/{name}")]
            if archived:
                out[name] = archived[0].read_bytes()[length:]
    return out


def copy_wal_files(web: WebHdfs, root: str, dest: Path) -> Path:
    """Copy every WAL, archived WAL and recovered-edits file under ``root`` in HDFS (HBase's root
    directory, e.g. ``/hbase``) into the local folder ``dest``, keeping their relative paths, so that
    :func:`files_holding` and :func:`wal_tails_after_split` read them as on the local filesystem.
    Returns ``dest``."""
    for f in web.walk(root):
        if "WAL" in f.path or "recovered.edits" in f.path:
            local = dest / f.path[len(root):].lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(web.read(f.path))
    return dest


def encoded_region(name: str) -> str:
    """The encoded name of a region (the hex after the last '.' but one of HBase's region name)."""
    return name.rstrip(".").rsplit(".", 1)[-1]


def rows_in(tails: Mapping[str, bytes], ledger: list[dict[str, Any]], lo_ms: int, hi_ms: int) -> set[tuple[str, str]]:
    """(table, row hex) of every row of a batch acknowledged in ``[lo_ms, hi_ms]`` whose key bytes are
    in one of ``tails`` (see :func:`wal_tails_after_split`)."""
    out: set[tuple[str, str]] = set()
    for line in ledger:
        if line.get("ev") != "ack" or not lo_ms <= line["ack_ms"] <= hi_ms:
            continue
        for _, _, row in line["rows"]:
            key = bytes.fromhex(row)
            if any(key in tail for tail in tails.values()):
                out.add((line["table"], row))
    return out


@dataclass
class Attribution:
    missing: int = 0
    never_acknowledged: list[tuple[str, str]] = field(default_factory=list)
    #: window name -> acknowledgements of lost rows in it (the last ack of each row)
    windows: Counter[str] = field(default_factory=Counter)
    #: (gateway, server named by the worker's map) -> lost rows acknowledged through them
    by_route: Counter[tuple[str, str]] = field(default_factory=Counter)
    partitions: Counter[int] = field(default_factory=Counter)
    regions: set[str] = field(default_factory=set)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.missing} rows lost; never acknowledged: {len(self.never_acknowledged)}; "
                f"acknowledged then lost, by window of the last ack: {dict(self.windows)}; "
                f"by (gateway, server): {dict(self.by_route)}; partitions: {dict(self.partitions)}; "
                f"regions: {len(self.regions)}")


def attribute(missing: Mapping[str, Iterable[bytes]], ledger: list[dict[str, Any]],
              windows: list[tuple[str, int, int]]) -> Attribution:
    """``missing``: table -> row keys lost. ``windows``: (name, from_ms, to_ms) of the fault timeline;
    an acknowledgement outside all of them is counted as ``other``."""
    acks: dict[tuple[str, str], list[tuple[int, dict[str, Any], int, int]]] = {}
    for line in ledger:
        if line.get("ev") != "ack":
            continue
        for partition, offset, row in line["rows"]:
            acks.setdefault((line["table"], row), []).append((line["ack_ms"], line, partition, offset))
    out = Attribution()
    for table, rows in missing.items():
        for row in rows:
            out.missing += 1
            seen = acks.get((table, row.hex()))
            if not seen:
                out.never_acknowledged.append((table, row.hex()))
                continue
            ack_ms, line, partition, offset = max(seen, key=lambda a: a[0])
            name = next((w for w, lo, hi in windows if lo <= ack_ms < hi), "other")
            out.windows[name] += 1
            out.by_route[(str(line["gateway"]), str(line["server"]))] += 1
            out.partitions[partition] += 1
            out.regions.update(line["regions"])
            if len(out.examples) < 5:
                out.examples.append({"table": table, "row": row.hex(), "partition": partition, "offset": offset,
                                     "acks": len(seen), "ack_ms": ack_ms, "sent_ms": line["sent_ms"],
                                     "gateway": line["gateway"], "server": line["server"], "regions": line["regions"]})
    return out
