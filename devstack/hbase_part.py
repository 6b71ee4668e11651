"""HBase as a part of the local stack (:class:`HBasePart`, :mod:`.part`): the one JVM ``hbase`` (master, region
server, ZooKeeper and both gateways) of the standalone shape, or a cluster's ``zookeeper``, ``master``,
``regionserver-i`` and ``gateway-j``.

- **render**: ``hbase-site.xml`` and ``zoo.cfg`` from HBase's ports and the shape, with what other parts put
  into HBase's configuration (:class:`HBaseConfig`, asked of each part in :attr:`HBasePart.contributors`
  once that part has rendered): HDFS its root directory and the ``core-site.xml`` / ``hdfs-site.xml`` the
  HBase JVMs read from their classpath, a Kerberized cluster its security. The folder ``conf/hbase`` is
  HBase's: a file there that no part puts this time (HDFS's files after an ``up`` without ``--hdfs``) is
  removed, so that no JVM of this state folder reads a configuration of an earlier shape;
- **provision**: nothing to download (the stack caches HBase's jars with Kafka's); refuses to Kerberize a
  cluster whose servers run without Kerberos, or the other way round;
- **start**: each process from its command line (:func:`~.launch.server_argv`, in its namespace with
  ``[stack] netns``); every HBase server needs ZooKeeper, so ``start`` returns for ZooKeeper once its port
  answers;
- **ready**: every region server holds its node in ZooKeeper (the name its current run announced in its
  log), and every gateway answers a put/get through Thrift1 and a Thrift2 call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pipeline.errors import StackError

from .hdfs import hbase_fs_values
from .health import START_MARKER
from .krb_cluster import kerberized_rendered
from .layout import StackLayout, write_private
from .part import wait_for
from .processes import OwnedProcess, port_in_use, tail_lines
from .provision import render_hbase_configs
from .readiness import hbase_round_trip, registered_region_servers, serving_as
from .settings import StackSettings
from .topology import ServerProcess, StackTopology

__all__ = ["HBASE_ROLES", "HBaseConfig", "HBaseContributor", "HBasePart"]

#: the roles of HBase's processes (the standalone JVM, a cluster's servers)
HBASE_ROLES = ("hbase", "zookeeper", "master", "regionserver", "gateway")
#: the file HBase's part renders itself into ``conf/hbase``; any other file there is a contributor's
_SITE = "hbase-site.xml"


@dataclass(frozen=True)
class HBaseConfig:
    """What one part puts into HBase's configuration.

    ``site``: placeholders of ``hbase-site.xml.in`` (``ROOTDIR``, ``SECURITY``, ...), over HBase's own values;
    ``files``: name -> text of more files for ``conf/hbase``, which the HBase JVMs read from their classpath,
    written readable by their owner only (a later contributor's file replaces an earlier one's of the same
    name); ``private``: the folder names a secret (a keystore's password): it is then its owner's only."""

    site: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    private: bool = False


class HBaseContributor(Protocol):
    """A part that puts something into HBase's configuration."""

    def hbase_config(self) -> HBaseConfig:
        """What it puts there; called after its :meth:`~.part.Part.render`, before HBase's render writes."""
        ...


class HBasePart:
    """The HBase processes of one stack (a :class:`~.part.Part`; see the module docstring)."""

    roles = frozenset(HBASE_ROLES)

    def __init__(self, settings: StackSettings, layout: StackLayout, topology: StackTopology,
                 procs: dict[str, OwnedProcess], argv: Callable[[ServerProcess], list[str]],
                 contributors: Sequence[HBaseContributor], kerberized: bool, start_timeout_s: float) -> None:
        """``procs``: the owned processes of HBase's roles by name; ``argv``: the command of one of them (the
        stack's, :func:`~.launch.server_argv`); ``contributors``: the parts whose
        :meth:`HBaseContributor.hbase_config` goes into the configuration, in order; ``kerberized``: whether
        this stack is a Kerberized cluster; ``start_timeout_s``: the span of ``up``'s deadline (for messages)."""
        self.settings = settings
        self.layout = layout
        self.topology = topology
        self.procs = procs
        self.argv = argv
        self.contributors = contributors
        self.kerberized = kerberized
        self.start_timeout_s = start_timeout_s

    @property
    def what(self) -> str:
        topo = self.topology
        if topo.mode == "standalone":
            gw = topo.gateways[0]
            return f"HBase (Thrift1 {gw.thrift_port}, Thrift2 {gw.thrift2_port})"
        return f"the HBase cluster (ZooKeeper {topo.zookeeper_host}:{topo.zookeeper_port})"

    @property
    def main(self) -> OwnedProcess:
        """The process whose log a failed wait points at: the standalone JVM, or a cluster's master."""
        return self.procs.get("hbase") or self.procs["master"]

    def provisioned(self) -> bool:
        """True: its jars are cached (with Kafka's, by the stack) before it first starts."""
        return True

    def provision(self) -> bool:
        """Refuse to Kerberize a cluster whose servers run without Kerberos (or the other way round): the running
        ones would not talk to those started now. Downloads nothing: False."""
        running = [p.name for p in self._processes() if p.role != "zookeeper" and self.procs[p.name].pid()]
        if self.topology.mode != "cluster" or not running:
            return False
        started_with = kerberized_rendered(self.conf)
        if started_with != self.kerberized:
            was, want = ("with" if flag else "without" for flag in (started_with, self.kerberized))
            raise StackError(f"the cluster in {self.layout.state} runs {', '.join(running)} {was} Kerberos, and "
                             f"this `up` asks for a cluster {want} it: run `hbase-ingest stack down` first")
        return False

    @property
    def conf(self) -> Path:
        """``state/conf/hbase``: ``hbase-site.xml`` and the contributors' files."""
        return self.layout.conf / "hbase"

    def render(self) -> None:
        """``hbase-site.xml`` and ``zoo.cfg`` with the contributors' values, then their files (see the module
        docstring)."""
        s, topo = self.settings, self.topology
        values = {
            "ZK_PORT": str(s.zookeeper_port), "ZK_HOST": topo.zookeeper_host, "MASTER_PORT": str(s.master_port),
            "REGIONSERVER_PORT": str(s.regionserver_port), "CLIENT_RETRIES": "5",
            "CLIENT_OPERATION_TIMEOUT_MS": "30000", "SESSION_TIMEOUT_MS": str(s.session_timeout_ms),
            "DISTRIBUTED": "true" if topo.mode == "cluster" else "false", "SECURITY": "",
            **hbase_fs_values(self.layout.state, None)}
        files: dict[str, str] = {}
        private = False
        for part in self.contributors:
            config = part.hbase_config()
            values |= config.site
            files |= config.files
            private = private or config.private
        render_hbase_configs(self.layout, values)
        for stale in self.conf.iterdir():
            if stale.is_file() and stale.name != _SITE and stale.name not in files:
                stale.unlink()
        for name, text in files.items():
            write_private(self.conf / name, text)
        if private:
            self.conf.chmod(0o700)

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Launch ``proc``; ZooKeeper is waited for until its port answers (every HBase server needs it)."""
        for folder in ("hbase", "zookeeper"):
            (self.layout.state / folder).mkdir(parents=True, exist_ok=True)
        owned = self.procs[proc.name]
        owned.start(self.argv(proc))
        if proc.role == "zookeeper":
            wait_for(owned, lambda: _listening(proc.host, proc.ports["zookeeper"]), deadline, self.start_timeout_s)

    def wait_ready(self, deadline: float) -> None:
        """:meth:`ready`, retried while every HBase process runs, until ``deadline``."""
        procs = [self.procs[p.name] for p in self._processes()]

        def check() -> None:
            for p in procs:
                p.check_alive()
            self.ready(10.0)
        wait_for(self.main, check, deadline, self.start_timeout_s)

    def ready(self, timeout_s: float) -> None:
        """Every region server registered in ZooKeeper (a cluster), then a round trip through every gateway;
        each failure worded with the server it names."""
        topo = self.topology
        if topo.mode == "cluster":
            live = registered_region_servers(topo.zookeeper_host, topo.zookeeper_port, timeout_s)
            missing = [rs.name for rs in topo.by_role("regionserver") if not self._registered(rs, live)]
            if missing:
                raise StackError(f"{', '.join(missing)} not registered in ZooKeeper (yet)")
        for gw in topo.gateways:
            try:
                hbase_round_trip(gw.host, gw.thrift_port, gw.thrift2_port, timeout_s)
            except Exception as exc:
                raise StackError(f"gateway {gw.name} (Thrift1 {gw.thrift_port}, Thrift2 {gw.thrift2_port}) "
                                 f"failed its round trip: {exc!r}") from exc

    def stop(self) -> None:
        """Nothing beyond its processes: the data stays in the state folder (``down --wipe`` deletes it)."""

    def status(self) -> list[str]:
        """None of its own: its processes and ports are the process table's, its gateways and root the CLI's."""
        return []

    def _processes(self) -> list[ServerProcess]:
        return [p for p in self.topology.processes if p.role in self.roles]

    def _registered(self, rs: ServerProcess, live: set[tuple[int, int]]) -> bool:
        """Whether the running region server ``rs`` holds its node in ZooKeeper: the name its current
        run announced in its log, or (when that run began before the log's tail) any node on its port."""
        lines = tail_lines(self.procs[rs.name].log_file)
        starts = [i for i, line in enumerate(lines) if line.startswith(START_MARKER)]
        if not starts:
            return any(port == rs.ports["regionserver"] for port, _ in live)
        name = serving_as(lines[starts[-1] + 1:])
        return name is not None and name in live


def _listening(host: str, port: int) -> None:
    if not port_in_use(port, host):
        raise ConnectionRefusedError(f"nothing listens on {host}:{port} yet")
