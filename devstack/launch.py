"""The command line of every server JVM of the stack (pure: settings and paths in, argv out).

Heaps (``[stack]`` settings, sized for a 2-core / 24 GB machine that also runs the clients):

- ``kafka``: ``kafka_heap_mb`` (512), fixed (-Xms = -Xmx) as Kafka's own scripts do.
- ``hbase`` (standalone): ``hbase_heap_mb`` (1536), fixed: master, region server, ZooKeeper and both
  gateways share it; hbase-site.xml gives 0.3 of it to memstores and 0.25 to the block cache.
- ``zookeeper``: ``zookeeper_heap_mb`` (128): a few hundred znodes; the serial collector, which
  costs the least CPU and memory at this size.
- ``master``: ``master_heap_mb`` (384): region states of ~2,000 regions and the procedure store.
- ``regionserver-i``: ``regionserver_heap_mb`` (1024) each, with the same fractions as the one JVM.
- ``gateway-j``: ``gateway_heap_mb`` (384): in-flight batches of at most hbase.thrift.maxWorkerThreads
  connections, and the HBase client's buffers.
- ``namenode`` and ``datanode-k`` (``--hdfs``): ``namenode_heap_mb`` and ``datanode_heap_mb`` (256 each),
  the serial collector: a few thousand files and blocks; the HBase JVMs' JDK 17 options (WebHDFS's
  JAXB and Hadoop's buffer cleaning reflect into java.base). Configuration from ``<state>/conf/hadoop``.
- ``registry`` (``--registry``): ``registry_heap_mb`` (256), the serial collector; its command is
  :func:`.registry.registry_argv`.
- ``kdc`` (``--kerberos``): MIT's ``krb5kdc`` in the foreground (:func:`.kerberos.kdc_argv`).
- ``hbase-krb`` (``--kerberos``): ``kerberos_heap_mb`` (1024; a quarter at start), the standalone JVM's
  options plus the realm's ``krb5.conf`` (:func:`kerberos_argv`, :mod:`.krb_hbase`).
- a Kerberized cluster (``--kerberos`` with region servers and gateways): the same heaps, plus the realm's
  ``krb5.conf`` and ZooKeeper's SASL (the JAAS file) on ZooKeeper, the master, every region server and every
  gateway (:mod:`.krb_cluster`); with ``--hdfs``, the realm's ``krb5.conf`` on the NameNode (and its format)
  and the DataNodes.

Cluster JVMs start with a quarter of their heap (-Xms) so that an idle cluster stays small in RSS;
every HBase JVM is killed on OutOfMemoryError (as HBase's own scripts do) so that a broken server
dies visibly (``stack status`` quotes the error) instead of limping on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .hdfs import datanode_options, format_args
from .kerberos import GATEWAY_PORT_OFFSETS, KerberosPart, KerberosSettings, cluster_qop, kdc_argv
from .krb_cluster import zookeeper_client_options, zookeeper_sasl_options
from .layout import StackLayout
from .registry import registry_argv
from .settings import StackSettings
from .topology import CLUSTER_KRB_LABELS, HOST, ServerProcess

__all__ = ["CLUSTER_ID", "HBASE_JDK17", "acl_argv", "gateway_argv", "kafka_format_argv", "kerberos_argv",
           "namenode_format_argv", "server_argv"]

CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"
_KAFKA_JVM = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
              "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# what bin/hbase adds on JDK >= 11 (kept in sync with HBase's surefire jdk11/jdk17 flags)
HBASE_JDK17 = [
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true", "--add-modules", "jdk.unsupported",
    *[f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.io", "java.nio", "sun.nio.ch", "java.lang", "jdk.internal.ref", "java.lang.reflect", "java.util",
        "java.util.concurrent", "jdk.internal.util.random", "java.net")],
    *[f"--add-exports={p}=ALL-UNNAMED" for p in (
        "java.base/jdk.internal.misc", "java.security.jgss/sun.security.krb5", "java.base/sun.net.dns",
        "java.base/sun.net.util")],
]


def _log4j(lay: StackLayout) -> str:
    return f"-Dlog4j2.configurationFile={lay.conf / 'log4j2.properties'}"


def kafka_format_argv(lay: StackLayout) -> list[str]:
    """Format Kafka's storage (once, before its first start)."""
    return ["java", "-Xmx256m", _log4j(lay), "-cp", f"{lay.kafka_lib}/*", "kafka.tools.StorageTool", "format",
            "-t", CLUSTER_ID, "-c", str(lay.conf / "server.properties"), "--ignore-formatted"]


def _hadoop_jvm(lay: StackLayout, heap_mb: int) -> list[str]:
    return ["java", f"-Xms{heap_mb // 4}m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:OnOutOfMemoryError=kill -9 %p",
            "-Djava.net.preferIPv4Stack=true", *HBASE_JDK17, _log4j(lay),
            "-cp", f"{lay.conf / 'hadoop'}:{lay.hadoop_lib}/*"]


def _with_realm(jvm: list[str], part: KerberosPart | None) -> list[str]:
    """``jvm`` with the realm's ``krb5.conf`` when ``part`` is given (a Kerberized HDFS: Hadoop's own login
    from the keytab its ``hdfs-site.xml`` names needs nothing else)."""
    return jvm if part is None else [jvm[0], f"-Djava.security.krb5.conf={part.krb5_conf}", *jvm[1:]]


def namenode_format_argv(lay: StackLayout, krb: KerberosPart | None = None) -> list[str]:
    """Format the NameNode's name folder (once, before its first start). ``krb``: a Kerberized HDFS's realm
    (the format logs in from the NameNode's keytab: the KDC must answer)."""
    return [*_with_realm(_hadoop_jvm(lay, 256), krb), "org.apache.hadoop.hdfs.server.namenode.NameNode",
            *format_args()]


def _hbase_jvm(lay: StackLayout, xms_mb: int, xmx_mb: int, extra_cp: Path | None = None,
               conf: Path | None = None) -> list[str]:
    classes = f"{extra_cp}:" if extra_cp is not None else ""
    return ["java", f"-Xms{xms_mb}m", f"-Xmx{xmx_mb}m", "-XX:+UseG1GC", "-XX:OnOutOfMemoryError=kill -9 %p",
            "-Djava.net.preferIPv4Stack=true", *HBASE_JDK17, _log4j(lay),
            "-Djava.util.logging.config.class=org.apache.hadoop.hbase.logging.JulToSlf4jInitializer",
            "-cp", f"{conf or lay.conf / 'hbase'}:{classes}{lay.hbase_lib}/*"]


def kerberos_argv(proc: ServerProcess, ks: KerberosSettings, part: KerberosPart, lay: StackLayout,
                  launcher: Path | None = None) -> list[str]:
    """The command of a ``--kerberos`` process: ``kdc`` or ``hbase-krb`` (the gateways' ports in the
    order of :data:`~.kerberos.GATEWAY_PORT_OFFSETS`)."""
    if proc.role == "kdc":
        return kdc_argv(part)
    if proc.role != "hbase-krb":
        raise ValueError(f"no Kerberos command for role {proc.role!r}")
    heap = ks.kerberos_heap_mb
    jvm = _kerberized(_hbase_jvm(lay, heap // 4, heap, launcher, lay.krb_hbase_conf), part)
    main = "HBaseStack" if launcher is not None else str(lay.infra / "HBaseStack.java")
    return [*jvm, main, "kerberos", *(str(proc.ports[label]) for label in GATEWAY_PORT_OFFSETS)]


def acl_argv(lay: StackLayout, part: KerberosPart, op: str, user: str, actions: str, scope: str,
             launcher: Path | None = None, cluster: bool = False) -> list[str]:
    """The command of one grant (``op`` "grant") or revoke ("revoke") on the Kerberized HBase (``cluster``: on
    a Kerberized cluster): a short-lived client JVM (heap 256 MB, that HBase's configuration) that logs in as
    the service principal, the superuser (:mod:`.krb_authz`). ``scope``: ``@namespace`` or a table name."""
    conf = lay.conf / "hbase" if cluster else lay.krb_hbase_conf
    jvm = _kerberized(_hbase_jvm(lay, 64, 256, launcher, conf), part, cluster)
    main = "HBaseStack" if launcher is not None else str(lay.infra / "HBaseStack.java")
    return [*jvm, "-XX:TieredStopAtLevel=1", main, "acl", op, user, actions, scope]


def _kerberized(jvm: list[str], part: KerberosPart | None, cluster: bool = False) -> list[str]:
    """``jvm`` with the realm's ``krb5.conf`` when ``part`` is given, and ZooKeeper's client: over SASL in a
    Kerberized cluster (:func:`~.krb_cluster.zookeeper_client_options`), else off. ZooKeeper's client reads
    ``zookeeper.sasl.client`` as a system property, not from ``hbase-site.xml``; the standalone Kerberized
    HBase's ZooKeeper has no SASL (Kerberos protects its RPC and gateways)."""
    if part is None:
        return jvm
    zookeeper = zookeeper_client_options(part) if cluster else ["-Dzookeeper.sasl.client=false"]
    return [jvm[0], f"-Djava.security.krb5.conf={part.krb5_conf}", *zookeeper, *jvm[1:]]


def gateway_argv(lay: StackLayout, heap_mb: int, thrift1: int, thrift2: int, options: Sequence[str] = (),
                 launcher: Path | None = None) -> list[str]:
    """The command of one gateway JVM (Thrift1 on ``thrift1``, Thrift2 on ``thrift2``, both on 127.0.0.1),
    a plain HBase client of the stack's ZooKeeper; ``options`` (HBase's Thrift server options, such as
    ``-f`` framed, ``-c`` compact, ``-hsha``) go to both servers. The cluster's gateways pass none."""
    main = "HBaseStack" if launcher is not None else str(lay.infra / "HBaseStack.java")
    return [*_hbase_jvm(lay, heap_mb // 4, heap_mb, launcher), main, "gateway", str(thrift1), str(thrift2), *options]


def _own_address(proc: ServerProcess) -> list[str]:
    """The generic options that make the master or a region server in a namespace (``[stack] netns``) bind
    to and announce its address (``hbase-site.xml`` says loopback and ``localhost``); none on loopback."""
    if proc.host == HOST:
        return []
    kind = "master" if proc.role == "master" else "regionserver"
    name = "hbase.master.hostname" if proc.role == "master" else "hbase.unsafe.regionserver.hostname"
    return ["-D", f"{name}={proc.host}", "-D", f"hbase.{kind}.ipc.address={proc.host}"]


def server_argv(proc: ServerProcess, s: StackSettings, lay: StackLayout, launcher: Path | None = None,
                krb: KerberosPart | None = None) -> list[str]:
    """The command that starts ``proc`` (one process of :func:`~.topology.plan_topology`). ``launcher``:
    the folder of the compiled ``HBaseStack`` class (:func:`~.provision.ensure_launcher`); None runs
    ``infra/HBaseStack.java`` through the JDK's source launcher. ``krb``: a Kerberized cluster's realm
    (:mod:`.krb_cluster`): ZooKeeper takes SASL logins, and the master, the region servers and the gateways
    get the realm and log in to ZooKeeper, the NameNode and DataNodes get the realm; the gateways serve
    ``kerberos-gateway`` (their SASL QOP, :func:`~.kerberos.cluster_qop`, and their plain, SASL and HTTPS
    ports) instead of ``gateway``."""
    if proc.role in ("hbase", "gateway"):
        heap = s.hbase_heap_mb if proc.role == "hbase" else s.gateway_heap_mb
        jvm = _hbase_jvm(lay, heap if proc.role == "hbase" else heap // 4, heap, launcher)
        main = "HBaseStack" if launcher is not None else str(lay.infra / "HBaseStack.java")
        if proc.role == "gateway" and krb is not None:
            ports = [proc.ports[label] for label in ("thrift1", "thrift2", *CLUSTER_KRB_LABELS)]
            qop = cluster_qop(int(proc.name.rpartition("-")[2]) - 1)  # gateway-1 is j = 0
            return [*_kerberized(jvm, krb, cluster=True), main, "kerberos-gateway", qop, *map(str, ports)]
        if proc.role == "gateway":
            argv = gateway_argv(lay, heap, proc.ports["thrift1"], proc.ports["thrift2"], (), launcher)
            return argv if proc.host == HOST else [argv[0], f"-Dhbase.stack.bind={proc.host}", *argv[1:]]
        return [*jvm, main, "standalone", str(proc.ports["thrift1"]), str(proc.ports["thrift2"])]
    if proc.role == "kafka":
        return ["java", f"-Xms{s.kafka_heap_mb}m", f"-Xmx{s.kafka_heap_mb}m", *_KAFKA_JVM, _log4j(lay),
                f"-Dkafka.logs.dir={lay.logs}", "-cp", f"{lay.kafka_lib}/*", "kafka.Kafka",
                str(lay.conf / "server.properties")]
    if proc.role == "zookeeper":
        heap = s.zookeeper_heap_mb
        sasl = zookeeper_sasl_options(krb) if krb is not None else []
        return ["java", f"-Xms{heap}m", f"-Xmx{heap}m", "-XX:+UseSerialGC", "-XX:OnOutOfMemoryError=kill -9 %p",
                "-Djava.net.preferIPv4Stack=true", *sasl, _log4j(lay), "-cp", f"{lay.hbase_lib}/*",
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(lay.conf / "zoo.cfg")]
    if proc.role == "master":
        heap = s.master_heap_mb
        return [*_kerberized(_hbase_jvm(lay, heap // 4, heap), krb, cluster=True),
                "org.apache.hadoop.hbase.master.HMaster", *_own_address(proc), "start"]
    if proc.role == "regionserver":
        heap = s.regionserver_heap_mb
        return [*_kerberized(_hbase_jvm(lay, heap // 4, heap), krb, cluster=True),
                "org.apache.hadoop.hbase.regionserver.HRegionServer",
                "-D", f"hbase.regionserver.port={proc.ports['regionserver']}", *_own_address(proc), "start"]
    if proc.role == "namenode":
        return [*_with_realm(_hadoop_jvm(lay, s.namenode_heap_mb), krb),
                "org.apache.hadoop.hdfs.server.namenode.NameNode"]
    if proc.role == "datanode":
        return [*_with_realm(_hadoop_jvm(lay, s.datanode_heap_mb), krb),
                "org.apache.hadoop.hdfs.server.datanode.DataNode",
                *datanode_options(proc, str(lay.datanode_dir(proc.name)))]
    if proc.role == "registry":
        return registry_argv(proc.ports["registry"], s, lay)
    raise ValueError(f"no command for role {proc.role!r}")
