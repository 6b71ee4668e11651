"""HDFS under the local cluster (``--hdfs``) as a part of the stack (:mod:`.part`): the ``namenode`` and
``datanode-k`` processes, started between ZooKeeper and the master (:mod:`.hdfs` says why and how).

- **provision**: Hadoop's jars into the cache (:func:`~.provision.ensure_hadoop_classpath`);
- **render**: its ``core-site.xml`` and ``hdfs-site.xml`` (and on a Kerberized cluster the security the KDC's
  part gives, :meth:`.kdc_part.KdcPart.hdfs_security`, and its TLS files) into ``conf/hadoop``;
- **HBase's configuration**: :meth:`HdfsServers.hbase_config` gives HBase its root directory on HDFS and those
  two files, which the HBase JVMs read beside ``hbase-site.xml``;
- **start**: the NameNode's name folder is formatted once, before its first start (a
  ``name/current/VERSION`` file says it was); each DataNode gets its data folder. Once the last DataNode is
  launched, ``start`` waits for a file written and read back through WebHDFS: the master writes to HDFS as it
  starts;
- **ready**: that round trip (:class:`~.webhdfs.WebHdfs`; on a Kerberized cluster over HTTPS, as the service
  principal by SPNEGO). HBase keeps its data on HDFS: the stack checks this part before HBase.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Callable

from pipeline.errors import StackError

from .hbase_part import HBaseConfig
from .hdfs import hbase_fs_values, hdfs_values
from .kerberos import KerberosPart
from .launch import namenode_format_argv
from .layout import StackLayout
from .part import check, wait_for
from .processes import OwnedProcess
from .provision import ensure_hadoop_classpath, render_hdfs_configs
from .topology import HOST, ServerProcess
from .webhdfs import WebHdfs

__all__ = ["HDFS_ROLES", "HdfsServers"]

#: the roles of HDFS's processes
HDFS_ROLES = ("namenode", "datanode")


class HdfsServers:
    """The NameNode and the DataNodes of one cluster (a :class:`~.part.Part`)."""

    roles = frozenset(HDFS_ROLES)

    def __init__(self, layout: StackLayout, namenode: ServerProcess, datanodes: tuple[ServerProcess, ...],
                 procs: dict[str, OwnedProcess], argv: Callable[[ServerProcess], list[str]],
                 kerberos: KerberosPart | None, security: Callable[[int], tuple[dict[str, str], dict[str, str]]] | None,
                 start_timeout_s: float) -> None:
        """``procs``: the owned processes of ``namenode`` and ``datanodes`` by name; ``argv``: the command of
        one of them (the stack's, :func:`~.launch.server_argv`); ``kerberos``: the realm of a Kerberized
        cluster, None when HDFS runs without Kerberos; ``security``: then a Kerberized HDFS's placeholders and
        TLS files for the NameNode's HTTP port (:meth:`.kdc_part.KdcPart.hdfs_security`); ``start_timeout_s``:
        the span of ``up``'s deadline (for messages)."""
        self.layout = layout
        self.namenode = namenode
        self.datanodes = datanodes
        self.procs = procs
        self.argv = argv
        self.kerberos = kerberos
        self.security = security
        self.start_timeout_s = start_timeout_s
        #: ``core-site.xml`` and ``hdfs-site.xml`` as :meth:`render` wrote them
        self._files: dict[str, str] | None = None

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
        values = hdfs_values(self.namenode, len(self.datanodes))
        tls: dict[str, str] = {}
        if self.security is not None:
            security, tls = self.security(self.namenode.ports["namenode http"])
            values |= security
        self._files = render_hdfs_configs(self.layout, values, tls)

    def hbase_config(self) -> HBaseConfig:
        """HBase's root directory on HDFS (with the WAL settings HDFS takes) and HDFS's two files (rendered
        first when :meth:`render` has not run)."""
        if self._files is None:
            self.render()
        assert self._files is not None
        return HBaseConfig(site=hbase_fs_values(self.layout.state, self.namenode), files=dict(self._files))

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
                check(self, 10.0)
            wait_for(self.procs[self.namenode.name], hdfs, deadline, self.start_timeout_s)

    def wait_ready(self, deadline: float) -> None:
        """The round trip, retried while the NameNode runs (once when :meth:`start` waited for it already)."""
        wait_for(self.procs[self.namenode.name], lambda: check(self, 10.0), deadline, self.start_timeout_s)

    def ready(self, timeout_s: float) -> None:
        web = self.webhdfs()
        web.timeout_s = timeout_s
        web.round_trip()

    def stop(self) -> None:
        """Nothing beyond its processes: the files stay in the state folder (``down --wipe`` deletes them)."""

    def status(self) -> list[str]:
        """None of its own: its processes are in the process table, HBase's root on it is the stack's line."""
        return []

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
