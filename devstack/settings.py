"""The local stack's settings: the ``[stack]`` table of a profile and the ``HBASE_INGEST_STACK__*``
variables, as the stack's commands, tests and benchmarks read them.

The worker's :class:`~pipeline.settings.Settings` leaves ``[stack]`` open (a mapping it does not
read). :class:`StackProfile` is the same configuration with ``[stack]`` typed as :class:`StackSettings`;
:func:`load_profile` reads it as :func:`~pipeline.settings.load_settings` reads the worker's (the same
file, variables and error messages: a misspelt ``[stack]`` key or variable is refused, naming the
intended one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from pipeline.settings import Settings, load_settings_as
from pipeline.settings_base import MAX_PORT, MAX_S, Section

__all__ = ["KerberosStackKeys", "StackProfile", "StackSettings", "load_profile", "load_stack_settings"]


class KerberosStackKeys(Section):
    """The ``[stack]`` keys of the Kerberos part (``stack up --kerberos``; ``devstack.kerberos``): an MIT
    KDC and a Kerberized HBase whose six gateways take ``kerberos_thrift_port`` .. ``+ 5`` (plain Thrift1/2, SASL
    Thrift1/2, HTTPS Thrift1/2). Loopback ports, clear of a second stack's (x90-x93, 2x81, 16x00/16x20)."""

    kerberos: bool = Field(default=False, description="also a KDC and a Kerberized HBase (devstack.kerberos)")
    kdc_port: int = Field(default=8890, ge=1, le=MAX_PORT, description="the KDC's port (UDP and TCP)")
    kerberos_zookeeper_port: int = Field(default=2182, ge=1, le=MAX_PORT)
    kerberos_master_port: int = Field(default=16700, ge=1, le=MAX_PORT)
    kerberos_regionserver_port: int = Field(default=16720, ge=1, le=MAX_PORT)
    kerberos_thrift_port: int = Field(default=9690, ge=1, le=MAX_PORT - 5,
                                 description="plain Thrift1 here; plain Thrift2 + 1, SASL Thrift1/2 + 2/+ 3, "
                                             "HTTPS Thrift1/2 + 4/+ 5")
    kerberos_heap_mb: int = Field(default=1024, ge=256, le=1024 * 1024,
                             description="the Kerberized HBase JVM's heap (master, region server, six gateways)")
    kafka_sso_port: int = Field(default=9096, ge=1, le=MAX_PORT,
                                description="with secure too: Kafka's SASL_SSL listener for GSSAPI and OAUTHBEARER "
                                            "(devstack.krb_kafka)")


class StackSettings(KerberosStackKeys):
    """The local stack started by ``hbase-ingest stack up``. Paths default to user cache/state dirs.

    ``region_servers`` and ``gateways`` both 0 (the default): one JVM holds the HBase master, the region
    server, ZooKeeper and both Thrift gateways (standalone). Both at least 1: a local cluster of separate
    JVMs, ZooKeeper on ``zookeeper_port``, the master on ``master_port``, region server ``i`` (from 0) on
    ``regionserver_port + i`` and gateway ``j`` (from 0) serving Thrift1 on ``thrift_port + 10 * j`` and
    Thrift2 on ``thrift2_port + 10 * j`` (``devstack.topology`` assigns and checks them).
    ``hdfs`` (a cluster only): HBase's root directory and WALs on a local HDFS, a NameNode and
    ``datanodes`` DataNodes on ``namenode_port`` and ``datanode_port`` (``devstack.hdfs``).
    """

    cache_dir: Path | None = None
    state_dir: Path | None = None
    kafka_port: int = Field(default=9092, ge=1, le=MAX_PORT)
    kafka_controller_port: int = Field(default=9093, ge=1, le=MAX_PORT)
    kafka_distant_port: int | None = Field(
        default=None, ge=1, le=MAX_PORT - 1,
        description="a plaintext Kafka listener advertised at the latency proxy on this port + 1, which a client "
                    "reaches through that proxy only (devstack.latency); None: kafka_port + 5")
    zookeeper_port: int = Field(default=2181, ge=1, le=MAX_PORT)
    master_port: int = Field(default=16000, ge=1, le=MAX_PORT)
    regionserver_port: int = Field(default=16020, ge=1, le=MAX_PORT)
    thrift_port: int = Field(default=9090, ge=1, le=MAX_PORT)
    thrift2_port: int = Field(default=9091, ge=1, le=MAX_PORT)
    kafka_heap_mb: int = Field(default=512, ge=128, le=1024 * 1024)
    hbase_heap_mb: int = Field(default=1536, ge=256, le=1024 * 1024,
                               description="the standalone JVM's heap (devstack.launch says why)")
    start_timeout_s: float = Field(default=180.0, gt=0, le=MAX_S)
    region_servers: int = Field(default=0, ge=0, le=16, description="0: standalone; N: a local cluster")
    gateways: int = Field(default=0, ge=0, le=16, description="Thrift1+Thrift2 gateway JVMs of the cluster")
    master_heap_mb: int = Field(default=384, ge=128, le=1024 * 1024)
    regionserver_heap_mb: int = Field(default=1024, ge=256, le=1024 * 1024)
    gateway_heap_mb: int = Field(default=384, ge=128, le=1024 * 1024)
    zookeeper_heap_mb: int = Field(default=128, ge=64, le=1024 * 1024)
    hdfs: bool = Field(default=False, description="the cluster's HBase on a local HDFS (a NameNode and `datanodes` "
                                                   "DataNodes; devstack.hdfs) instead of the local filesystem")
    datanodes: int = Field(default=1, ge=1, le=8, description="DataNodes of the local HDFS (dfs.replication: up to 3)")
    namenode_port: int = Field(default=9880, ge=1, le=MAX_PORT,
                               description="the NameNode's RPC port; its HTTP (WebHDFS) port is namenode_port + 1")
    datanode_port: int = Field(default=9884, ge=1, le=MAX_PORT,
                               description="DataNode i (from 0) on datanode_port + 3 * i (data), + 1 (IPC), + 2 (HTTP)")
    namenode_heap_mb: int = Field(default=256, ge=128, le=1024 * 1024)
    datanode_heap_mb: int = Field(default=256, ge=128, le=1024 * 1024)
    session_timeout_ms: int = Field(
        default=30_000, ge=2_000, le=120_000,
        description="ZooKeeper session of each cluster server: how soon a killed region server is declared dead")
    secure: bool = Field(default=False, description="also a SASL_SSL listener (SCRAM-SHA-512, TLS, ACLs) on Kafka")
    kafka_secure_port: int | None = Field(default=None, ge=1, le=MAX_PORT,
                                          description="the SASL_SSL listener's port; None: kafka_port + 2")
    cdc: bool = Field(default=False,
                      description="also PostgreSQL and Kafka Connect with Debezium (devstack.cdc)")
    postgres_port: int = Field(default=5433, ge=1, le=MAX_PORT,
                               description="the CDC PostgreSQL's loopback port (5433: clear of a system one on 5432)")
    postgres_bin_dir: Path | None = Field(default=None,
                                          description="PostgreSQL 15's initdb, postgres, psql; None: Debian's")
    connect_port: int = Field(default=8083, ge=1, le=MAX_PORT, description="Kafka Connect's REST port")
    connect_heap_mb: int = Field(default=512, ge=128, le=1024 * 1024)
    cdc_tables: list[Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")]] = Field(
        default_factory=lambda: ["public.orders"], min_length=1,
        description="schema.table names Debezium captures (the stack adds its probe table)")
    cdc_topic_prefix: str = Field(default="shop", pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,100}$",
                                  description="Debezium's topic.prefix: topics are <prefix>.<schema>.<table>")
    cdc_topic_partitions: int = Field(default=4, ge=1, le=1000,
                                      description="partitions of the captured tables' topics, made before Connect "
                                                  "starts (Debezium keys by primary key: a key keeps one partition)")
    registry: bool = Field(default=False,
                           description="also a schema registry, Apicurio Registry (devstack.registry)")
    registry_port: int = Field(default=8085, ge=1, le=MAX_PORT,
                               description="the registry's HTTP port (Confluent-compatible API under /apis/ccompat/v7)")
    registry_heap_mb: int = Field(default=256, ge=128, le=1024 * 1024)

    netns: bool = Field(default=False,
                        description="each cluster server in a network namespace of its own on a bridge (root; "
                                    "devstack.netns): faults cut links between servers")
    netns_prefix: str = Field(default="hi", pattern=r"^[a-z][a-z0-9]{0,7}$",
                              description="the start of the bridge's, namespaces' and veth pairs' names")
    netns_subnet: str = Field(default="10.213.0.0/24", pattern=r"^\d+\.\d+\.\d+\.\d+/\d+$",
                              description="the bridge's IPv4 subnet (.1 on the host; a /24 or larger)")

    @property
    def distant_port(self) -> int:
        """Kafka's DISTANT listener (``kafka_distant_port``, by default ``kafka_port + 5``); its latency proxy
        listens one above."""
        return self.kafka_distant_port if self.kafka_distant_port is not None else self.kafka_port + 5

    @model_validator(mode="after")
    def _cluster_shape(self) -> StackSettings:
        if (self.region_servers == 0) != (self.gateways == 0):
            raise ValueError(
                f"region_servers={self.region_servers} and gateways={self.gateways}: a local cluster needs at "
                "least one of each; set both (e.g. 2 and 2), or neither for the one-JVM stack")
        if self.hdfs and self.region_servers == 0:
            raise ValueError(
                "hdfs runs only under a local cluster: set region_servers and gateways too (e.g. `stack up "
                "--region-servers 2 --gateways 2 --hdfs`); the one-JVM stack keeps HBase on the local filesystem")
        if self.netns and self.region_servers == 0:
            raise ValueError(
                "netns runs only under a local cluster: set region_servers and gateways too (e.g. `stack up "
                "--region-servers 2 --gateways 1 --netns`); the one-JVM stack stays on loopback")
        if self.netns and self.kerberos:
            raise ValueError("netns and kerberos together are not supported: the realm's servers are on loopback")
        return self


class StackProfile(Settings):
    """A profile as the stack's commands read it: the worker's settings, ``[stack]`` validated."""

    stack: StackSettings = StackSettings()  # type: ignore[assignment]  # the worker's open mapping, typed


def load_profile(path: str | Path | None = None, **overrides: Any) -> StackProfile:
    """:func:`~pipeline.settings.load_settings` with ``[stack]`` validated (:class:`StackProfile`)."""
    return load_settings_as(StackProfile, path, **overrides)


def load_stack_settings(path: str | Path | None = None) -> StackSettings:
    """The ``[stack]`` settings of ``path`` (None: the embedded defaults) and ``HBASE_INGEST_STACK__*``."""
    return load_profile(path).stack

