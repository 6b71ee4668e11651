"""HDFS under the local cluster (``stack up --region-servers N --gateways M --hdfs``, ``[stack] hdfs``):
what it runs and how HBase is configured on it (pure: settings and paths in, config values and argv out).

**Why**: on the local filesystem HBase cannot fence a region server it declared dead. A server frozen
past its ZooKeeper session and then resumed still appends acknowledged edits to a WAL file the
master's WAL split has already read, and those edits are lost. On HDFS the master recovers the lease
of the dead server's WAL files before it splits them: the NameNode closes each file at the length
its DataNodes hold, and the zombie's next WAL sync fails, so it cannot acknowledge such an edit (it
aborts instead). This is how HBase runs in production.

**Processes** (:mod:`.topology`): a NameNode and ``[stack] datanodes`` DataNodes from Hadoop
:data:`~.layout.HADOOP_VERSION`'s jars (``infra/hadoop/pom.xml``: the Hadoop that HBase 2.6.1-hadoop3
is built with), on 127.0.0.1 only, data in ``<state>/hdfs`` (``name``, ``data-<k>``, ``tmp``). The
NameNode is formatted once, before its first start (:func:`format_args`; a ``name/current/VERSION``
file says it was). Each DataNode gets its data folder and ports as ``-D`` options
(:func:`datanode_options`), so one ``hdfs-site.xml`` serves every process. The Maven jars carry no
web UI resources; the HTTP servers, which Hadoop 3 cannot switch off, get empty ``webapps`` folders
(:data:`WEBAPPS`) and serve WebHDFS only: the readiness probe writes and reads a file through it.

**HBase on it** (:func:`hbase_fs_values`): ``hbase.rootdir=hdfs://127.0.0.1:<namenode_port>/hbase``
(WALs under it), ``hbase.unsafe.stream.capability.enforce`` at HBase's default, true (HDFS has
hflush/hsync), and the ``asyncfs`` WAL provider, HBase's default and what production runs: its
fan-out output writes each WAL edit to the DataNode pipeline in parallel from the region server's
event loop, where FSHLog's ``filesystem`` provider goes through the classic DFSOutputStream. It
relies on HDFS client internals that HBase 2.6 opens by reflection; on JDK 17 that needs the
``--add-opens`` options every HBase JVM already runs with (:data:`~.launch.HBASE_JDK17`).
``dfs.replication`` is ``min(3, datanodes)`` (:func:`replication`).
"""

from __future__ import annotations

from pathlib import Path

from .topology import HOST, ServerProcess

__all__ = ["CLUSTER_ID", "HBASE_ROOT", "WAL_PROVIDER", "WEBAPPS", "datanode_options", "format_args",
           "hbase_fs_values", "hdfs_values", "replication"]

#: the HDFS cluster id given at format time (any fixed string: one NameNode, its own DataNodes)
CLUSTER_ID = "hbase-ingest"
#: HBase's root directory in HDFS
HBASE_ROOT = "/hbase"
#: the WAL provider HBase uses on HDFS (see the module docstring)
WAL_PROVIDER = "asyncfs"
#: the folders HttpServer2 looks up on the classpath before it serves anything (left empty: no UI)
WEBAPPS = ("hdfs", "datanode", "static")


def replication(datanodes: int) -> int:
    """``dfs.replication``: HDFS's default of 3, or one copy per DataNode when there are fewer."""
    return min(3, datanodes)


def hbase_fs_values(state: Path, namenode: ServerProcess | None) -> dict[str, str]:
    """The filesystem placeholders of ``hbase-site.xml.in``: ROOTDIR, STREAM_CAPABILITY_ENFORCE, WAL_PROVIDER.
    ``state``: the stack's state folder; ``namenode``: the topology's NameNode, None for the local filesystem."""
    if namenode is None:
        return {"ROOTDIR": f"file://{state}/hbase/root", "STREAM_CAPABILITY_ENFORCE": "false",
                "WAL_PROVIDER": "filesystem"}
    return {"ROOTDIR": f"hdfs://{namenode.host}:{namenode.ports['namenode']}{HBASE_ROOT}",
            "STREAM_CAPABILITY_ENFORCE": "true", "WAL_PROVIDER": WAL_PROVIDER}


def hdfs_values(namenode: ServerProcess, datanodes: int) -> dict[str, str]:
    """The placeholders of ``core-site.xml.in`` and ``hdfs-site.xml.in`` for the topology's NameNode and
    its ``datanodes`` DataNodes (STATE is added by the renderer). CORE_SECURITY and HDFS_SECURITY are empty:
    a Kerberized cluster fills them (:func:`.krb_cluster.hdfs_security`). A NameNode in a namespace
    (``[stack] netns``) takes its DataNodes by address: HDFS_SECURITY then turns off the reverse lookup of
    their addresses at registration, which the bridge's addresses have no name for."""
    netns = namenode.host != HOST
    return {"NAMENODE_HOST": namenode.host, "NAMENODE_PORT": str(namenode.ports["namenode"]),
            "NAMENODE_HTTP_PORT": str(namenode.ports["namenode http"]),
            "REPLICATION": str(replication(datanodes)),
            "REPLACE_DATANODE": "true" if datanodes >= 3 else "false",
            "CORE_SECURITY": "", "HDFS_SECURITY": _NO_HOSTNAME_CHECK if netns else ""}


_NO_HOSTNAME_CHECK = ("  <property><name>dfs.namenode.datanode.registration.ip-hostname-check</name>"
                      "<value>false</value></property>\n")


def datanode_options(proc: ServerProcess, data_dir: str) -> list[str]:
    """The generic ``-D`` options that give DataNode ``proc`` its own folder and ports on its address
    (loopback, or its namespace's). Its web port is both the HTTP and the HTTPS address: a Kerberized HDFS
    serves HTTPS only, a plain one HTTP only."""
    p, host = proc.ports, proc.host
    return ["-D", f"dfs.datanode.data.dir=file://{data_dir}",
            "-D", f"dfs.datanode.address={host}:{p['datanode']}",
            "-D", f"dfs.datanode.ipc.address={host}:{p['datanode ipc']}",
            "-D", f"dfs.datanode.http.address={host}:{p['datanode http']}",
            "-D", f"dfs.datanode.https.address={host}:{p['datanode http']}",
            "-D", f"dfs.datanode.hostname={host}"]


def format_args() -> list[str]:
    """The NameNode's arguments that format its name folder (run once, before its first start)."""
    return ["-format", "-nonInteractive", "-clusterId", CLUSTER_ID]
