"""The local Kafka + HBase stack, provisioned from Maven Central and run on loopback."""

from .layout import HBASE_THRIFT_VERSION, HBASE_VERSION, KAFKA_VERSION
from .manager import LocalStack, ProcessInfo, StackStatus, UpReport

__all__ = ["HBASE_THRIFT_VERSION", "HBASE_VERSION", "KAFKA_VERSION", "LocalStack", "ProcessInfo", "StackStatus",
           "UpReport"]
