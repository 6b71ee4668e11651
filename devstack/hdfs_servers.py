"""HDFS under the local cluster (``--hdfs``) as a part of the stack (:mod:`.part`): the ``namenode`` and
``datanode-k`` processes, started between ZooKeeper and the master (:mod:`.hdfs` says why and how).

- **provision**: Hadoop's jars into the cache (:func:`~.provision.ensure_hadoop_classpath`);
- **render**: nothing of its own: its ``core-site.xml`` and ``hdfs-site.xml`` are rendered with the core's
  configuration (they are copied beside ``hbase-site.xml``, and a Kerberized cluster's security goes into
  them), see :mod:`.part`'s open points;
- **start**: the NameNode's name folder is formatted once, before its first start (a
  ``name/current/VERSION`` file says it was); each DataNode gets its data folder. Once the last DataNode is
  launched, ``start`` waits for a file written and read back through WebHDFS: the master writes to HDFS as it
  starts;
- **ready**: that round trip (:class:`~.webhdfs.WebHdfs`; on a Kerberized cluster over HTTPS, as the service
  principal by SPNEGO). HBase keeps its data on HDFS (:attr:`HdfsServers.beneath_hbase`), so the stack
  checks it first in HBase's own round trip.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Callable

from pipeline.errors import StackError

from .kerberos import KerberosPart
from .launch import namenode_format_argv
from .layout import StackLayout
from .part import wait_for
from .processes import OwnedProcess
from .provision import ensure_hadoop_classpath
from .topology import HOST, ServerProcess
from .webhdfs import WebHdfs

__all__ = ["HDFS_ROLES", "HdfsServers"]

#: the roles of HDFS's processes
HDFS_ROLES = ("namenode", "datanode")


class HdfsServers:
    """The NameNode and the DataNodes of one cluster (a :class:`~.part.Part`)."""

    roles = frozenset(HDFS_ROLES)
    beneath_hbase = True
    core = False

    def __init__(self, layout: StackLayout, namenode: ServerProcess, datanodes: tuple[ServerProcess, ...],
                 procs: dict[str, OwnedProcess], argv: Callable[[ServerProcess], list[str]],
                 kerberos: KerberosPart | None, start_timeout_s: float) -> None:
        """``procs``: the owned processes of ``namenode`` and ``datanodes`` by name; ``argv``: the command of
        one of them (the core's, :func:`~.launch.server_argv`); ``kerberos``: the realm of a Kerberized
        cluster, None when HDFS runs without Kerberos; ``start_timeout_s``: the span of ``up``'s deadline (for
        messages)."""
        self.layout = layout
        self.namenode = namenode
        self.datanodes = datanodes
        self.procs = procs
        self.argv = argv
        self.kerberos = kerberos
        self.start_timeout_s = start_timeout_s

    @property
    def what(self) -> str:
        return f"HDFS (NameNode {self.namenode.host}:{self.namenode.ports['namenode']})"

    def webhdfs(self) -> WebHdfs:
        """WebHDFS of the NameNode; on a Kerberized cluster over HTTPS, as the service principal by SPNEGO
        (:mod:`.krb_cluster`)."""
        port = self.namenode.ports["namenode http"]
        if self.kerberos is None:
            return WebHdfs(self.namenode.host, port)
        from .krb_client import service_spnego  # gssapi is loaded only by stacks with Kerberos

        return WebHdfs(HOST, port, tls=ssl.create_default_context(cafile=self.kerberos.ca_file),
                       negotiate=service_spnego(self.kerberos))

    def provisioned(self) -> bool:
        """True: its jars are cached before its processes first start."""
        return True

    def provision(self) -> bool:
        return ensure_hadoop_classpath(self.layout)

    def render(self) -> None:
        """Nothing of its own (see the module docstring)."""

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Format the NameNode (once) before it starts, make a DataNode's folder before it starts; after the
        last DataNode, wait until HDFS answers its round trip (the master, started next, writes to it)."""
        if proc.role == "namenode":
            self._format_namenode()
        if proc.role == "datanode":
            self.layout.datanode_dir(proc.name).mkdir(parents=True, exist_ok=True)
        self.procs[proc.name].start(self.argv(proc))
        if proc.role == "datanode" and proc == self.datanodes[-1]:
            datanodes = [self.procs[d.name] for d in self.datanodes]

            def hdfs() -> None:
                for d in datanodes:
                    d.check_alive()
                self._round_trip(10.0)
            wait_for(self.procs[self.namenode.name], hdfs, deadline, self.start_timeout_s)

    def wait_ready(self, deadline: float) -> None:
        """Nothing: :meth:`start` waited for HDFS before the master started, and HBase's round trip checks it
        again (:attr:`beneath_hbase`)."""

    def ready(self, timeout_s: float) -> None:
        web = self.webhdfs()
        web.timeout_s = timeout_s
        web.round_trip()

    def stop(self) -> None:
        """Nothing beyond its processes: the files stay in the state folder (``down --wipe`` deletes them)."""

    def status(self) -> list[str]:
        """None of its own: its processes are in the process table, HBase's root on it is the core's line."""
        return []

    def _round_trip(self, timeout_s: float) -> None:
        """:meth:`ready`, worded as the stack words a part's failed round trip."""
        try:
            self.ready(timeout_s)
        except Exception as exc:
            raise StackError(f"{self.what} failed its round trip: {exc!r}") from exc

    def _format_namenode(self) -> None:
        """Format the NameNode's name folder unless an earlier start did (its ``current/VERSION``)."""
        if (self.layout.hdfs / "name" / "current" / "VERSION").is_file():
            return
        self.layout.hdfs.mkdir(parents=True, exist_ok=True)
        fmt = subprocess.run(namenode_format_argv(self.layout, self.kerberos), capture_output=True, text=True,
                             check=False, timeout=120)
        if fmt.returncode != 0:
            last = (fmt.stdout + fmt.stderr).strip().splitlines()[-1:] or ["(no output)"]
            raise StackError(f"formatting the HDFS NameNode in {self.layout.hdfs / 'name'} failed "
                             f"(exit {fmt.returncode}): {last[0][:300]}")
