"""The local test stack (``hbase-ingest stack up``): real Kafka and HBase servers provisioned from Maven Central
and Debian's packages, one module per part behind one interface (:mod:`.part`). HBase runs as one JVM (the
default) or as a local cluster of separate JVMs (``[stack] region_servers`` and ``gateways``), on the local
filesystem or, with ``[stack] hdfs``, on a local HDFS (:mod:`.hdfs_servers`), on loopback or, with ``[stack]
netns``, each server in a network namespace of its own (:mod:`.netns`); with ``[stack] cdc``, also
PostgreSQL and Kafka Connect running Debezium (:mod:`.cdc`); with ``[stack] registry``, also a schema registry,
Apicurio Registry (:mod:`.registry`); with ``--kerberos``, also a KDC (:mod:`.kdc_part`) and a Kerberized
HBase (:mod:`.krb_servers`). Of the product, only the CLI's `stack`, `demo` and `produce` commands import it,
when they run."""

from .health import DiedProcess
from .kerberos import KerberosPart, KerberosSettings
from .layout import HBASE_THRIFT_VERSION, HBASE_VERSION, KAFKA_VERSION
from .manager import LocalStack, ProcessInfo, StackStatus, UpReport
from .topology import Gateway, StackTopology

__all__ = ["HBASE_THRIFT_VERSION", "HBASE_VERSION", "KAFKA_VERSION", "DiedProcess", "Gateway", "KerberosPart",
           "KerberosSettings", "LocalStack", "ProcessInfo", "StackStatus", "StackTopology", "UpReport"]
