"""Which server processes the local stack runs and on which loopback ports (pure: no I/O).

Two shapes, chosen by ``[stack] region_servers`` / ``gateways``:

- **standalone** (both 0): ``kafka`` and ``hbase``, one JVM holding the HBase master, the region
  server, ZooKeeper and both Thrift gateways.
- **cluster** (both at least 1): ``kafka``, ``zookeeper``, ``master``, ``regionserver-1`` .. ``-N`` and
  ``gateway-1`` .. ``-M``, each its own JVM. Region server ``i`` (from 1) listens on
  ``regionserver_port + i - 1``; gateway ``j`` (from 1) serves Thrift1 on ``thrift_port + 10 * (j - 1)``
  and Thrift2 on ``thrift2_port + 10 * (j - 1)`` (a step of 10 keeps the defaults 9090/9091 clear of
  Kafka's 9092/9093).
- **hdfs** (``[stack] hdfs``, a cluster only): ``namenode`` (RPC on ``namenode_port``, HTTP on
  ``namenode_port + 1``) and ``datanode-1`` .. ``-D`` (DataNode ``k`` from 1: data transfer on
  ``datanode_port + 3 * (k - 1)``, IPC on the next port, HTTP on the one after), between ZooKeeper and
  the master: HDFS answers before the master starts, and ``stack down`` stops it after HBase.
- **registry** (``[stack] registry``, on top of either shape, with or without cdc): ``registry`` (Apicurio
  Registry, HTTP on ``registry_port``), after the HBase processes and before the CDC ones: it needs
  neither, and starts at once.
- **kerberos** (``stack up --kerberos``): on the standalone shape, ``kdc`` (MIT's KDC on ``kdc_port``) and
  ``hbase-krb`` (a Kerberized standalone HBase with six gateways: :mod:`.krb_hbase`) beside the plain
  ``hbase``, after it and before the registry. On the cluster shape the cluster itself is Kerberized
  (:mod:`.krb_cluster`): ``kdc`` starts right after Kafka (every HBase server logs in from its keytab as it
  starts), and gateway ``j`` serves, beside its plain Thrift1/Thrift2 ports, SASL Thrift1/Thrift2 and
  HTTPS Thrift1/Thrift2 on ``kerberos_thrift_port + 2 .. + 5`` plus ``10 * (j - 1)``. With ``hdfs`` the
  HDFS is Kerberized too, on the same ports (the NameNode's and DataNodes' "http" ports then serve HTTPS
  only). The ports come from :class:`.kerberos.KerberosSettings`.
- **cdc** (``[stack] cdc``, on top of either shape): ``postgres`` (PostgreSQL on ``postgres_port``)
  and ``connect`` (Kafka Connect with Debezium, REST on ``connect_port``), after the HBase processes,
  so that ``stack down`` (reverse order) stops Connect first, then PostgreSQL.
- **netns** (``[stack] netns``, ``stack up --netns``, a cluster only): each process of :data:`NETNS_ROLES`
  in a network namespace of its own on a bridge (:mod:`.netns`), listening on and announcing its
  namespace's address (:attr:`ServerProcess.host`, the gateways' :attr:`Gateway.host`) on the same ports;
  Kafka and the optional parts stay on loopback. ``topology.json`` records the plan's prefix and subnet, so
  that ``stack down`` removes the namespaces and the bridge after the processes.

:func:`plan_topology` refuses a plan in which two listeners share a port, naming both.
:class:`Gateway` is the typed description other code reads (``LocalStack.topology().gateways``, and
``topology.json`` in the state folder, written by ``stack up``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Literal

from pipeline.errors import StackError

from .kerberos import GATEWAY_PORT_OFFSETS, KerberosSettings
from .netns import NetworkPlan, plan_network
from .settings import StackSettings

__all__ = ["CDC_ROLES", "CLUSTER_KRB_LABELS", "DATANODE_PORT_STEP", "GATEWAY_PORT_STEP", "HOST", "KERBEROS_ROLES",
           "NETNS_ROLES", "OPTIONAL_ROLES", "SETTING_OF_LABEL", "Gateway", "ServerProcess", "StackTopology",
           "in_namespaces", "kerberos_processes", "plan_topology", "topology_from_json"]

HOST = "127.0.0.1"
GATEWAY_PORT_STEP = 10
#: port label (as ``status`` shows it) -> the ``[stack]`` setting it derives from
SETTING_OF_LABEL = {"kafka": "kafka_port", "kafka controller": "kafka_controller_port",
                    "kafka distant": "kafka_distant_port",
                    "zookeeper": "zookeeper_port", "hbase master": "master_port", "master": "master_port",
                    "hbase regionserver": "regionserver_port", "regionserver": "regionserver_port",
                    "thrift1": "thrift_port", "thrift2": "thrift2_port", "postgres": "postgres_port",
                    "connect": "connect_port", "registry": "registry_port",
                    "namenode": "namenode_port", "namenode http": "namenode_port",
                    "datanode": "datanode_port", "datanode ipc": "datanode_port", "datanode http": "datanode_port",
                    "kdc": "kdc_port", "krb zookeeper": "kerberos_zookeeper_port", "krb master": "kerberos_master_port",
                    "krb regionserver": "kerberos_regionserver_port",
                    **dict.fromkeys(GATEWAY_PORT_OFFSETS, "kerberos_thrift_port")}
#: ports one DataNode takes from ``datanode_port`` (data transfer, IPC, HTTP)
DATANODE_PORT_STEP = 3

Role = Literal["kafka", "hbase", "zookeeper", "namenode", "datanode", "master", "regionserver", "gateway", "kdc",
               "hbase-krb", "registry", "postgres", "connect"]
_ROLES = ("kafka", "hbase", "zookeeper", "namenode", "datanode", "master", "regionserver", "gateway", "kdc",
          "hbase-krb", "registry", "postgres", "connect")
#: the roles of the CDC processes (``[stack] cdc``): neither Kafka nor HBase
CDC_ROLES = ("postgres", "connect")
#: the roles of the Kerberos part (``--kerberos``): the KDC and the Kerberized HBase, apart from the plain one
KERBEROS_ROLES = ("kdc", "hbase-krb")
#: the roles of the parts a stack adds on request (``[stack] registry``, ``cdc``, ``--kerberos``): neither
#: Kafka nor the plain HBase
OPTIONAL_ROLES = (*KERBEROS_ROLES, "registry", *CDC_ROLES)


@dataclass(frozen=True)
class Gateway:
    """One Thrift gateway JVM: Thrift1 (happybase) and Thrift2 on ``host``."""

    name: str
    host: str
    thrift_port: int
    thrift2_port: int

    def to_dict(self) -> dict[str, str | int]:
        return {"name": self.name, "host": self.host, "thrift_port": self.thrift_port,
                "thrift2_port": self.thrift2_port}


@dataclass(frozen=True)
class ServerProcess:
    """One server process of the stack: its name (pid and log file names), role and listening ports
    (label -> port; the label names the ``[stack]`` setting it derives from in messages), and the address
    it listens on and is reached at: loopback, or its namespace's address (``[stack] netns``)."""

    name: str
    role: Role
    ports: dict[str, int]
    host: str = HOST


@dataclass(frozen=True)
class StackTopology:
    """The processes of one stack, in start order (Kafka first, then HBase, then the registry and the CDC
    processes)."""

    mode: Literal["standalone", "cluster"]
    processes: tuple[ServerProcess, ...]
    gateways: tuple[Gateway, ...]
    zookeeper_port: int
    #: the namespaces of the cluster's servers (``[stack] netns``), None when every server is on loopback
    network: NetworkPlan | None = None

    @property
    def zookeeper_host(self) -> str:
        """The address ZooKeeper is reached at (its namespace's with ``netns``, else loopback)."""
        found = self.by_role("zookeeper")
        return found[0].host if found else HOST

    def process(self, name: str) -> ServerProcess:
        for p in self.processes:
            if p.name == name:
                return p
        raise KeyError(name)

    def by_role(self, role: Role) -> list[ServerProcess]:
        return [p for p in self.processes if p.role == role]

    @property
    def namenode(self) -> ServerProcess | None:
        """The HDFS NameNode (``[stack] hdfs``), None when HBase is on the local filesystem."""
        found = self.by_role("namenode")
        return found[0] if found else None

    @property
    def region_server_ports(self) -> list[int]:
        return [p.ports["regionserver"] for p in self.by_role("regionserver")]

    def to_json(self) -> str:
        """The description written to ``topology.json``: mode, ZooKeeper port, gateways, processes."""
        netns = {} if self.network is None else {
            "netns": {"prefix": self.network.prefix, "subnet": self.network.subnet}}
        return json.dumps({
            "mode": self.mode, "host": HOST, "zookeeper_port": self.zookeeper_port,
            "gateways": [g.to_dict() for g in self.gateways],
            "processes": [{"name": p.name, "role": p.role, "ports": p.ports, **({"host": p.host} if p.host != HOST
                                                                                 else {})}
                          for p in self.processes],
            **netns}, indent=2) + "\n"


def topology_from_json(text: str) -> StackTopology:
    """Read back :meth:`StackTopology.to_json`. Raises :class:`StackError` naming what is malformed."""
    try:
        data = json.loads(text)
        procs = tuple(ServerProcess(str(p["name"]), p["role"], {str(k): int(v) for k, v in p["ports"].items()},
                                    str(p.get("host", HOST)))
                      for p in data["processes"])
        gateways = tuple(Gateway(str(g["name"]), str(g["host"]), int(g["thrift_port"]), int(g["thrift2_port"]))
                         for g in data["gateways"])
        mode, zookeeper_port = data["mode"], int(data["zookeeper_port"])
        netns = data.get("netns")
        network = None if netns is None else plan_network([p.name for p in procs if p.host != HOST],
                                                          str(netns["prefix"]), str(netns["subnet"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StackError(f"the stack's topology.json is malformed ({exc!r}): run `stack up` again to rewrite it"
                         ) from exc
    if mode not in ("standalone", "cluster") or any(p.role not in _ROLES for p in procs):
        raise StackError(f"the stack's topology.json names an unknown mode or role ({mode!r}, "
                         f"{[p.role for p in procs]}): run `stack up` again to rewrite it")
    return StackTopology(mode, procs, gateways, zookeeper_port, network)


#: the secured gateways a Kerberized cluster's gateway serves beside its plain Thrift1/Thrift2
CLUSTER_KRB_LABELS = ("krb sasl thrift1", "krb sasl thrift2", "krb https thrift1", "krb https thrift2")


def kerberos_processes(ks: KerberosSettings) -> tuple[ServerProcess, ...]:
    """``kdc`` and ``hbase-krb`` with their ports (none when ``ks.kerberos`` is off)."""
    if not ks.kerberos:
        return ()
    return (_kdc(ks),
            ServerProcess("hbase-krb", "hbase-krb", {
                "krb zookeeper": ks.kerberos_zookeeper_port, "krb master": ks.kerberos_master_port,
                "krb regionserver": ks.kerberos_regionserver_port,
                **{label: ks.port(label) for label in GATEWAY_PORT_OFFSETS}}))


def _kdc(ks: KerberosSettings) -> ServerProcess:
    return ServerProcess("kdc", "kdc", {"kdc": ks.kdc_port})


def _gateway(g: Gateway, j: int, ks: KerberosSettings) -> ServerProcess:
    """Gateway ``j`` (from 0) of a cluster; with Kerberos, its SASL and HTTPS ports too."""
    ports = {"thrift1": g.thrift_port, "thrift2": g.thrift2_port}
    if ks.kerberos:
        ports |= {label: ks.port(label) + GATEWAY_PORT_STEP * j for label in CLUSTER_KRB_LABELS}
    return ServerProcess(g.name, "gateway", ports)


def plan_topology(s: StackSettings, kerberos: KerberosSettings | None = None) -> StackTopology:
    """The processes and ports for ``s`` (and ``kerberos``, by default as ``s`` declares it). Raises
    :class:`StackError` when two listeners would share a port or a derived port passes 65535, naming the
    listeners and the settings to change."""
    kafka = ServerProcess("kafka", "kafka", {"kafka": s.kafka_port, "kafka controller": s.kafka_controller_port,
                                             "kafka distant": s.distant_port})
    ks = kerberos or KerberosSettings.of(s)
    if s.region_servers == 0:
        hbase = ServerProcess("hbase", "hbase", {
            "zookeeper": s.zookeeper_port, "hbase master": s.master_port, "hbase regionserver": s.regionserver_port,
            "thrift1": s.thrift_port, "thrift2": s.thrift2_port})
        gateways: tuple[Gateway, ...] = (Gateway("hbase", HOST, s.thrift_port, s.thrift2_port),)
        procs: tuple[ServerProcess, ...] = (kafka, hbase, *kerberos_processes(ks))
        mode: Literal["standalone", "cluster"] = "standalone"
    else:
        region_servers = [ServerProcess(f"regionserver-{i + 1}", "regionserver",
                                        {"regionserver": s.regionserver_port + i})
                          for i in range(s.region_servers)]
        gateways = tuple(Gateway(f"gateway-{j + 1}", HOST, s.thrift_port + GATEWAY_PORT_STEP * j,
                                 s.thrift2_port + GATEWAY_PORT_STEP * j) for j in range(s.gateways))
        procs = (kafka, *((_kdc(ks),) if ks.kerberos else ()),
                 ServerProcess("zookeeper", "zookeeper", {"zookeeper": s.zookeeper_port}), *_hdfs(s),
                 ServerProcess("master", "master", {"master": s.master_port}), *region_servers,
                 *(_gateway(g, j, ks) for j, g in enumerate(gateways)))
        mode = "cluster"
    if s.registry:
        procs = (*procs, ServerProcess("registry", "registry", {"registry": s.registry_port}))
    if s.cdc:
        procs = (*procs, ServerProcess("postgres", "postgres", {"postgres": s.postgres_port}),
                 ServerProcess("connect", "connect", {"connect": s.connect_port}))
    _check_ports(procs)
    topo = StackTopology(mode, procs, gateways, s.zookeeper_port)
    return in_namespaces(topo, s.netns_prefix, s.netns_subnet) if s.netns and mode == "cluster" else topo


#: the roles that run in a namespace of their own under ``[stack] netns`` (Kafka and the optional parts stay
#: on the host's loopback)
NETNS_ROLES = ("zookeeper", "namenode", "datanode", "master", "regionserver", "gateway")


def in_namespaces(topo: StackTopology, prefix: str, subnet: str) -> StackTopology:
    """``topo`` with each process of :data:`NETNS_ROLES` at its namespace's address (:func:`.netns.plan_network`)
    and the plan recorded; ports unchanged."""
    plan = plan_network([p.name for p in topo.processes if p.role in NETNS_ROLES], prefix, subnet)
    procs = tuple(replace(p, host=plan.address(p.name)) if p.role in NETNS_ROLES else p for p in topo.processes)
    gateways = tuple(replace(g, host=plan.address(g.name)) for g in topo.gateways)
    return replace(topo, processes=procs, gateways=gateways, network=plan)


def _hdfs(s: StackSettings) -> tuple[ServerProcess, ...]:
    if not s.hdfs:
        return ()
    namenode = ServerProcess("namenode", "namenode",
                             {"namenode": s.namenode_port, "namenode http": s.namenode_port + 1})
    datanodes = []
    for k in range(s.datanodes):
        base = s.datanode_port + DATANODE_PORT_STEP * k
        datanodes.append(ServerProcess(f"datanode-{k + 1}", "datanode",
                                       {"datanode": base, "datanode ipc": base + 1, "datanode http": base + 2}))
    return (namenode, *datanodes)


def _check_ports(procs: tuple[ServerProcess, ...]) -> None:
    seen: dict[int, str] = {}
    for p in procs:
        for label, port in p.ports.items():
            where = f"{p.name} {label}" if label != p.name else p.name
            if port > 65535:
                raise StackError(f"port {port} of {where} is past 65535: lower the [stack] base ports "
                                 "or the number of region servers/gateways")
            if port in seen:
                raise StackError(f"port {port} is assigned to both {seen[port]} and {where}: change the [stack] "
                                 "ports so that they do not overlap (region servers take regionserver_port + i, "
                                 f"gateways thrift_port/thrift2_port + {GATEWAY_PORT_STEP} * j, the NameNode "
                                 f"namenode_port and + 1, DataNodes datanode_port + {DATANODE_PORT_STEP} * k .. + 2, "
                                 "the Kerberized HBase's gateways kerberos_thrift_port .. + 5, "
                                 f"in a Kerberized cluster + {GATEWAY_PORT_STEP} * j)")
            seen[port] = where
