"""``hbase-ingest stack up | status | down``: a real Kafka broker (KRaft) and a real HBase with its
Thrift1 and Thrift2 gateways, run from Maven Central jars on loopback, in one of two shapes
(:mod:`.topology`):

- **standalone** (the default): ``kafka`` and ``hbase``, one JVM (``infra/HBaseStack.java``) holding
  the HBase master, the region server, ZooKeeper, Thrift1 on ``thrift_port`` and Thrift2 on
  ``thrift2_port``.
- **cluster** (``region_servers`` and ``gateways`` at least 1): ``kafka``, ``zookeeper``, ``master``,
  ``regionserver-i`` and ``gateway-j`` (Thrift1 + Thrift2 in one JVM each), HBase in distributed mode
  on the local filesystem; with ``hdfs`` (``stack up ... --hdfs``) on a local HDFS instead, a
  ``namenode`` and ``datanode-k`` started before the master (:mod:`.hdfs` says why and how).

With ``cdc`` (``stack up --cdc``), either shape also runs ``postgres`` and ``connect``: PostgreSQL 15
and Kafka Connect with the Debezium PostgreSQL connector (:mod:`.cdc`). An ``up`` without ``--cdc``
never stops them: a stack whose state folder holds their pid files keeps them (as ``secure`` keeps the
SASL_SSL listener), and without ``--cdc`` nothing of theirs is provisioned. With ``registry`` (``stack up
--registry``), either shape also runs ``registry``: Apicurio Registry, a schema registry with a
Confluent-compatible API at :attr:`LocalStack.registry_url` (:mod:`.registry`); kept by a later ``up``
without ``--registry`` in the same way. With ``--kerberos``, either shape also runs ``kdc`` (an MIT KDC of
a private realm, :mod:`.kerberos`); the standalone shape also ``hbase-krb`` (a Kerberized standalone HBase
with plain, SASL and HTTPS+SPNEGO Thrift gateways, :mod:`.krb_hbase`; its AccessController's grants for the
client principal are made once it is ready, :mod:`.krb_authz`) beside the plain one, while a cluster is
itself Kerberized (:mod:`.krb_cluster`: its servers log in from keytabs, its gateways serve SASL and
HTTPS+SPNEGO beside plain Thrift). Described for clients by :attr:`LocalStack.kerberos`; kept by a later
``up`` without ``--kerberos`` in the same way.

Every server belongs to one part (Kafka, HBase, HDFS, the KDC, the Kerberized HBase, the schema registry,
CDC), and LocalStack handles the parts through one interface, :class:`~.part.Part`, in the list
``LocalStack._parts`` (:mod:`.part` says in which order and why).

The one-JVM stack stays the default (``make demo``, ``make test``): on a 2-core machine it was ready in
24-35 s where a 2+2 cluster took 39-59 s, with 2 JVMs (~0.75 GB RSS) instead of 7 (~1.7 GB).

Every process has a pid file and a log in the state folder. ``up`` is idempotent: it starts what is
not running (reporting first any server that died, with the log lines that say why) and returns once
real round trips succeed (Kafka produce/consume; an HDFS file written and read back through WebHDFS;
put/get through Thrift1 and Thrift2 of every gateway;
every region server registered in ZooKeeper; a schema registered and read back by its id; a PostgreSQL
row back as its change event on Kafka; a ticket from the KDC and a call through each of the Kerberized
HBase's six gateways, the HTTPS ones refusing a request without credentials).
``down`` signals only the pids it started (SIGTERM, SIGINT for PostgreSQL's fast shutdown, then
SIGKILL after a grace period): Connect and PostgreSQL first, then the registry, gateways, region
servers, the master, the DataNodes and the NameNode, ZooKeeper, Kafka last.
``up`` and ``down`` hold an exclusive lock beside the state folder (``LocalStack.exclusive``), so
an ``up`` started while a ``down`` is still stopping the servers waits for it instead of racing it
(and the other way round); a wait longer than ``lock_timeout_s`` fails with a StackError.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pipeline.errors import StackError

from .cdc import CdcServers
from .hbase_part import HBASE_ROLES, HBasePart
from .hdfs import hbase_fs_values
from .hdfs_servers import HdfsServers
from .health import DiedProcess
from .kafka_part import KafkaPart
from .kdc_part import KdcPart
from .kerberos import KerberosPart, KerberosSettings
from .krb_kafka import SsoListener
from .krb_servers import KerberizedHBase
from .latency import PROXY_PROCESS
from .launch import server_argv
from .layout import (
    HBASE_VERSION,
    KAFKA_VERSION,
    StackLayout,
    default_cache_dir,
    default_state_dir,
    infra_dir,
)
from .netns import ensure_network, exec_prefix, remove_network
from .part import Part, check
from .pgserver import STOP_SIGNAL
from .processes import OwnedProcess, port_in_use
from .provision import ensure_classpaths, ensure_launcher, ensure_tools
from .registry import RegistryPart
from .secure import SecureListener
from .settings import StackSettings
from .topology import (
    CDC_ROLES,
    HOST,
    KERBEROS_ROLES,
    OPTIONAL_ROLES,
    SETTING_OF_LABEL,
    Gateway,
    ServerProcess,
    StackTopology,
    plan_topology,
    topology_from_json,
)
from .webhdfs import WebHdfs

__all__ = ["LocalStack", "ProcessInfo", "StackStatus", "UpReport"]


@dataclass(frozen=True)
class ProcessInfo:
    """One server process as ``status`` shows it. ``state``: running; died (its pid file is there, the
    process is gone: ``died`` says why); stopped (no pid file)."""

    name: str
    pid: int | None
    rss_mb: float | None
    log: Path
    ports: dict[str, int] = field(default_factory=dict)
    state: Literal["running", "died", "stopped"] = "stopped"
    died: DiedProcess | None = None


@dataclass(frozen=True)
class StackStatus:
    state_dir: Path
    cache_dir: Path
    kafka_version: str
    hbase_version: str
    processes: list[ProcessInfo]
    ports: dict[str, int]
    mode: Literal["standalone", "cluster"] = "standalone"
    gateways: tuple[Gateway, ...] = ()

    @property
    def running(self) -> bool:
        return all(p.state == "running" for p in self.processes)

    @property
    def died(self) -> list[DiedProcess]:
        return [p.died for p in self.processes if p.died is not None]


@dataclass
class UpReport:
    reused: bool
    downloaded: bool
    timings_s: dict[str, float] = field(default_factory=dict)
    #: servers found dead (pid file there, process gone) before this ``up`` restarted them
    died: list[DiedProcess] = field(default_factory=list)


class LocalStack:
    """The local servers described by :class:`StackSettings`."""

    def __init__(self, settings: StackSettings | None = None, topology: StackTopology | None = None,
                 kerberos: KerberosSettings | None = None) -> None:
        """``topology``: the processes to manage; by default those ``settings`` plan (:func:`plan_topology`).
        ``kerberos``: the Kerberos part's settings (by default those ``settings`` declare, see
        :class:`.kerberos.KerberosSettings`)."""
        s = settings or StackSettings()
        self.layout = StackLayout(s.cache_dir or default_cache_dir(), s.state_dir or default_state_dir(),
                                  infra_dir())
        recorded_cdc = topology is not None and any(p.role in CDC_ROLES for p in topology.processes)
        if not s.cdc and (recorded_cdc or any(self.layout.pid_file(n).exists() for n in CDC_ROLES)):
            s = s.model_copy(update={"cdc": True})  # started by an earlier `up --cdc`: kept, never taken away
        recorded_registry = topology is not None and any(p.role == "registry" for p in topology.processes)
        if not s.registry and (recorded_registry or self.layout.pid_file("registry").exists()):
            s = s.model_copy(update={"registry": True})  # likewise for `up --registry`
        ks = kerberos or KerberosSettings.of(s)
        recorded_krb = topology is not None and any(p.role in KERBEROS_ROLES for p in topology.processes)
        if not ks.kerberos and (recorded_krb or any(self.layout.pid_file(n).exists() for n in KERBEROS_ROLES)):
            # likewise for `up --kerberos`, with the ports that `up` recorded
            saved = KerberosSettings.load(self._kerberos_record) or ks
            ks = saved.model_copy(update={"kerberos": True})
        self.settings = s
        #: the Kerberos part's settings (``kerberos`` False: this stack has none)
        self.kerberos_settings = ks
        self._topology = topology or plan_topology(s, ks)
        self.procs = {p.name: self._owned(p.name) for p in self._topology.processes}
        #: the Kafka JVM, and the standalone HBase JVM (in a cluster its pid is None: see ``procs``)
        self.kafka = self.procs["kafka"]
        self.hbase = self.procs.get("hbase") or self._owned("hbase")
        self._launcher: Path | None = None
        #: the SASL_SSL listener (``--secure``; see :mod:`.secure`): where it is, whether or not it runs
        self.secure_listener = SecureListener.of(s, self.layout)
        #: PostgreSQL and Kafka Connect (``--cdc``; see :mod:`.cdc`), None when this stack has no CDC part
        self.cdc = (CdcServers(s, self.layout, self.procs["postgres"], self.procs["connect"])
                    if "connect" in self.procs else None)
        #: the KDC and the Kerberized HBase (``--kerberos``; see :mod:`.kerberos`): realm, krb5.conf, keytabs,
        #: gateways' ports; None when this stack has no Kerberos part
        self.kerberos: KerberosPart | None = None
        if "hbase-krb" in self.procs:
            self.kerberos = KerberosPart.of(ks, self.layout)
        elif "kdc" in self.procs:  # a Kerberized cluster (:mod:`.krb_cluster`)
            first = self._topology.gateways[0].thrift_port
            self.kerberos = KerberosPart.of(ks, self.layout, tuple(
                (g.thrift_port, g.thrift2_port, g.thrift_port - first) for g in self._topology.gateways))
        #: Kafka's GSSAPI/OAUTHBEARER listener (:mod:`.krb_kafka`), served when the stack is secure too
        self.sso_listener = (SsoListener.of(ks, self.secure_listener, self.kerberos) if self.kerberos is not None
                             else None)
        kerberos_procs = {p.name: self.procs[p.name] for p in self._topology.processes if p.role in KERBEROS_ROLES}
        #: the KDC (:mod:`.kdc_part`), None when this stack has no Kerberos part
        self.kdc = None if self.kerberos is None else KdcPart(
            ks, self.kerberos, self.layout, kerberos_procs["kdc"], self.secure_listener, self._kerberos_record,
            s.start_timeout_s)
        #: the Kerberized HBase beside the standalone one, or a Kerberized cluster's gateways (:mod:`.krb_servers`),
        #: None when this stack has no Kerberos part
        self.kerberized_hbase = None if self.kerberos is None else KerberizedHBase(
            ks, self.kerberos, self.layout, self.kerberized_cluster,
            {n: p for n, p in kerberos_procs.items() if n != "kdc"},
            self.procs.get("hbase-krb") or self.procs.get("hbase") or self.procs["master"], self.secure_listener,
            lambda: self._launcher, s.start_timeout_s)
        cluster_kdc = self.kdc if self.kerberized_cluster else None
        #: HDFS under a cluster (``--hdfs``; see :mod:`.hdfs_servers`), None when HBase is on the local filesystem
        nn = self._topology.namenode
        self.hdfs = None if nn is None else HdfsServers(
            self.layout, nn, tuple(self._topology.by_role("datanode")),
            {p.name: self.procs[p.name] for p in (nn, *self._topology.by_role("datanode"))}, self._argv,
            self.kerberos if self.kerberized_cluster else None,
            cluster_kdc.hdfs_security if cluster_kdc is not None else None, s.start_timeout_s)
        #: HBase: the standalone JVM, or the cluster's servers (:mod:`.hbase_part`)
        self.hbase_part = HBasePart(
            s, self.layout, self._topology,
            {p.name: self.procs[p.name] for p in self._topology.processes if p.role in HBASE_ROLES}, self._argv,
            [c for c in (cluster_kdc, self.hdfs) if c is not None], self.kerberized_cluster, s.start_timeout_s)
        #: the schema registry (``--registry``; see :mod:`.registry`), None when this stack has none
        self.registry = next((RegistryPart(s, self.layout, p, self.procs[p.name])
                              for p in self._topology.by_role("registry")), None)
        #: the Kafka broker and its listeners (:mod:`.kafka_part`)
        self.kafka_part = KafkaPart(s, self.layout, self.kafka, self.secure_listener, self.sso_listener,
                                    self._argv, self._start_kdc)
        #: every part (:class:`~.part.Part`), in the order they render, are waited for and checked (:mod:`.part`)
        self._parts: list[Part] = [part for part in (
            self.kdc, self.kafka_part, self.hdfs, self.hbase_part, self.kerberized_hbase, self.registry, self.cdc)
            if part is not None]

    @property
    def kerberized_cluster(self) -> bool:
        """Whether this stack is a Kerberized cluster (:mod:`.krb_cluster`), not a cluster or standalone HBase
        with (or without) a Kerberized HBase beside it."""
        return self._topology.mode == "cluster" and self.kerberos is not None

    @property
    def _kerberos_record(self) -> Path:
        """Where ``up --kerberos`` records the Kerberos part's settings for a later ``up`` without the flag."""
        return self.layout.state / "kerberos" / "settings.json"

    def __repr__(self) -> str:
        running = {name: p.pid() for name, p in self.procs.items()}
        return f"LocalStack(state={self.layout.state}, mode={self._topology.mode}, pids={running})"

    @classmethod
    def recorded(cls, settings: StackSettings | None = None) -> LocalStack:
        """The stack as the last ``up`` in this state folder started it (its ``topology.json``), else as
        ``settings`` plan it: what ``status`` and ``down`` act on when no shape is given."""
        plain = cls(settings)
        path = plain.layout.state / "topology.json"
        return cls(settings, topology_from_json(path.read_text())) if path.is_file() else plain

    def _owned(self, name: str) -> OwnedProcess:
        if name == "postgres":
            return OwnedProcess(name, self.layout.pid_file(name), self.layout.log_file(name), STOP_SIGNAL, forks=True)
        return OwnedProcess(name, self.layout.pid_file(name), self.layout.log_file(name))

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.settings.kafka_port}"

    @property
    def distant_bootstrap(self) -> str:
        """Kafka's DISTANT listener as its clients reach it: through the latency proxy on ``kafka_distant_port
        + 1`` (:mod:`.latency`), which the broker advertises, so that every call of such a client crosses it."""
        return f"{HOST}:{self.settings.distant_port + 1}"

    def topology(self) -> StackTopology:
        """The processes, ports and gateways of this stack (``topology.json`` in the state folder)."""
        return self._topology

    @property
    def gateways(self) -> tuple[Gateway, ...]:
        return self._topology.gateways

    @property
    def webhdfs(self) -> WebHdfs | None:
        """WebHDFS of the cluster's NameNode (``--hdfs``), None when HBase is on the local filesystem. On a
        Kerberized cluster: over HTTPS, as the service principal by SPNEGO (:mod:`.krb_cluster`)."""
        return self.hdfs.webhdfs() if self.hdfs is not None else None

    @property
    def registry_url(self) -> str | None:
        """The schema registry's Confluent-compatible API, ``http://127.0.0.1:<registry_port>/apis/ccompat/v7``
        (no trailing slash; ``--registry``), None when this stack has no registry part."""
        return self.registry.url if self.registry is not None else None

    @property
    def hbase_root(self) -> str:
        """HBase's root directory: ``hdfs://127.0.0.1:<port>/hbase`` or ``file://<state>/hbase/root``."""
        return hbase_fs_values(self.layout.state, self._topology.namenode)["ROOTDIR"]

    def hbase_pids(self) -> dict[str, int | None]:
        """Every HBase-side process (not Kafka, the registry or the CDC ones) -> its pid, or None when it is
        not running."""
        return {p.name: self.procs[p.name].pid() for p in self._hbase_side()}

    def _hbase_side(self) -> list[ServerProcess]:
        return [p for p in self._topology.processes if p.role != "kafka" and p.role not in OPTIONAL_ROLES]

    def _ports(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for proc in self._topology.processes:
            for label, port in proc.ports.items():
                named = proc.role in ("kafka", "hbase", "zookeeper", "namenode", "master", *OPTIONAL_ROLES)
                key = label if named else f"{proc.name} {label}"
                out[key] = port
        return out

    def status(self) -> StackStatus:
        infos = []
        for proc in self._topology.processes:
            owned = self.procs[proc.name]
            pid, died = owned.pid(), owned.died()
            state: Literal["running", "died", "stopped"] = (
                "running" if pid is not None else "died" if died is not None else "stopped")
            infos.append(ProcessInfo(proc.name, pid, owned.rss_mb(), owned.log_file, dict(proc.ports), state, died))
        return StackStatus(
            state_dir=self.layout.state, cache_dir=self.layout.cache, kafka_version=KAFKA_VERSION,
            hbase_version=HBASE_VERSION, processes=infos, ports=self._ports(), mode=self._topology.mode,
            gateways=self._topology.gateways)

    @property
    def secure(self) -> bool:
        """Whether Kafka has (or is to get) the SASL_SSL listener (:attr:`.kafka_part.KafkaPart.secure`)."""
        return self.kafka_part.secure

    @property
    def sso(self) -> bool:
        """Whether Kafka has (or is to get) the SSO listener (:attr:`.kafka_part.KafkaPart.sso`)."""
        return self.kafka_part.sso

    def check_ready(self, timeout_s: float = 10.0) -> None:
        """Every part's round trip once, in list order (:func:`~.part.check`). Raises on failure."""
        for part in self._parts:
            check(part, timeout_s)

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
        """Provision and start what is not running, then wait until every round trip succeeds."""
        with self.exclusive(self.settings.start_timeout_s + 120):
            return self._up()

    def _up(self) -> UpReport:
        t0 = time.monotonic()
        died = [d for p in self.procs.values() if (d := p.died()) is not None]
        if not died and all(p.pid() is not None for p in self.procs.values()) and all(
                addon.provisioned() for addon in self._parts):
            try:
                self.check_ready(timeout_s=5.0)
                return UpReport(reused=True, downloaded=False, timings_s={"total": time.monotonic() - t0})
            except Exception:
                pass  # still starting, or wedged: fall through and wait for readiness below
        self._check_other_shape()
        ensure_tools()
        downloaded = ensure_classpaths(self.layout)
        for addon in self._parts:
            downloaded = addon.provision() or downloaded
        t_prov = time.monotonic()
        self._launcher = ensure_launcher(self.layout)
        self._check_ports()
        if self._topology.network is not None:
            ensure_network(self._topology.network)
        self._render()
        deadline = time.monotonic() + self.settings.start_timeout_s
        for proc in self._topology.processes:
            if self.procs[proc.name].pid() is None:
                self._start(proc, deadline)
        self._wait_ready(deadline)
        t_end = time.monotonic()
        return UpReport(reused=False, downloaded=downloaded, died=died,
                        timings_s={"provision": t_prov - t0, "start": t_end - t_prov, "total": t_end - t0})

    def down(self, wipe: bool = False) -> list[str]:
        """Stop the processes this stack started (Kafka Connect and PostgreSQL first, then the registry,
        gateways and HBase, Kafka last), and those of the other shape if a pid file of it is there.
        ``wipe`` also deletes the state folder (data, logs). Returns the names of the processes stopped."""
        with self.exclusive():
            names = [p.name for p in reversed(self._topology.processes)]
            names += [n for n in self._pid_file_names() if n not in names]
            stopped = [n for n in names if self.procs.get(n, self._owned(n)).stop()]
            for addon in reversed(self._parts):
                addon.stop()
            if self._topology.network is not None:  # after the processes: a namespace in use outlives its name
                remove_network(self._topology.network)
            if wipe and self.layout.state.exists():
                shutil.rmtree(self.layout.state)
        return stopped

    # -- internals -------------------------------------------------------------------------------

    def _pid_file_names(self) -> list[str]:
        return sorted(p.stem for p in self.layout.state.glob("*.pid")) if self.layout.state.is_dir() else []

    def _check_other_shape(self) -> None:
        """Refuse to start one shape while processes of the other run from the same state folder."""
        foreign = [n for n in self._pid_file_names()
                   if n not in self.procs and n != PROXY_PROCESS and self._owned(n).pid() is not None]
        if foreign:
            raise StackError(
                f"the stack in {self.layout.state} runs {', '.join(foreign)}, which this {self._topology.mode} "
                "stack does not have (another region_servers/gateways setting started them): run "
                "`hbase-ingest stack down` with that setting first, or use another state_dir")

    def _check_ports(self) -> None:
        for proc in self._topology.processes:
            if self.procs[proc.name].pid() is not None or proc.host != HOST:  # a namespace's ports are its own
                continue
            for label, port in proc.ports.items():
                if port_in_use(port):
                    setting = SETTING_OF_LABEL[label]
                    where = f"HBASE_INGEST_STACK__{setting.upper()} or {setting} in [stack] of the config"
                    raise StackError(
                        f"port {port} ({label}) is already in use by a process this stack did not start. "
                        f"Stop it (see `ss -ltnp 'sport = :{port}'`) or choose another port ({where}).")

    def _render(self) -> None:
        """Every part's configuration, in list order (see :mod:`.part`), then ``topology.json``."""
        for part in self._parts:
            part.render()
        (self.layout.state / "topology.json").write_text(self._topology.to_json())

    def _start(self, proc: ServerProcess, deadline: float) -> None:
        for part in self._parts:
            if proc.role in part.roles:
                part.start(proc, deadline)
                return
        raise StackError(f"no part of the stack starts {proc.name} (role {proc.role})")

    def _start_kdc(self, deadline: float) -> None:
        """Start the KDC when it is not running (its part returns once it answers)."""
        kdc = self._topology.by_role("kdc")[0]
        if self.procs[kdc.name].pid() is None:
            self._start(kdc, deadline)

    def _argv(self, proc: ServerProcess) -> list[str]:
        """The command of a process of Kafka, HDFS or HBase (:func:`~.launch.server_argv`): with the realm of a
        Kerberized cluster, and in its namespace (``[stack] netns``) when it has one."""
        krb = self.kerberos if self.kerberized_cluster else None
        argv = server_argv(proc, self.settings, self.layout, self._launcher, krb)
        if self._topology.network is not None and proc.host != HOST:
            argv = [*exec_prefix(self._topology.network, proc.name), *argv]  # it execs: the pid stays the server's
        return argv

    def _wait_ready(self, deadline: float) -> None:
        """Every part's wait, in list order."""
        for part in self._parts:
            part.wait_ready(deadline)
