"""``hbase-ingest stack up | status | down``: a real Kafka broker (KRaft) and a real standalone HBase
with its Thrift1 and Thrift2 gateways, run from Maven Central jars on loopback.

Two JVMs are started and owned (pid files in the state folder):

- ``kafka``: ``kafka.Kafka`` combined broker+controller, ``127.0.0.1:<kafka_port>``.
- ``hbase``: ``infra/HBaseStack.java`` (single-file source launcher) running the HBase master, region
  server and ZooKeeper, plus Thrift1 on ``<thrift_port>`` and Thrift2 on ``<thrift2_port>``.

``up`` is idempotent: when both processes run and pass a round trip, it returns at once.
``down`` signals only those two pids (SIGTERM, then SIGKILL after a grace period).
``up`` and ``down`` hold an exclusive lock beside the state folder (``LocalStack.exclusive``), so
an ``up`` started while a ``down`` is still stopping the servers waits for it instead of racing it
(and the other way round); a wait longer than ``lock_timeout_s`` fails with a StackError.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import StackError
from pipeline.settings import StackSettings

from .layout import HBASE_VERSION, KAFKA_VERSION, StackLayout, default_cache_dir, default_state_dir, infra_dir
from .processes import OwnedProcess, port_in_use, tail
from .provision import ensure_classpaths, ensure_tools, render_configs
from .readiness import hbase_round_trip, kafka_round_trip, wait_until

__all__ = ["LocalStack", "ProcessInfo", "StackStatus", "UpReport"]

_CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"
_KAFKA_JVM = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
              "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# what bin/hbase adds on JDK >= 11 (kept in sync with HBase's surefire jdk11/jdk17 flags)
_HBASE_JDK17 = [
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true", "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref", "java.lang.reflect", "java.util",
        "java.util.concurrent", "jdk.internal.util.random", "java.net")],
    *[f"--add-exports={p}=ALL-UNNAMED" for p in (
        "java.base/jdk.internal.misc", "java.security.jgss/sun.security.krb5", "java.base/sun.net.dns",
        "java.base/sun.net.util")],
]


#: Stack port labels (as ``status`` shows them) -> the ``[stack]`` setting that holds each port.
_PORT_SETTINGS = {"kafka": "kafka_port", "kafka controller": "kafka_controller_port",
                  "zookeeper": "zookeeper_port", "hbase master": "master_port",
                  "hbase regionserver": "regionserver_port", "thrift1": "thrift_port",
                  "thrift2": "thrift2_port"}


@dataclass(frozen=True)
class ProcessInfo:
    name: str
    pid: int | None
    rss_mb: float | None
    log: Path


@dataclass(frozen=True)
class StackStatus:
    state_dir: Path
    cache_dir: Path
    kafka_version: str
    hbase_version: str
    processes: list[ProcessInfo]
    ports: dict[str, int]

    @property
    def running(self) -> bool:
        return all(p.pid is not None for p in self.processes)


@dataclass
class UpReport:
    reused: bool
    downloaded: bool
    timings_s: dict[str, float] = field(default_factory=dict)


class LocalStack:
    """The local servers described by :class:`StackSettings`."""

    def __init__(self, settings: StackSettings | None = None) -> None:
        self.settings = settings or StackSettings()
        s = self.settings
        self.layout = StackLayout(s.cache_dir or default_cache_dir(), s.state_dir or default_state_dir(),
                                  infra_dir())
        self.kafka = OwnedProcess("kafka", self.layout.pid_file("kafka"), self.layout.log_file("kafka"))
        self.hbase = OwnedProcess("hbase", self.layout.pid_file("hbase"), self.layout.log_file("hbase"))

    def __repr__(self) -> str:
        return f"LocalStack(state={self.layout.state}, kafka={self.kafka.pid()}, hbase={self.hbase.pid()})"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.settings.kafka_port}"

    def _ports(self) -> dict[str, int]:
        """Label -> port, for every port of :data:`_PORT_SETTINGS`."""
        return {label: getattr(self.settings, name) for label, name in _PORT_SETTINGS.items()}

    def status(self) -> StackStatus:
        return StackStatus(
            state_dir=self.layout.state, cache_dir=self.layout.cache, kafka_version=KAFKA_VERSION,
            hbase_version=HBASE_VERSION,
            processes=[ProcessInfo(p.name, p.pid(), p.rss_mb(), p.log_file) for p in (self.kafka, self.hbase)],
            ports=self._ports())

    def check_ready(self, timeout_s: float = 10.0) -> None:
        """Both round trips, once. Raises on failure."""
        kafka_round_trip(self.bootstrap, timeout_s)
        hbase_round_trip("127.0.0.1", self.settings.thrift_port, self.settings.thrift2_port, timeout_s)

    @contextlib.contextmanager
    def exclusive(self, lock_timeout_s: float = 300.0) -> Iterator[None]:
        """Hold the stack's lock (see the module docstring); waits up to ``lock_timeout_s``."""
        lock = self.layout.lock_file
        lock.parent.mkdir(parents=True, exist_ok=True)
        with open(lock, "a+") as fh:
            deadline = time.monotonic() + lock_timeout_s
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise StackError(
                            f"another `stack up` or `stack down` has held {lock} for {lock_timeout_s:.0f} s; "
                            "wait for it to finish, or stop it") from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def up(self) -> UpReport:
        """Provision and start what is not running, then wait until both servers answer."""
        with self.exclusive(self.settings.start_timeout_s + 120):
            return self._up()

    def _up(self) -> UpReport:
        t0 = time.monotonic()
        if self.kafka.pid() is not None and self.hbase.pid() is not None:
            try:
                self.check_ready(timeout_s=5.0)
                return UpReport(reused=True, downloaded=False, timings_s={"total": time.monotonic() - t0})
            except Exception:
                pass  # still starting, or wedged: fall through and wait for readiness below
        ensure_tools()
        downloaded = ensure_classpaths(self.layout)
        t_prov = time.monotonic()
        self._check_ports()
        s = self.settings
        render_configs(self.layout, {
            "KAFKA_PORT": str(s.kafka_port), "KAFKA_CONTROLLER_PORT": str(s.kafka_controller_port),
            "ZK_PORT": str(s.zookeeper_port), "MASTER_PORT": str(s.master_port),
            "REGIONSERVER_PORT": str(s.regionserver_port), "CLIENT_RETRIES": "5",
            "CLIENT_OPERATION_TIMEOUT_MS": "30000"})
        if self.kafka.pid() is None:
            self._start_kafka()
        if self.hbase.pid() is None:
            self._start_hbase()
        self._wait_ready(time.monotonic() + s.start_timeout_s)
        t_end = time.monotonic()
        return UpReport(reused=False, downloaded=downloaded,
                        timings_s={"provision": t_prov - t0, "start": t_end - t_prov, "total": t_end - t0})

    def down(self, wipe: bool = False) -> list[str]:
        """Stop the processes this stack started (Thrift/HBase first, then Kafka). ``wipe`` also
        deletes the state folder (data, logs). Returns the names of the processes stopped."""
        with self.exclusive():
            stopped = [p.name for p in (self.hbase, self.kafka) if p.stop()]
            if wipe and self.layout.state.exists():
                shutil.rmtree(self.layout.state)
        return stopped

    # -- internals -------------------------------------------------------------------------------

    def _check_ports(self) -> None:
        ours = {"kafka": self.kafka.pid() is not None, "hbase": self.hbase.pid() is not None}
        for label, port in self._ports().items():
            owner = "kafka" if label.startswith("kafka") else "hbase"
            if not ours[owner] and port_in_use(port):
                raise StackError(
                    f"port {port} ({label}) is already in use by a process this stack did not start. "
                    f"Stop it (see `ss -ltnp 'sport = :{port}'`) or choose another port "
                    f"(HBASE_INGEST_STACK__{_PORT_SETTINGS[label].upper()} or {_PORT_SETTINGS[label]} in "
                    "[stack] of the config).")

    def _log4j(self) -> str:
        return f"-Dlog4j2.configurationFile={self.layout.conf / 'log4j2.properties'}"

    def _start_kafka(self) -> None:
        s, lay = self.settings, self.layout
        (lay.state / "kafka" / "data").mkdir(parents=True, exist_ok=True)
        cp = f"{lay.kafka_lib}/*"
        if not (lay.state / "kafka" / "data" / "meta.properties").exists():
            fmt = subprocess.run(
                ["java", "-Xmx256m", self._log4j(), "-cp", cp, "kafka.tools.StorageTool", "format",
                 "-t", _CLUSTER_ID, "-c", str(lay.conf / "server.properties"), "--ignore-formatted"],
                capture_output=True, text=True, check=False, timeout=120)
            if fmt.returncode != 0:
                raise StackError(f"formatting Kafka storage failed:\n{(fmt.stdout + fmt.stderr)[-2000:]}")
        heap = f"-Xmx{s.kafka_heap_mb}m"
        self.kafka.start(["java", f"-Xms{s.kafka_heap_mb}m", heap, *_KAFKA_JVM, self._log4j(),
                          f"-Dkafka.logs.dir={lay.logs}", "-cp", cp, "kafka.Kafka",
                          str(lay.conf / "server.properties")])

    def _start_hbase(self) -> None:
        s, lay = self.settings, self.layout
        (lay.state / "hbase").mkdir(parents=True, exist_ok=True)
        heap = s.hbase_heap_mb
        self.hbase.start([
            "java", f"-Xms{heap}m", f"-Xmx{heap}m", "-XX:+UseG1GC", "-XX:OnOutOfMemoryError=kill -9 %p",
            "-Djava.net.preferIPv4Stack=true", *_HBASE_JDK17, self._log4j(),
            "-Djava.util.logging.config.class=org.apache.hadoop.hbase.logging.JulToSlf4jInitializer",
            "-cp", f"{lay.conf / 'hbase'}:{lay.hbase_lib}/*", str(lay.infra / "HBaseStack.java"),
            str(s.thrift_port), str(s.thrift2_port)])

    def _wait_ready(self, deadline: float) -> None:
        def kafka() -> None:
            self.kafka.check_alive()
            kafka_round_trip(self.bootstrap, 10.0)

        def hbase() -> None:
            self.hbase.check_alive()
            hbase_round_trip("127.0.0.1", self.settings.thrift_port, self.settings.thrift2_port, 10.0)

        for proc, check in ((self.kafka, kafka), (self.hbase, hbase)):
            try:
                wait_until(check, deadline, pause_s=0.5)
            except StackError:
                raise
            except Exception as exc:
                raise StackError(
                    f"{proc.name} did not become ready within {self.settings.start_timeout_s:.0f} s "
                    f"(last error: {exc!r}); see {proc.log_file}; last lines:\n{tail(proc.log_file)}") from exc
