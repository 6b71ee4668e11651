"""hbase-ingest and Apache Flink below saturation: a topic produced at a fixed rate while the system
under test keeps up with it.

Each run: a fresh topic of ``--partitions`` partitions and a fresh 16-region table; the system
starts and, once it consumes (at the topic's end), this process produces ``rate`` ``logs`` events a
second for ``--seconds`` (librdkafka's producer, paced every 10 ms, partition ``i % partitions``,
each event's ``timestamp`` the time it is sent) until the system has written every event. Runs
alternate between the kinds of ``--kinds`` (the order flips every run index); hbase-ingest's kinds
differ in the consumer's fetch settings:

- ``ingest``: the product's defaults (``[kafka] fetch_min_bytes = 1 MiB``, ``fetch_max_wait_ms =
  250``, ``[writer] seal_when_caught_up = "auto"``);
- ``fetch_default``: ``fetch_min_bytes = 1``, ``fetch_max_wait_ms = 500`` (aiokafka's defaults: a
  fetch returns the moment a byte is there);
- ``fetch_256k_100ms``: ``fetch_min_bytes = 262144``, ``fetch_max_wait_ms = 100`` (the defaults
  before, with batches sealed at their age);
- ``native``: the defaults with ``[hbase] client = "native"`` (puts straight to the region server
  over HBase's RPC, no Thrift gateway in the write path).

hbase-ingest: a worker child process with the settings and 16-region design table of the Flink
comparison (:func:`bench.peer_ingest.ingest_settings`) in a fresh group; it says it consumes once
its group has joined and its positions are at the topic's end. It prints ``{"written": N}`` after
each acknowledged write call, and runs until every event is written and committed.

``flink``: Flink 1.19.3 run as the peer benchmark runs it (:meth:`bench.bench_peer.PeerBench.run_flink`,
:mod:`bench.peer_flink`: one JVM, a local MiniCluster, Kafka connector -> HBase 2.2 connector,
parallelism 2, 1 GB heap, a checkpoint every 5 s, the sink's buffer flushed at 2,000 rows, 4 MB or
200 ms, 5,000 records per poll) into its own fresh table split as that benchmark splits Flink's, in
a fresh group. Two differences, both recorded under ``flink_settings``: the row key ends with
``|<partition>|<offset>`` of the Kafka record (``hostname|log_event|timestamp`` collides for events
sent in one millisecond, and the sink merges Puts of one buffer sharing a key, so without it Flink
would write fewer Puts than events), and the REST endpoint gets a known port with its metric
fetcher refreshed every 500 ms (only the harness's start-up queries use it). Flink consumes once
its job and every task are RUNNING and, in the REST metrics of its source, every partition is
assigned to a reader (``KafkaSourceReader.topic.*.partition.*.currentOffset``) and every reader's
Kafka consumer has completed a fetch (``KafkaSourceReader.KafkaConsumer.fetch-total`` > 0); the
harness stops querying then. Its counting BufferedMutator (``infra/flink/FlinkPeerJob.java``)
prints ``{"written": N}`` every 20 ms while the Puts HBase acknowledged change; Flink is stopped
once that reaches the events produced (one Put per event).

The measured window, the same for both: production runs ``--warmup`` seconds before it (JIT
compilation, first region lookups and connections: Flink's first seconds run at several times its
settled latency), and the window goes from the end of the warm-up to the moment this process reads a
``written`` count equal to the events produced (the last row acknowledged; the line is read by a
thread as it arrives). Both processes print their cumulative latency histogram about once a second;
the window's latencies are the last histogram minus the one last printed before the window began.
The process's CPU (user + system, every thread, summed over it and its descendants: Flink's
MiniCluster is one JVM) is read by this process from ``/proc/<pid>/stat`` at both ends, so neither
start-up, the warm-up nor the worker's final commit counts; the
HBase JVM's CPU over the same window (:class:`bench.cpu.CpuMeter`; for hbase-ingest it includes the
Thrift2 gateway it writes through, which runs in the HBase JVM, while Flink's HBase client writes to
the region server directly); peak RSS is the process's ``VmHWM`` at the window's end.

Figures per run: ``worker_us_per_event`` (the process's CPU-us per event produced, for Flink its
JVM's), ``hbase_jvm_us_per_row``, ``peak_rss_mb``, ``rows_per_call`` (rows per write call; for Flink
Puts per flush that acknowledged any), and the end-to-end latency of each event, from its
``timestamp`` (when it was sent) to HBase's acknowledgement of the write that carried it (the write
call returning; for Flink the BufferedMutator's flush returning), as p50 / p99 / max in milliseconds
of a histogram of 1 ms buckets kept in the process (60 s and more in the last bucket). ``rows`` are
the rows acknowledged (for Flink the Puts; with the offset in the key, distinct rows too). Results:
``bench/results/steady.json`` (``--out`` elsewhere).

    python -m bench.bench_steady [--rates 5000,15000,30000] [--seconds 150] [--warmup 20] [--runs 2]
                                 [--partitions 8] [--kinds ingest,flink] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson

from bench.bench_cdc import _drop, _recreate
from bench.bench_peer import REGIONS, SPLIT_SAMPLE, _create_flume_table, free_port
from bench.cpu import CpuMeter, cpu_seconds, status_mb
from bench.peer_flink import (
    FLINK_HBASE_VERSION,
    FLINK_KAFKA_VERSION,
    FLINK_VERSION,
    FlinkJob,
    config_properties,
    flink_command,
    flink_config,
    job_sql,
)
from bench.peer_flink import row_key as flink_row_key
from bench.peer_flume import split_keys
from bench.peer_ingest import ingest_settings
from bench.peer_loader import LOADER_JDK_FLAGS
from bench.peer_procs import stop
from bench.peer_provision import FLINK_LOG4J, ensure_flink
from bench.profile_worker import RESULTS, _us
from bench.worker_child import _summary
from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, end_offsets
from devstack import LocalStack
from devstack.settings import StackSettings
from pipeline.core.examples import generate
from pipeline.core.model import TopicPartition
from pipeline.runtime.process.proctune import tune_process
from pipeline.settings import Settings

__all__ = ["FLINK", "KINDS", "Line", "Progress", "Window", "flink_settings", "latency_summary", "parse_kinds",
           "parse_line", "settings_for", "source_consuming"]

#: per kind, the settings it changes from the product's defaults: section -> setting -> value
KINDS: dict[str, dict[str, dict[str, Any]]] = {
    "ingest": {},  # the product's defaults
    "fetch_default": {"kafka": {"fetch_min_bytes": 1, "fetch_max_wait_ms": 500}},
    "fetch_256k_100ms": {"kafka": {"fetch_min_bytes": 262_144, "fetch_max_wait_ms": 100}},
    "native": {"hbase": {"client": "native"}},
}
FLINK = "flink"
_TIMESTAMP = attrgetter("timestamp")
_CAP_MS = 60_000  # latencies at or above go in the last bucket (as FlinkPeerJob's CAP_MS)
#: Flink settings beside the peer benchmark's: a known REST port and a fresher metric fetcher, for the
#: start-up queries only (the fetcher refreshes on a query, never by itself)
_FLINK_REST = {"metrics.fetcher.update-interval": "500"}
_FETCHES = re.compile(r"^(\d+)\..*KafkaSourceReader\.KafkaConsumer\.fetch-total$")
_ASSIGNED = re.compile(r"^\d+\..*KafkaSourceReader\.topic\..+\.partition\.(\d+)\.currentOffset$")


def settings_for(kind: str, topic: str, table: str, partitions: int) -> Settings:
    base = ingest_settings(topic, table, f"{topic}-dlq", partitions)
    return base.model_copy(update={section: getattr(base, section).model_copy(update=changes)
                                   for section, changes in KINDS[kind].items()})


def parse_kinds(text: str) -> list[str]:
    """``--kinds``: comma-separated names among :data:`KINDS` and ``flink``, in the order given, each
    once. Raises ValueError on an unknown, repeated or missing name."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = sorted(set(kinds) - {*KINDS, FLINK})
    if unknown:
        raise ValueError(f"unknown kinds {', '.join(unknown)} (choose among {', '.join([*KINDS, FLINK])})")
    if not kinds or len(set(kinds)) != len(kinds):
        raise ValueError(f"--kinds needs at least one kind, each once, got {text!r}")
    return kinds


def latency_summary(hist: Mapping[int, int]) -> dict[str, int | None]:
    """p50, p99 and max in ms of a histogram of 1 ms buckets (ms -> count): a percentile is the
    first bucket at which the running count reaches that share of the total. None when empty."""
    buckets = sorted(ms for ms, n in hist.items() if n > 0)
    total = sum(hist[ms] for ms in buckets)
    if not total:
        return {"p50": None, "p99": None, "max": None}

    def at(q: float) -> int:
        seen = 0
        for ms in buckets:
            seen += hist[ms]
            if seen >= q * total:
                return ms
        return buckets[-1]
    return {"p50": at(0.5), "p99": at(0.99), "max": buckets[-1]}


def _pairs(hist: list[int]) -> list[list[int]]:
    """A dense histogram's non-empty buckets as ``[ms, count]`` pairs (FlinkPeerJob's format)."""
    return [[ms, n] for ms, n in enumerate(hist) if n]


@dataclass(frozen=True)
class Line:
    """One line of a measured process's output (what it does not hold is None or False)."""

    started: bool = False
    written: int | None = None
    hist: dict[int, int] | None = None
    flushes: int | None = None
    result: dict[str, Any] | None = None


def parse_line(text: str) -> Line:
    """A JSON line of the worker child or the Flink job: ``{"started": true}``, ``{"written": N}``,
    ``{"latency_hist": [[ms, count], ...], "flushes": F}`` or ``{"result": {...}}``; an empty
    :class:`Line` for a line that is not a JSON object. Raises ValueError on a malformed one."""
    text = text.strip()
    if not text.startswith("{"):
        return Line()
    doc = json.loads(text)  # an object, as the text starts with "{"
    hist = doc.get("latency_hist")
    return Line(started=doc.get("started") is True,
                written=None if doc.get("written") is None else int(doc["written"]),
                hist=None if hist is None else {int(ms): int(n) for ms, n in hist},
                flushes=None if doc.get("flushes") is None else int(doc["flushes"]),
                result=doc.get("result"))


def source_consuming(metrics: Mapping[str, str], parallelism: int, partitions: int) -> bool:
    """Whether a Flink Kafka source consumes, from its vertex's REST metrics (``<subtask>.<operator>.<name>``
    -> value): every one of ``partitions`` partitions assigned to a reader (its ``currentOffset``
    gauge exists) and each of the ``parallelism`` readers' Kafka consumers has completed a fetch."""
    fetched, assigned = set(), set()
    for name, value in metrics.items():
        if (m := _FETCHES.match(name)) and float(value) > 0:
            fetched.add(int(m[1]))
        elif m := _ASSIGNED.match(name):
            assigned.add(int(m[1]))
    return len(fetched) >= parallelism and assigned >= set(range(partitions))


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [c for c, p in parents.items() if p in frontier]
        found += frontier
    return found


def _tree_cpu(pid: int) -> float:
    return sum(cpu_seconds(p) for p in _tree(pid))


def _tree_hwm_mb(pid: int) -> float:
    return round(sum(status_mb(p, "VmHWM") or 0.0 for p in _tree(pid)), 1)


class Progress:
    """A measured process's output, read by a thread (:func:`parse_line`): whether it started, the
    latest ``written`` count and when it changed, the latest latency histogram and flushes, the
    result. Once armed, the first count at or above ``total`` runs ``at_total`` in the reading thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.started, self.done, self.closed = threading.Event(), threading.Event(), threading.Event()
        self.written, self.changed = 0, time.perf_counter()
        self.hist: dict[int, int] = {}
        self.flushes = 0
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self._total: int | None = None
        self._at_total: Callable[[], None] = lambda: None
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def arm(self, total: int, at_total: Callable[[], None]) -> None:
        self._at_total, self.changed, self._total = at_total, time.perf_counter(), total

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                try:
                    line = parse_line(raw.decode(errors="replace"))
                except ValueError as exc:
                    self.error = self.error or str(exc)
                    continue
                if line.started:
                    self.started.set()
                if line.written is not None and line.written != self.written:
                    self.written, self.changed = line.written, time.perf_counter()
                    if self._total is not None and line.written >= self._total and not self.done.is_set():
                        try:
                            self._at_total()
                        except Exception as exc:  # reported by the waiting thread
                            self.error = f"measuring the end of the window: {exc!r}"
                        self.done.set()
                if line.hist is not None:
                    self.hist, self.flushes = line.hist, line.flushes or 0
                if line.result is not None:
                    self.result = line.result
        finally:
            self.closed.set()


@dataclass(frozen=True)
class Window:
    """The measured window (see the module docstring): the process's and the HBase JVM's CPU seconds,
    the process's peak RSS at its end, and its wall seconds."""

    process_cpu_s: float
    hbase_cpu_s: float
    peak_rss_mb: float
    wall_s: float


def _measure(stack: LocalStack, proc: subprocess.Popen[bytes], progress: Progress, total: int, warm: int,
             produce: Callable[[tuple[int, Callable[[], None]]], int], what: str,
             stall_s: float = 120.0) -> tuple[int, Window, dict[int, int]]:
    """Produce (``produce(at)``: the count sent, calling ``at[1]`` once ``at[0]`` events were sent) and
    wait until ``what`` has written ``total`` rows; the figures of the window from the end of the
    warm-up (``warm`` events) to then, and the latencies recorded in it."""
    ends: list[Window] = []
    start: list[tuple[CpuMeter, float, dict[int, int]]] = []

    def begin() -> None:
        start.append((CpuMeter(stack), _tree_cpu(proc.pid), dict(progress.hist)))

    def at_total() -> None:
        meter, cpu0, _ = start[0]
        cpu = _tree_cpu(proc.pid) - cpu0
        jvm = meter.stop()
        ends.append(Window(round(cpu, 2), jvm["hbase_jvm"], _tree_hwm_mb(proc.pid), jvm["wall"]))
    progress.arm(total, at_total)
    sent = produce((warm, begin))
    while not progress.done.wait(0.2):
        if proc.poll() is not None:
            progress.closed.wait(10)
            if progress.done.is_set():
                break
            raise RuntimeError(f"{what} exited with {proc.returncode} after {progress.written:,} of {total:,} "
                               f"rows{f' ({progress.error})' if progress.error else ''}")
        if time.perf_counter() - progress.changed > stall_s:
            raise RuntimeError(f"{what}: no progress for {stall_s:.0f} s at {progress.written:,} of {total:,} rows")
    if not ends:
        raise RuntimeError(f"{what}: {progress.error}")
    deadline = time.perf_counter() + 15  # the histogram follows within a second of the last write
    while sum(progress.hist.values()) < total:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{what}'s latency histogram holds {sum(progress.hist.values()):,} of {total:,} rows")
        time.sleep(0.1)
    before = start[0][2]
    return sent, ends[0], {ms: n - before.get(ms, 0) for ms, n in progress.hist.items() if n > before.get(ms, 0)}


async def _child(kind: str, topic: str, table: str, partitions: int, stop: dict[str, int]) -> dict[str, Any]:
    from pipeline.runtime.ingest.report import WorkerSummary
    from pipeline.runtime.ingest.worker import Worker

    settings = settings_for(kind, topic, table, partitions)
    tune_process(settings.runtime)
    hist = [0] * (_CAP_MS + 1)
    calls = [0, 0]  # write calls, rows
    printed = [0.0]  # when the histogram was last printed (ms)
    total = sum(stop.values())  # a fresh topic: its offsets start at 0
    async with HBaseClient(settings.hbase) as hb:
        write = hb.write

        async def timed(table: str, mutations: Any, server: str | None = None) -> str | None:
            got = await write(table, mutations, server)
            now = time.time() * 1000
            # per distinct timestamp (the producer stamps ~150 events alike at 15,000/s), counted in C:
            # the harness's share of the worker's CPU stays small
            for stamp, n in Counter(map(_TIMESTAMP, mutations)).items():
                hist[min(max(int(now - stamp), 0), _CAP_MS)] += n
            calls[0] += 1
            calls[1] += len(mutations)
            print(f'{{"written": {calls[1]}}}', flush=True)  # the measured window ends at the total
            if now - printed[0] >= 1000 or calls[1] >= total:  # the window's latencies: differences
                printed[0] = now
                print(json.dumps({"latency_hist": _pairs(hist), "flushes": calls[0]}), flush=True)
            return got
        hb.write = timed  # type: ignore[method-assign]
        worker = Worker(settings, hb, KafkaBroker(settings.kafka), group_id=f"steady-{time.time_ns()}",
                        stop_at={TopicPartition(topic, int(p)): o for p, o in stop.items()})
        done: list[WorkerSummary] = []

        async def run(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            done.append(await worker.run(task_status=task_status))
        async with anyio.create_task_group() as tg:
            await tg.start(run)  # consuming: the group joined, positions at the end of the topic
            print(json.dumps({"started": True}), flush=True)
        summary = done[0]
    return {"events": summary.consumed, "rows": summary.rows_written, "dead_lettered": summary.dead_lettered,
            "write_calls": calls[0], "latency_hist": _pairs(hist)}


def _produce(bootstrap: str, topic: str, rate: int, seconds: float, partitions: int,
             at: tuple[int, Callable[[], None]] | None = None) -> int:
    """``rate`` events a second for ``seconds``, paced every 10 ms; the count sent. ``at = (n, call)``:
    ``call()`` once ``n`` events were handed to the producer."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    events = [e for _, e in generate("logs", 10_000, seed=5)]
    failed: list[str] = []
    total = int(rate * seconds)
    sent, t0 = 0, time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - t0) * rate) + 1)
        now = int(time.time() * 1000)
        for i in range(sent, due):
            event = events[i % len(events)]
            event["timestamp"] = now
            producer.produce(topic, orjson.dumps(event), partition=i % partitions,
                             on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
        sent = due
        if at is not None and sent >= at[0]:
            at[1]()
            at = None
        producer.poll(0)
        time.sleep(0.01)
    if producer.flush(60) != 0 or failed:
        raise RuntimeError(f"producing failed: {failed[:3]}")
    return sent


def _figures(kind: str, rate: int, sent: int, warm: int, rows: int, calls: int, hist: Mapping[int, int],
             window: Window) -> dict[str, Any]:
    """A run's figures; per event and per row over the window's events (``sent - warm``: one row each)."""
    measured = sent - warm
    return {"kind": kind, "rate": rate, "sent": sent, "warmup_events": warm, "rows": rows,
            "worker_us_per_event": _us(window.process_cpu_s, measured),
            "hbase_jvm_us_per_row": _us(window.hbase_cpu_s, measured), "peak_rss_mb": window.peak_rss_mb,
            "write_calls": calls, "rows_per_call": round(rows / max(calls, 1), 1),
            "latency_ms": latency_summary(hist), "process_cpu_s": window.process_cpu_s,
            "hbase_cpu_s": window.hbase_cpu_s, "wall_s": window.wall_s}


def _run(stack: LocalStack, kind: str, rate: int, seconds: float, warmup: float, partitions: int) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    topic, table = f"steady-{run_id}", f"steady_{run_id}"
    settings = settings_for(kind, topic, table, partitions)
    asyncio.run(create_topics(settings.kafka, {topic: partitions}))
    asyncio.run(_recreate(settings))
    total, warm = int(rate * (warmup + seconds)), int(rate * warmup)
    start = asyncio.run(end_offsets(settings.kafka, topic))
    stop_at = {str(p): start.get(p, 0) + total // partitions + (1 if p < total % partitions else 0)
               for p in range(partitions)}
    child = subprocess.Popen([sys.executable, "-m", "bench.bench_steady", "--child", kind, "--topic", topic,
                              "--table", table, "--partitions", str(partitions), "--stop", json.dumps(stop_at)],
                             stdout=subprocess.PIPE)
    progress = Progress(child)
    try:
        while not progress.started.wait(0.2):
            if child.poll() is not None:
                raise RuntimeError(f"the worker child exited with {child.returncode} before it started")
        sent, window, hist = _measure(stack, child, progress, total, warm, lambda at: _produce(
            settings.kafka.bootstrap_servers, topic, rate, warmup + seconds, partitions, at), "the worker child")
        child.wait(600)
        progress.closed.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        asyncio.run(_drop(settings, topic, table))
    got = progress.result
    if child.returncode or got is None:
        raise RuntimeError(f"the worker child failed with exit {child.returncode}")
    return {**_figures(kind, rate, sent, warm, got["rows"], got["write_calls"], hist, window),
            "events": got["events"], "dead_lettered": got["dead_lettered"]}


def _flink_template() -> FlinkJob:
    return FlinkJob("", "", "", "", "")  # the peer benchmark's defaults (bench_peer.flink_tuning, no options)


def _rest(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return json.loads(resp.read())


def _flink_consuming(port: int, parallelism: int, partitions: int) -> bool:
    """:func:`source_consuming` over the REST metrics of the job's vertices, once the job and every
    vertex are RUNNING; False while the endpoint or a figure is not there yet."""
    try:
        jobs = [j for j in _rest(port, "/jobs/overview")["jobs"] if j["state"] == "RUNNING"]
        if len(jobs) != 1:
            return False
        jid = jobs[0]["jid"]
        vertices = _rest(port, f"/jobs/{jid}")["vertices"]
        if not vertices or any(v["status"] != "RUNNING" for v in vertices):
            return False
        for v in vertices:
            base = f"/jobs/{jid}/vertices/{v['id']}/metrics"
            names = [m["id"] for m in _rest(port, base) if _FETCHES.match(m["id"]) or _ASSIGNED.match(m["id"])]
            if names:
                got = _rest(port, f"{base}?get={urllib.parse.quote(','.join(names), safe=',')}")
                if source_consuming({m["id"]: m["value"] for m in got}, parallelism, partitions):
                    return True
    except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, ValueError):
        return False
    return False


def flink_settings() -> dict[str, Any]:
    """How the ``flink`` kind runs (the peer benchmark's defaults and the two differences)."""
    job = _flink_template()
    return {
        "versions": {"flink": FLINK_VERSION, "flink_connector_kafka": FLINK_KAFKA_VERSION,
                     "flink_connector_hbase": FLINK_HBASE_VERSION},
        **{k: v for k, v in job.__dict__.items() if isinstance(v, int | str) and v != ""},
        "settings": flink_config(job) | _FLINK_REST | {"rest.bind-port": "<a free port>",
                                                      "pipeline.name": "bench-peer-<table>"},
        "job": "as bench_peer runs it: one JVM, a local MiniCluster running Flink SQL, Kafka table (json, "
               "earliest-offset) -> INSERT INTO an HBase table (hbase-2.2 connector, HBase client 2.2.3)",
        "row_key": "hostname|log_event|timestamp|partition|offset, built in SQL (bench_peer's key and the Kafka "
                   "record's partition and offset: one Put per event)",
        "splits": f"{REGIONS - 1} quantiles of {SPLIT_SAMPLE:,} sample keys hostname|log_event|timestamp (as "
                  "bench_peer)",
        "consuming": "job and tasks RUNNING, every partition assigned to a reader and every reader's Kafka "
                     "consumer past its first fetch (REST metrics, queried before producing only)",
        "written": "Puts counted once a flush of the sink's BufferedMutator returned (FlinkPeerJob$CountingConnection)",
        "latency": "per acknowledged Put: flush return (ms) - the timestamp in its row key, 1 ms buckets",
    }


def _run_flink(stack: LocalStack, classpath: list[Path], splits: list[bytes], work: Path, rate: int,
               seconds: float, warmup: float, partitions: int) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    topic, table = f"steady-{run_id}", f"steady_flink_{run_id}"
    settings = settings_for("ingest", topic, table, partitions)  # for the stack's addresses
    asyncio.run(create_topics(settings.kafka, {topic: partitions}))
    asyncio.run(_create_flume_table(settings, table, splits))
    job = FlinkJob(bootstrap=settings.kafka.bootstrap_servers, topic=topic, group=f"steady-flink-{run_id}",
                   table=table, zookeeper_quorum=f"127.0.0.1:{stack.settings.zookeeper_port}")
    port = free_port()
    conf, sql = work / f"flink-{run_id}.properties", work / f"flink-{run_id}.sql"
    conf.write_text(config_properties(flink_config(job) | _FLINK_REST | {"rest.bind-port": str(port)}))
    sql.write_text(job_sql(job, offset_in_key=True))
    cmd = flink_command(classpath, conf, sql, FLINK_LOG4J, job.heap_mb, LOADER_JDK_FLAGS)
    log = work / f"flink-{run_id}.log"
    total, warm = int(rate * (warmup + seconds)), int(rate * warmup)
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    progress = Progress(proc)
    try:
        deadline = time.perf_counter() + 300
        while not _flink_consuming(port, job.parallelism, partitions):
            if proc.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"Flink did not start consuming (exit {proc.poll()}); see {log}")
            time.sleep(0.5)
        sent, window, hist = _measure(stack, proc, progress, total, warm, lambda at: _produce(
            settings.kafka.bootstrap_servers, topic, rate, warmup + seconds, partitions, at), "Flink")
    finally:
        stop(proc)
        asyncio.run(_drop(settings, topic, table))
    return _figures(FLINK, rate, sent, warm, progress.written, progress.flushes, hist, window)


def main(args: argparse.Namespace) -> dict[str, Any]:
    kinds = parse_kinds(args.kinds)
    stack = LocalStack(StackSettings())
    stack.up()
    rates = [int(r) for r in args.rates.split(",")]
    classpath = ensure_flink(stack.layout) if FLINK in kinds else []
    splits = split_keys((flink_row_key(e) for _, e in generate("logs", SPLIT_SAMPLE)), REGIONS)
    work = Path(tempfile.mkdtemp(prefix="bench-steady-"))
    runs: list[dict[str, Any]] = []
    ok = False
    try:
        for rate in rates:
            for i in range(args.runs):
                for kind in (kinds if i % 2 == 0 else kinds[::-1]):
                    if kind == FLINK:
                        runs.append(_run_flink(stack, classpath, splits, work, rate, args.seconds, args.warmup,
                                               args.partitions))
                    else:
                        runs.append(_run(stack, kind, rate, args.seconds, args.warmup, args.partitions))
                    print(json.dumps(runs[-1]), flush=True)
        ok = True
    finally:
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"logs kept in {work}", file=sys.stderr)
    table: dict[str, dict[str, Any]] = {}
    for rate in rates:
        for kind in kinds:
            mine = [r for r in runs if r["rate"] == rate and r["kind"] == kind]
            table[f"{kind}@{rate}"] = {
                f: _summary([r[f] for r in mine]) for f in ("worker_us_per_event", "hbase_jvm_us_per_row",
                                                            "peak_rss_mb", "rows_per_call")} | {
                "latency_ms": {q: _summary([r["latency_ms"][q] for r in mine]) for q in ("p50", "p99", "max")}}
    result = {"seconds": args.seconds, "warmup_s": args.warmup, "partitions": args.partitions, "rates": rates,
              "runs": runs,
              "medians": table, "kinds": {k: KINDS.get(k, "see flink_settings") for k in kinds},
              "flink_settings": flink_settings() if FLINK in kinds else None,
              "cpu_window": "from the end of the warm-up to the written count reaching the events produced; the "
                            "process and its descendants from /proc/<pid>/stat; per event over the window's events",
              "cpus": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="5000,15000,30000")
    parser.add_argument("--seconds", type=float, default=150)
    parser.add_argument("--warmup", type=float, default=20, help="seconds produced before the measured window")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--kinds", default=f"ingest,{FLINK}",
                        help=f"comma-separated, among {', '.join([*KINDS, FLINK])} (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "steady.json", help="results file (default %(default)s)")
    parser.add_argument("--child", choices=list(KINDS))
    parser.add_argument("--topic")
    parser.add_argument("--table")
    parser.add_argument("--stop")
    a = parser.parse_args()
    if a.child:
        print(json.dumps({"result": asyncio.run(_child(a.child, a.topic, a.table, a.partitions, json.loads(a.stop)))}))
    else:
        try:
            parse_kinds(a.kinds)
        except ValueError as exc:
            parser.error(str(exc))
        if a.seconds * min(int(r) for r in a.rates.split(",")) < 1:
            parser.error("--seconds x the lowest rate must be at least one event")
        print(json.dumps(main(a)["medians"]))
