"""Helpers for the fault suite (tests/integration/test_faults.py): a local cluster of its own (two region
servers, one gateway, its own Kafka) on ports clear of the shared stack and of the other cluster tests,
workers run as subprocesses against it, HBase stopped and started, regions split and moved through
``infra/RegionAdmin.java``, and the check that every event's row landed byte for byte with one
version per cell."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from connectors.hbase.thrift2 import load_idl, open_client
from connectors.kafka import TopicPartition as KafkaTP
from connectors.kafka import make_consumer, make_producer
from devstack import LocalStack
from devstack.launch import HBASE_JDK17
from devstack.layout import infra_dir
from devstack.netns import Faults
from devstack.settings import StackSettings
from pipeline.settings import HBaseClientKind, HBaseSettings, Settings, load_settings

from .worker_support import TEST_FETCH, expected_cells

#: clear of the shared stack (9092/9093, 2181, 16000/16020, 9090/9091), test_cluster_stack.py (2281,
#: 16100/16120+, 9190-9201, Kafka 9192/9193) and test_gateways.py
PORTS = {"kafka_port": 9392, "kafka_controller_port": 9393, "zookeeper_port": 2481, "master_port": 16300,
         "regionserver_port": 16320, "thrift_port": 9390, "thrift2_port": 9391}
#: a killed region server's ZooKeeper session expires after this: its regions are then reassigned
SESSION_TIMEOUT_MS = 6000


def own_stack(settings: StackSettings) -> Iterator[LocalStack]:
    """A stack of its own (its state folder and ports in ``settings``): started, yielded, then stopped with
    its state wiped, whatever happened in between. The body of a module fixture: ``yield from``."""
    stack = LocalStack(settings)
    try:
        stack.up()
        yield stack
    finally:
        stack.down(wipe=True)


def cluster_settings(state_dir: Path) -> StackSettings:
    """Two region servers and one gateway; 768 MB per region server is plenty for these tests and
    leaves room on a 2-core CI machine."""
    return StackSettings.model_validate({"state_dir": state_dir, "region_servers": 2, "gateways": 1,
                                         "session_timeout_ms": SESSION_TIMEOUT_MS, "regionserver_heap_mb": 768,
                                         **PORTS})


def hbase_settings(stack: LocalStack) -> HBaseSettings:
    gw = stack.gateways[0]
    return HBaseSettings(host=gw.host, port=gw.thrift_port, thrift2_port=gw.thrift2_port, timeout_ms=20_000)


def with_cluster(settings: Settings, stack: LocalStack, client: HBaseClientKind = "thrift") -> Settings:
    """``settings`` pointed at the cluster's Kafka and gateway; ``client="native"``: writes go over HBase's
    RPC, located through the cluster's master."""
    kafka = settings.kafka.model_copy(update={"bootstrap_servers": stack.bootstrap})
    hbase = hbase_settings(stack)
    if client == "native":
        hbase = hbase.model_copy(update={"client": client, "masters": [f"localhost:{stack.settings.master_port}"]})
    return settings.model_copy(update={"kafka": kafka, "hbase": hbase})


def index_settings(unique: str, **writer: Any) -> Settings:
    """One route of the guides' transaction design (the order index), for the long runs."""
    topic = f"orders-{unique}"
    route = {"name": "index", "topic": topic, "table": f"index_{unique}", "timestamp_field": "timestamp",
             "rowkey": "[order_number]", "columns": {"o:s": "seller_id", "o:b": "buyer_id"}}
    w = {"max_batch_rows": 500, "max_batch_age_ms": 50, "commit_interval_ms": 300, "concurrency": 4}
    w.update(writer)
    return load_settings(None, routes=[route], tables=[{"name": route["table"], "families": {"o": {"versions": 5}}}],
                         writer=w, kafka={"group_id": f"g-{unique}", "dead_letter_topic": f"dlq-{unique}",
                                          "max_poll_records": 2000, **TEST_FETCH})


# -- workers as subprocesses --------------------------------------------------------------------------


@dataclass(eq=False)
class WorkerProcess:
    """``python -m pipeline run`` against the cluster, its output in ``log`` (a file, so a chatty worker
    never blocks on a full pipe), its metrics server on ``metrics_port``."""

    config: Path
    log: Path
    stack: LocalStack
    metrics_port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    runs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: more environment for the worker; ``gateway_env`` False leaves the gateways to the profile
    env: dict[str, str] = field(default_factory=dict)
    gateway_env: bool = True

    def start(self) -> None:
        """Start a new run (a fresh metrics port each time: a killed run's port may linger)."""
        self.metrics_port = free_port()
        gw = self.stack.gateways[0]
        env = {**os.environ, "HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS": self.stack.bootstrap,
               # a killed worker's partitions go to the others after 6 s, not 30
               "HBASE_INGEST_KAFKA__SESSION_TIMEOUT_MS": "6000", "HBASE_INGEST_KAFKA__HEARTBEAT_INTERVAL_MS": "1000",
               **self.env}
        if self.gateway_env:
            env |= {"HBASE_INGEST_HBASE__HOST": gw.host, "HBASE_INGEST_HBASE__PORT": str(gw.thrift_port),
                    "HBASE_INGEST_HBASE__THRIFT2_PORT": str(gw.thrift2_port)}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pipeline", "run", "--config", str(self.config), "--log-level", "INFO",
                 "--metrics", "--metrics-port", str(self.metrics_port), "--wait"],
                stdout=out, stderr=subprocess.STDOUT, env=env)
        self.runs.append(self.proc)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, and wait for the process to be gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM (drain and commit), then SIGKILL after ``timeout_s``. Returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def rss_mb(self) -> float:
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(r"VmRSS:\s+(\d+) kB", status)
        assert match, status
        return int(match.group(1)) / 1024

    def readyz(self) -> tuple[int, str]:
        """``/readyz``'s status and body; (0, why) when the metrics server does not answer."""
        return http_get(self.metrics_port, "/readyz")

    def metric(self, name: str, label: str = "") -> float:
        """The sum of every series of ``name`` on ``/metrics`` whose labels contain ``label`` (0 when
        there is none, or the metrics server does not answer yet)."""
        code, body = http_get(self.metrics_port, "/metrics")
        if code != 200:
            assert self.alive, f"the worker exited ({self.proc and self.proc.returncode}):\n{self.output()[-3000:]}"
            return 0.0  # its metrics server is not listening yet
        total = 0.0
        for line in body.splitlines():
            if (line.startswith(name + "{") or line.startswith(name + " ")) and label in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


# -- the cluster's processes --------------------------------------------------------------------------


def hbase_names(stack: LocalStack) -> list[str]:
    """Every HBase-side process, in start order (ZooKeeper, master, region servers, gateways)."""
    return [p.name for p in stack.topology().processes if p.name != "kafka"]


def kill_9(stack: LocalStack, name: str, timeout_s: float = 30) -> int:
    """SIGKILL the stack's process ``name``; returns its pid once it is gone."""
    owned = stack.procs[name]
    pid = owned.pid()
    assert pid is not None, f"{name} is not running"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while owned.pid() is not None:
        assert time.monotonic() < deadline, f"{name} (pid {pid}) still there {timeout_s} s after SIGKILL"
        time.sleep(0.05)
    return pid


#: the iptables chain of :func:`partitioned` (one of its own, so that it is removed whole)
PARTITION_CHAIN = "HBASE_INGEST_PARTITION"


def _iptables(*args: str, check: bool = True) -> None:
    for tool in ("iptables", "ip6tables"):
        out = subprocess.run([tool, "-w", *args], capture_output=True, text=True, check=False)
        assert not check or out.returncode == 0, f"{tool} {' '.join(args)} failed: {out.stderr.strip()}"


def _heal() -> None:
    _iptables("-D", "INPUT", "-i", "lo", "-j", PARTITION_CHAIN, check=False)
    _iptables("-F", PARTITION_CHAIN, check=False)
    _iptables("-X", PARTITION_CHAIN, check=False)


def connection_ports(pid: int) -> set[int]:
    """The local ports of the established TCP connections that process ``pid`` holds (its socket inodes
    matched in this network namespace's ``/proc/net/tcp`` and ``tcp6``)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "01" and f[9] in inodes:  # 01: ESTABLISHED
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


@contextmanager
def partitioned(pid: int, listening: Iterable[int]) -> Iterator[list[int]]:
    """Cut process ``pid`` off the network until the block ends: every TCP packet on loopback to or from
    its ``listening`` ports and the local ports of the connections it holds at the cut is dropped
    (iptables and ip6tables rules in a chain of their own, removed on exit, also when the block fails).
    Packets are dropped, not refused: its peers see silence, as across a real partition, until their
    own timeouts. Connections it opens during the cut go through (iptables cannot tell a process's
    packets apart here): a ZooKeeper session it reconnects in time survives. Needs root (CAP_NET_ADMIN).
    Yields the ports cut off."""
    ports = sorted(set(listening) | connection_ports(pid))
    _heal()  # a chain left by an interrupted run
    _iptables("-N", PARTITION_CHAIN)
    try:
        for port in ports:
            for side in ("--dport", "--sport"):
                _iptables("-A", PARTITION_CHAIN, "-p", "tcp", side, str(port), "-j", "DROP")
        _iptables("-I", "INPUT", "1", "-i", "lo", "-j", PARTITION_CHAIN)
        yield ports
    finally:
        _heal()


def network_faults(stack: LocalStack) -> Faults:
    """The fault API of a cluster started with ``[stack] netns`` (:class:`devstack.netns.Faults`): links
    between its servers (and the host, :data:`devstack.netns.HOST_NODE`) cut and healed, both ways or one
    way, for a bounded time (:meth:`~devstack.netns.Faults.partitioned`)."""
    plan = stack.topology().network
    assert plan is not None, f"the stack in {stack.layout.state} does not run in network namespaces ([stack] netns)"
    return Faults(plan)


def stop_hbase(stack: LocalStack) -> None:
    """Stop every HBase process (gateways first, ZooKeeper last), as `stack down` does, Kafka left running."""
    for name in reversed(hbase_names(stack)):
        stack.procs[name].stop()


def up_until_ok(stack: LocalStack, limit_s: float = 300) -> tuple[float, list[str]]:
    """``stack.up()`` until it succeeds (a server that aborted meanwhile is started again); returns the
    seconds it took and the servers it found dead and started again. Fails after ``limit_s``."""
    t0 = time.monotonic()
    restarted: list[str] = []
    while True:
        # found down before this attempt: an attempt that fails after starting a server still counts it
        for name, proc in stack.procs.items():
            if name not in restarted and (died := proc.died()) is not None:
                restarted.append(name)
                logging.getLogger(__name__).warning("%s died: %s", name, died.headline())
        try:
            stack.up()
            return time.monotonic() - t0, restarted
        except Exception as exc:
            if time.monotonic() - t0 >= limit_s:
                raise AssertionError(f"the cluster not back within {limit_s:.0f} s: {exc}") from exc
            time.sleep(2)


def busiest_region_server(stack: LocalStack, tables: Iterable[str]) -> tuple[str, list[str]]:
    """The region server holding regions of most of ``tables`` (through ``infra/RegionAdmin.java``):
    its process name and those tables (one entry per region line it holds)."""
    placed = region_admin(stack, *(f"regions:{t}" for t in tables))
    by_port: dict[int, list[str]] = {}
    for line in placed:
        for server in line["servers"]:
            by_port.setdefault(int(server.split(",")[1]), []).append(line["table"])
    port, on_it = max(by_port.items(), key=lambda kv: len(kv[1]))
    name = next(p.name for p in stack.topology().by_role("regionserver") if p.ports["regionserver"] == port)
    return name, on_it


def region_admin(stack: LocalStack, *ops: str, timeout_s: float = 300) -> list[dict[str, Any]]:
    """Run ``infra/RegionAdmin.java`` on the stack's cached HBase jars with ``ops`` (split:TABLE:KEY,
    move:TABLE, regions:TABLE); returns its JSON line per operation."""
    source = infra_dir() / "RegionAdmin.java"
    cmd = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
           *HBASE_JDK17, "-cp", f"{stack.layout.hbase_lib}/*", str(source), stack.topology().zookeeper_host,
           str(stack.topology().zookeeper_port), *ops]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert out.returncode == 0, f"RegionAdmin {' '.join(ops)} failed ({out.returncode}):\n{out.stderr[-3000:]}"
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


# -- the final check ------------------------------------------------------------------------------------


def assert_every_row(stack: LocalStack, settings: Settings, events: Iterable[dict[str, Any]]) -> int:
    """Every event's row in every route's table, byte for byte, and nothing else; each cell has exactly
    one version, with the event's timestamp (a replay rewrites the same cell). Returns the rows checked."""
    expected: dict[str, dict[bytes, tuple[dict[bytes, bytes], int]]] = {}
    tables = {r.table for r in settings.routes}
    for e in events:
        for table, (row, cells) in _expected(settings, e).items():
            if table in tables:
                expected.setdefault(table, {})[row] = (cells, e["timestamp"])
    checked = 0
    for table, want in expected.items():
        got = scan_versions(stack, table)
        missing = [k for k in want if k not in got]
        extra = [k for k in got if k not in want]
        assert not missing and not extra, (f"{table}: {len(missing)} rows missing (e.g. {missing[:3]}), "
                                           f"{len(extra)} unexpected (e.g. {extra[:3]})")
        for row, (cells, ts) in want.items():
            values = got[row]
            columns = [cv.family + b":" + cv.qualifier for cv in values]
            assert sorted(columns) == sorted(cells), (table, row, columns)  # one version per cell
            for cv in values:
                assert cv.value == cells[cv.family + b":" + cv.qualifier], (table, row, cv)
                assert cv.timestamp == ts, (table, row, cv.timestamp, ts)
            checked += 1
    return checked


def scan_versions(stack: LocalStack, table: str, limit_s: float = 240) -> dict[bytes, list[Any]]:
    """Every row of ``table`` with every version of its cells (up to 5), as Thrift2 ``TColumnValue``
    objects, through the stack's first gateway. A region still moving after a fault (the gateway's
    client gave up with a retryable error, such as NotServingRegionException) is waited for: the
    whole scan is read again, for at most ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return _scan_versions(stack, table)
        except Exception as exc:  # thriftpy2's TIOError carries canRetry
            if not getattr(exc, "canRetry", False) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def _scan_versions(stack: LocalStack, table: str) -> dict[bytes, list[Any]]:
    idl = load_idl()
    gw = stack.gateways[0]
    client = open_client(gw.host, gw.thrift2_port, 120_000)
    got: dict[bytes, list[Any]] = {}
    try:
        scanner = client.openScanner(table.encode(), idl.TScan(maxVersions=5, caching=5000))
        try:
            while rows := client.getScannerRows(scanner, 5000):
                for r in rows:
                    got[r.row] = r.columnValues
        finally:
            client.closeScanner(scanner)
    finally:
        client.close()
    return got


def _expected(settings: Settings, event: dict[str, Any]) -> dict[str, tuple[bytes, dict[bytes, bytes]]]:
    """expected_cells for the full design, or for the index route alone (index_settings)."""
    if len(settings.routes) == 3:
        return expected_cells(settings, event)
    o = event["order_number"].encode()
    return {settings.routes[0].table: (o, {b"o:s": event["seller_id"].encode(), b"o:b": event["buyer_id"].encode()})}


# -- events -----------------------------------------------------------------------------------------------


async def produce_to_partitions(settings: Settings, topic: str, events: list[dict[str, Any]], first: int,
                                partitions: int, per_s: float | None = None) -> None:
    """Send ``events`` (numbered from ``first``) to ``topic``, event ``i`` to partition ``i % partitions``
    (so event ``i`` sits at offset ``i // partitions`` when a topic gets every event in order), at most
    ``per_s`` events per second when given."""
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        chunk = max(1, int(per_s / 10)) if per_s else 5000
        t0 = time.monotonic()
        for start in range(0, len(events), chunk):
            futs = [await producer.send(topic, orjson.dumps(e), key=str(first + start + j).encode(),
                                        partition=(first + start + j) % partitions)
                    for j, e in enumerate(events[start:start + chunk])]
            await asyncio.gather(*futs)
            if per_s:
                ahead = t0 + (start + chunk) / per_s - time.monotonic()
                if ahead > 0:
                    await anyio.sleep(ahead)
    finally:
        await producer.stop()


async def committed_offsets(settings: Settings, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (0 when none)."""
    consumer = make_consumer(settings.kafka, group_id=settings.kafka.group_id)
    await consumer.start()
    try:
        return {p: await consumer.committed(KafkaTP(topic, p)) or 0 for p in range(partitions)}
    finally:
        await consumer.stop()


def index_rows(stack: LocalStack, table: str) -> set[bytes]:
    """Every row key of ``table`` (a keys-only scan through the gateway's Thrift2)."""
    idl = load_idl()
    gw = stack.gateways[0]
    client = open_client(gw.host, gw.thrift2_port, 120_000)
    keys: set[bytes] = set()
    try:
        scanner = client.openScanner(table.encode(), idl.TScan(caching=10_000, filterString=b"KeyOnlyFilter()"))
        try:
            while rows := client.getScannerRows(scanner, 10_000):
                keys.update(r.row for r in rows)
        finally:
            client.closeScanner(scanner)
    finally:
        client.close()
    return keys
