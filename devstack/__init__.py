"""The local Kafka + HBase stack, provisioned from Maven Central and run on loopback: one HBase JVM
(the default) or a local cluster of separate JVMs (``[stack] region_servers`` and ``gateways``), on the
local filesystem or, with ``[stack] hdfs``, on a local HDFS (:mod:`.hdfs`); with ``[stack] cdc``, also
PostgreSQL and Kafka Connect running Debezium (:mod:`.cdc`); with ``[stack] registry``, also a schema
registry, Apicurio Registry (:mod:`.registry`); with ``--kerberos``, also a KDC and a Kerberized HBase
(:mod:`.kerberos`, :mod:`.krb_hbase`)."""

from .health import DiedProcess
from .kerberos import KerberosPart, KerberosSettings
from .layout import HBASE_THRIFT_VERSION, HBASE_VERSION, KAFKA_VERSION
from .manager import LocalStack, ProcessInfo, StackStatus, UpReport
from .topology import Gateway, StackTopology

__all__ = ["HBASE_THRIFT_VERSION", "HBASE_VERSION", "KAFKA_VERSION", "DiedProcess", "Gateway", "KerberosPart",
           "KerberosSettings", "LocalStack", "ProcessInfo", "StackStatus", "StackTopology", "UpReport"]
