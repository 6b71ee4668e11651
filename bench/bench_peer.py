"""hbase-ingest against Apache Flink and Apache Flume on one stack, with HBase's native write
ceiling beside them.

One topic of ``logs`` example events (~293 B of JSON, 8 partitions) is produced once. Then, per
run, in turn: Flink 1.19.3 (a local MiniCluster running Flink SQL from its Kafka connector into its
HBase 2.2 connector, parallelism 2, checkpoints every 5 s: :mod:`bench.peer_flink`), Flume 1.11.0
(KafkaSource -> memory channel -> HBase2Sink with the regex serializer, native HBase client),
hbase-ingest (``bench_worker``'s settings and design, through the Thrift2 gateway) and a Java
BufferedMutator loader writing the design's prebuilt rows; ``--systems`` picks some of them
(hbase-ingest and at least one peer). With ``HBASE_INGEST_HBASE__CLIENT=native`` in the environment
hbase-ingest writes over HBase's native RPC instead of the gateway. Each reads or writes under a
fresh consumer group into a freshly created 16-region table, and every table's rows are counted in
HBase afterwards: a run missing a row fails the benchmark.

Per pipeline run: events/s from the first acknowledged write to the last and from process start to
all written, seconds to the first write, seconds until the group's committed offsets reach the
topic's end, CPU seconds of the process (over the run and after its first write) and of the HBase
JVM (which also hosts the Thrift gateways), peak RSS. Medians with their ranges, the
hbase-ingest/Flink and hbase-ingest/Flume ratios, and the loader's rows/s and HBase CPU per row go
to bench/results/peer.json (``--out`` elsewhere, ``--no-save`` nowhere: for smoke runs).

    python -m bench.bench_peer [--events 1000000] [--runs 3] [--partitions 8]
                               [--systems flink,flume,hbase-ingest,loader] [--out FILE | --no-save]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from bench.cpu import hbase_cpu_seconds
from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, delete_topics, end_offsets, make_admin
from devstack import HBASE_VERSION, KAFKA_VERSION, LocalStack
from devstack.settings import load_stack_settings
from pipeline.core.examples import generate
from pipeline.core.ingest.batcher import BatchBy
from pipeline.core.model import Origin, TopicPartition
from pipeline.core.routes.router import Router
from pipeline.runtime.admin.tables import count_rows, create_tables
from pipeline.runtime.produce import produce_events
from pipeline.settings import FamilySpec, Settings, load_settings

from .peer_flink import (
    FLINK_HBASE_VERSION,
    FLINK_KAFKA_VERSION,
    FLINK_VERSION,
    FlinkJob,
    config_properties,
    flink_command,
    flink_config,
    job_sql,
)
from .peer_flink import row_key as flink_row_key
from .peer_flume import FLUME_VERSION, FlumeAgent, agent_properties, row_key, split_keys
from .peer_ingest import child_command, ingest_settings
from .peer_loader import LOADER_JDK_FLAGS, encode_rows, loader_command, run_loader
from .peer_procs import ChildProgress, RunFailed, flume_probe, load_average, stop, watch
from .peer_provision import FLINK_LOG4J, FLUME_LOG4J, LOADER_SOURCE, ensure_flink, ensure_flume_lib, flume_classpath
from .peer_summary import PEERS, markdown_table, summarize

RESULTS = Path(__file__).resolve().parent / "results"
REGIONS = 16
SPLIT_SAMPLE = 20_000
#: every system, in the order of a run; ``--systems`` picks some
SYSTEMS = ("flink", "flume", "hbase-ingest", "loader")
#: how long after all rows are written a group may take to commit the topic's end (Flink: up to
#: two checkpoint intervals)
COMMIT_TIMEOUT_S = 120.0


def positive_ints(text: str) -> list[int]:
    """An argparse type: comma-separated integers, each at least 1 (region counts, row counts)."""
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected counts >= 1 separated by commas, got {text!r}")
    return values


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _drop(settings: Settings, table: str) -> None:
    async with HBaseClient(settings.hbase) as hb:
        if await hb.table_exists(table):
            await hb.delete_table(table)


async def _create_design_table(settings: Settings, regions: int | None = None,
                               sample: Sequence[Mapping[str, Any]] | None = None) -> None:
    async with HBaseClient(settings.hbase) as hb:
        await create_tables(hb, settings, regions=regions, recreate=True, sample_events=sample)


async def _committed_at(settings: Settings, group: str, ends: dict[TopicPartition, int], timeout_s: float) -> float:
    """The ``perf_counter`` when ``group``'s committed offsets were first seen at ``ends`` (polled
    every 50 ms). Raises :class:`RunFailed` after ``timeout_s``."""
    admin = make_admin(settings.kafka)
    await admin.start()
    try:
        deadline = time.perf_counter() + timeout_s
        behind = sum(ends.values())
        while time.perf_counter() < deadline:
            offsets = await admin.list_consumer_group_offsets(group)
            seen = time.perf_counter()
            done = {TopicPartition(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
            behind = sum(max(0, end - done.get(tp, 0)) for tp, end in ends.items())
            if behind == 0:
                return seen
            await asyncio.sleep(0.05)
    finally:
        await admin.close()
    raise RunFailed(f"group {group} still had {behind:,} offsets to commit {timeout_s:.0f} s after the last row")


async def _create_flume_table(settings: Settings, table: str, splits: list[bytes]) -> None:
    async with HBaseClient(settings.hbase) as hb:
        if await hb.table_exists(table):
            await hb.delete_table(table)
        await hb.create_table(table, {"l": FamilySpec()}, splits)


async def _count(settings: Settings, table: str) -> tuple[int, list[set[bytes]]]:
    """Rows in ``table``, and the columns of its first 100 rows."""
    async with HBaseClient(settings.hbase) as hb:
        n, _ = await count_rows(hb, table)
        sample = await hb.scan_page(table, limit=100)
        return n, [set(cells) for _, cells in sample]


def _check_rows(settings: Settings, system: str, table: str, expected: int) -> int:
    """Raise :class:`RunFailed` unless ``table`` holds ``expected`` rows, each sampled one with
    exactly the design's three cells."""
    found, sample = asyncio.run(_count(settings, table))
    if found != expected:
        raise RunFailed(f"{system}: table {table} holds {found:,} rows, expected {expected:,} "
                        f"({expected - found:,} missing)")
    columns = {c.encode() for c in settings.routes[0].columns}
    wrong = [cols for cols in sample if cols != columns]
    if wrong:
        raise RunFailed(f"{system}: rows of {table} hold the columns {sorted(wrong[0])}, expected {sorted(columns)}")
    return found


class PeerBench:
    """One benchmark: its names (unique per invocation), work folder and the stack it measures."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.stack = LocalStack.recorded(load_stack_settings(None))  # the running shape, one JVM or a cluster
        self.tag = f"{time.strftime('%H%M%S')}_{os.getpid()}"
        self.topic = f"bench-peer-{self.tag}"
        self.dlq = f"{self.topic}-dlq"
        self.work = Path(tempfile.mkdtemp(prefix="bench-peer-"))
        self.settings = ingest_settings(self.topic, f"bench_peer_{self.tag}", self.dlq, args.partitions)
        self.tables: list[str] = []
        self.ends: dict[TopicPartition, int] = {}

    def check_stack(self) -> None:
        """Raise unless the shared stack (started with `hbase-ingest stack up`, never here) is ready
        and its HBase JVMs are found (for their CPU)."""
        self.stack.check_ready()
        if not any(self.stack.hbase_pids().values()):
            raise SystemExit("this benchmark needs the local stack's HBase JVMs (for their CPU): "
                             "run `hbase-ingest stack up`")

    def hbase_cpu(self) -> float:
        """CPU seconds so far of every HBase-side JVM of the stack."""
        return hbase_cpu_seconds(self.stack)

    def committed(self, group: str, started: float) -> float:
        """Seconds from ``started`` until ``group`` has committed the topic's end."""
        return asyncio.run(_committed_at(self.settings, group, self.ends, COMMIT_TIMEOUT_S)) - started

    def table(self, system: str, run: int) -> str:
        name = f"bench_peer_{system.replace('-', '_')}_{self.tag}_{run}"
        self.tables.append(name)
        return name

    def produce(self) -> dict[str, Any]:
        async def go() -> int:
            await create_topics(self.settings.kafka, {self.topic: self.args.partitions, self.dlq: 1})
            return await produce_events(KafkaBroker(self.settings.kafka), self.topic,
                                        generate("logs", self.args.events), partitions=self.args.partitions)
        t0 = time.perf_counter()
        sent = asyncio.run(go())
        self.ends = {TopicPartition(self.topic, p): e
                     for p, e in asyncio.run(end_offsets(self.settings.kafka, self.topic)).items()}
        sizes = [len(orjson.dumps(e)) for _, e in generate("logs", 2000)]
        return {"events": sent, "produce_s": round(time.perf_counter() - t0, 1),
                "mean_event_bytes": round(sum(sizes) / len(sizes), 1)}

    def prebuild(self) -> Path:
        """The design's rows for the loader, as hbase-ingest builds them, in the loader's file format."""
        router = Router(self.settings.routes)
        origin = Origin(TopicPartition(self.topic, 0), 0)
        rows = []
        for _, event in generate("logs", self.args.events):
            (m,) = router.route(self.topic, orjson.dumps(event), origin)
            rows.append((m.row, m.cells, m.timestamp or 0))
        path = self.work / "rows.bin"
        path.write_bytes(encode_rows(rows))
        return path

    def run_flume(self, run: int, classpath: str, splits: list[bytes]) -> dict[str, Any]:
        table = self.table("flume", run)
        asyncio.run(_create_flume_table(self.settings, table, splits))
        group = f"bench-peer-flume-{self.tag}-{run}"
        agent = FlumeAgent(bootstrap=self.settings.kafka.bootstrap_servers, topic=self.topic, group=group, table=table,
                           zookeeper_quorum=f"127.0.0.1:{self.stack.settings.zookeeper_port}")
        conf = self.work / f"flume-{run}.properties"
        conf.write_text(agent_properties(agent))
        port = free_port()
        cmd = ["java", "-XX:+UseG1GC", "-Djava.net.preferIPv4Stack=true", *LOADER_JDK_FLAGS,
               f"-Dlog4j2.configurationFile={FLUME_LOG4J}", "-Dflume.monitoring.type=http",
               f"-Dflume.monitoring.port={port}", "-cp", classpath, "org.apache.flume.node.Application",
               "--no-reload-conf", "-f", str(conf), "-n", "agent"]
        log = self.work / f"flume-{run}.log"
        with open(log, "wb") as out:
            hbase0 = self.hbase_cpu()
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        try:
            figs = watch(proc, flume_probe(port), self.args.events, started, self.hbase_cpu, hbase0)
            committed = self.committed(group, started)
        except RunFailed as exc:
            raise RunFailed(f"Flume run {run}: {exc}; see {log}") from exc
        finally:
            stop(proc)
        rows = _check_rows(self.settings, "Flume", table, self.args.events)
        asyncio.run(_drop(self.settings, table))
        return {"system": "flume", "run": run, "table": table, **figs.__dict__, "rows": rows,
                "offsets_committed_s": committed}

    def run_flink(self, run: int, classpath: list[Path], splits: list[bytes]) -> dict[str, Any]:
        """One Flink job run (:mod:`bench.peer_flink`): its progress from the job's counting
        BufferedMutator (a row counts once a flush after it returned), then its group's committed
        offsets until they reach the topic's end (the checkpoint after the last rows commits them),
        then every row counted in HBase."""
        table = self.table("flink", run)
        asyncio.run(_create_flume_table(self.settings, table, splits))
        group = f"bench-peer-flink-{self.tag}-{run}"
        job = FlinkJob(**flink_tuning(self.args), bootstrap=self.settings.kafka.bootstrap_servers, topic=self.topic,
                       group=group, table=table,
                       zookeeper_quorum=f"127.0.0.1:{self.stack.settings.zookeeper_port}")
        conf, sql = self.work / f"flink-{run}.properties", self.work / f"flink-{run}.sql"
        conf.write_text(config_properties(flink_config(job)))
        sql.write_text(job_sql(job))
        cmd = flink_command(classpath, conf, sql, FLINK_LOG4J, job.heap_mb, LOADER_JDK_FLAGS)
        figs, committed, _, _ = self._run_child("Flink", run, cmd, group, exits=False)
        rows = _check_rows(self.settings, "Flink", table, self.args.events)
        asyncio.run(_drop(self.settings, table))
        return {"system": "flink", "run": run, "table": table, **figs.__dict__, "rows": rows,
                "offsets_committed_s": committed}

    def _run_child(self, what: str, run: int, cmd: list[str], group: str, exits: bool,
                   env: Mapping[str, str] | None = None) -> tuple[Any, float, ChildProgress, int | None]:
        """Run ``cmd`` (a process printing ``{"written": N}`` lines, :class:`ChildProgress`) until every event
        is written and ``group`` has committed the topic's end; with ``exits``, also until it exits by itself
        (then its status is returned, else None). Its stderr goes to ``<work>/<what, lower case>-<run>.log``.
        ``env``: variables added to the child's environment. Returns the figures, the seconds until the
        commit, the progress reader and the status."""
        log = self.work / f"{what.lower()}-{run}.log"
        with open(log, "wb") as err:
            hbase0 = self.hbase_cpu()
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=None if env is None else {**os.environ, **env})
        progress = ChildProgress(proc)
        status = None
        try:
            figs = watch(proc, progress.probe, self.args.events, started, self.hbase_cpu, hbase0)
            committed = self.committed(group, started)
            if exits:
                status = proc.wait(120)  # it commits its offsets and exits once everything is written
        except (RunFailed, subprocess.TimeoutExpired) as exc:
            raise RunFailed(f"{what} run {run}: {exc}; see {log}") from exc
        finally:
            stop(proc)
        progress.join(10)
        return figs, committed, progress, status

    def run_ingest(self, run: int, regions: int | None = None, sample: Sequence[Mapping[str, Any]] | None = None,
                   batch_by: BatchBy = "server", env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One hbase-ingest run into a fresh table of the design's 16 regions, or of ``regions``
        (split by the design, else at quantiles of ``sample``), batching ``batch_by``; ``env`` is added
        to the worker child's environment (settings such as ``HBASE_INGEST_HBASE__THRIFT2_PORT``)."""
        table = self.table("hbase-ingest", run)
        settings = ingest_settings(self.topic, table, self.dlq, self.args.partitions, batch_by)
        asyncio.run(_create_design_table(settings, regions, sample))
        group = f"bench-peer-ingest-{self.tag}-{run}"
        cmd = child_command(sys.executable, self.topic, table, group, self.dlq, batch_by)
        figs, committed, progress, status = self._run_child("hbase-ingest", run, cmd, group, exits=True, env=env)
        if status != 0 or progress.summary is None:
            raise RunFailed(f"hbase-ingest run {run} exited with status {status} without a summary; see "
                            f"{self.work / f'hbase-ingest-{run}.log'}")
        rows = _check_rows(self.settings, "hbase-ingest", table, self.args.events)
        asyncio.run(_drop(self.settings, table))
        return {"system": "hbase-ingest", "run": run, "table": table, **figs.__dict__, "rows": rows,
                "offsets_committed_s": committed, "child": progress.summary}

    def run_loader(self, run: int, rows_file: Path) -> dict[str, Any]:
        table = self.table("loader", run)
        settings = ingest_settings(self.topic, table, self.dlq, self.args.partitions)
        asyncio.run(_create_design_table(settings))
        cmd = loader_command(LOADER_SOURCE, f"{self.stack.layout.hbase_lib}/*", "127.0.0.1",
                             self.stack.settings.zookeeper_port, table, rows_file)
        marks: dict[str, float] = {}
        out = run_loader(cmd, self.work / f"loader-{run}.log",
                         on_ready=lambda: marks.__setitem__("ready", self.hbase_cpu()),
                         on_done=lambda: marks.__setitem__("done", self.hbase_cpu()))
        rows = _check_rows(self.settings, "the loader", table, self.args.events)
        asyncio.run(_drop(self.settings, table))
        return {"system": "loader", "run": run, "table": table, "rows": rows, "seconds": out["seconds"],
                "hbase_cpu_s": marks["done"] - marks["ready"]}

    def record(self, step: Callable[[], dict[str, Any]], prefix: str, runs: list[dict[str, Any]],
               **extra: Any) -> None:
        """Run ``step`` (one run of a system), add ``extra`` and the 1-minute load average before it to
        its figures, append them to ``runs`` and print them after ``prefix``."""
        load = round(load_average()[0], 2)
        result = {**step(), **extra, "load_average_1m_before": load}
        runs.append(result)
        shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()
                 if k not in ("table", "child")}
        print(f"{prefix}: {json.dumps(shown)}", flush=True)

    def finish(self, ok: bool) -> None:
        """Drop the tables and the topic; keep the work folder (the systems' logs) unless ``ok``."""
        self.cleanup()
        if ok:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print(f"logs kept in {self.work}", file=sys.stderr)

    def cleanup(self) -> None:
        for table in self.tables:
            try:
                asyncio.run(_drop(self.settings, table))
            except Exception as exc:  # best effort: the figures are already taken
                print(f"could not drop {table}: {exc}", file=sys.stderr)
        asyncio.run(delete_topics(self.settings.kafka, [self.topic, self.dlq]))


def machine(load_start: Sequence[float]) -> dict[str, Any]:
    """The cores and the load averages at the start (``load_start``) and now."""
    return {"cores": os.cpu_count(), "load_average_at_start": [round(x, 2) for x in load_start],
            "load_average_at_end": [round(x, 2) for x in load_average()],
            # Kafka, HBase and the pipelines share these cores; a 1-minute load average
            # well above 0 at start means other work was running too
            "other_load_at_start": load_start[0] >= 0.5}


def flink_tuning(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`FlinkJob` fields ``--flink-parallelism``, ``--flink-flush-rows``, ``--flink-flush-size`` and
    ``--flink-max-poll-records`` set (those not given keep the job's defaults)."""
    given = {"parallelism": getattr(args, "flink_parallelism", None),
             "flush_max_rows": getattr(args, "flink_flush_rows", None),
             "flush_max_size": getattr(args, "flink_flush_size", None),
             "max_poll_records": getattr(args, "flink_max_poll_records", None)}
    return {k: v for k, v in given.items() if v is not None}


def parse_systems(text: str) -> tuple[str, ...]:
    """``--systems``: comma-separated names of :data:`SYSTEMS`, returned in run order. Raises
    ValueError on an unknown name, or without hbase-ingest and at least one peer."""
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(SYSTEMS))
    if unknown:
        raise ValueError(f"unknown systems {', '.join(unknown)} (choose among {', '.join(SYSTEMS)})")
    if "hbase-ingest" not in names or not names & set(PEERS):
        raise ValueError(f"--systems needs hbase-ingest and at least one of {', '.join(PEERS)}")
    return tuple(n for n in SYSTEMS if n in names)


def _setup(args: argparse.Namespace, systems: tuple[str, ...]) -> dict[str, Any]:
    sample = f"{REGIONS - 1} quantiles of {min(args.events, SPLIT_SAMPLE):,} sample keys"
    job = FlinkJob("", "", "", "", "", **flink_tuning(args))
    setup: dict[str, Any] = {
        "flink": {**{k: v for k, v in job.__dict__.items() if isinstance(v, int | str) and v != ""},
                  "settings": flink_config(job) | {"pipeline.name": "bench-peer-<table>"},
                  "job": "one JVM: a local MiniCluster running Flink SQL, Kafka table (json, earliest-offset) "
                         "-> INSERT INTO an HBase table (hbase-2.2 connector, HBase client 2.2.3)",
                  "delivery": "at-least-once: offsets committed when a checkpoint completes, after the sink's flush",
                  "progress": "rows counted once a flush of the sink's BufferedMutator returned "
                              "(hbase.client.connection.impl = FlinkPeerJob$CountingConnection)",
                  "row_key": "hostname|log_event|timestamp, built in SQL", "splits": sample},
        "flume": {**{k: v for k, v in FlumeAgent("", "", "", "", "").__dict__.items() if isinstance(v, int)},
                  "serializer": "RegexHBase2EventSerializer", "heap": "JVM default (a quarter of RAM)",
                  "row_key": "regex group: hostname through timestamp of the JSON text", "splits": sample},
        "hbase_ingest": "bench_worker's settings and design, " + (
            "native RPC straight to the region server ([hbase] client = \"native\")"
            if load_settings(None).hbase.client == "native" else "Thrift2 gateway in the HBase JVM"),
        "loader": {"write_buffer_mb": 8, "rows": "the design's keys and cells, prebuilt"},
    }
    return {k: v for k, v in setup.items() if k.replace("_", "-") in systems}


def main(args: argparse.Namespace) -> dict[str, Any]:
    systems = parse_systems(args.systems)
    bench = PeerBench(args)
    bench.check_stack()
    load_start = load_average()
    sample = [orjson.dumps(e) for _, e in generate("logs", min(args.events, SPLIT_SAMPLE))]
    flume_cp, flink_cp = "", []
    if "flume" in systems:
        ensure_flume_lib(bench.stack.layout)
        flume_cp = ":".join(str(p) for p in flume_classpath(bench.stack.layout))
    if "flink" in systems:
        flink_cp = ensure_flink(bench.stack.layout)
    flume_splits = split_keys((row_key(b) for b in sample), REGIONS)
    flink_splits = split_keys((flink_row_key(orjson.loads(b)) for b in sample), REGIONS)
    runs: list[dict[str, Any]] = []
    ok = False
    try:
        produced = bench.produce()
        print(f"produced {produced['events']:,} events of {produced['mean_event_bytes']} bytes "
              f"in {produced['produce_s']} s", flush=True)
        rows_file = bench.prebuild() if "loader" in systems else None
        for run in range(args.runs):  # alternating, so that a stack slowing down weighs on every system
            step: dict[str, Callable[[], dict[str, Any]]] = {
                "flink": partial(bench.run_flink, run, flink_cp, flink_splits),
                "flume": partial(bench.run_flume, run, flume_cp, flume_splits),
                "hbase-ingest": partial(bench.run_ingest, run)}
            if rows_file is not None:
                step["loader"] = partial(bench.run_loader, run, rows_file)
            for system in systems:
                bench.record(step[system], f"run {run}", runs)
        ok = True
    finally:
        bench.finish(ok)
    summary = summarize(runs)
    ratios = {k: v for k, v in summary.items() if k.startswith("ratio_")}
    return {
        "events": produced["events"], "runs_each": args.runs, "partitions": args.partitions,
        "mean_event_bytes": produced["mean_event_bytes"], "regions": REGIONS, "systems": list(systems),
        "versions": {"flink": FLINK_VERSION, "flink_connector_kafka": FLINK_KAFKA_VERSION,
                     "flink_connector_hbase": FLINK_HBASE_VERSION, "flume": FLUME_VERSION,
                     "hbase": HBASE_VERSION, "kafka": KAFKA_VERSION, "python": platform.python_version()},
        "machine": machine(load_start),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "setup": _setup(args, systems),
        "summary": summary,
        **ratios,
        "runs": runs,
        "table_markdown": markdown_table(summary, produced["events"], args.runs),
    }


def arguments(doc: str, runs: int, out: Path) -> argparse.ArgumentParser:
    """The options every peer benchmark takes: events, runs (default ``runs``), partitions, Flink's
    tuning, and where the results go (default ``out``)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=runs)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--flink-parallelism", type=int, help="Flink's parallelism (default 2)")
    p.add_argument("--flink-flush-rows", type=int, help="sink.buffer-flush.max-rows (default 2000)")
    p.add_argument("--flink-flush-size", help="sink.buffer-flush.max-size (default 4mb)")
    p.add_argument("--flink-max-poll-records", type=int, help="the source's properties.max.poll.records (default 5000)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=out, help="results file (default %(default)s)")
    where.add_argument("--no-save", action="store_true", help="print the figures only (smoke runs)")
    return p


def save(result: dict[str, Any], ns: argparse.Namespace) -> None:
    """Print the result's table; write the result to ``--out`` unless ``--no-save``."""
    print(result["table_markdown"])
    if not ns.no_save:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {ns.out}")


if __name__ == "__main__":
    p = arguments(__doc__ or "", 3, RESULTS / "peer.json")
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated, among %(default)s; hbase-ingest and at least one peer")
    ns = p.parse_args()
    if ns.events < REGIONS or ns.runs < 1:
        p.error(f"--events must be at least {REGIONS} and --runs at least 1")
    try:
        parse_systems(ns.systems)
    except ValueError as exc:
        p.error(str(exc))
    save(main(ns), ns)
