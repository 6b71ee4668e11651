"""A native HBase RPC client (anyio): protobuf + KeyValue cellblocks straight to the region servers,
no Thrift gateway. Pure modules (``wire``, ``messages``, ``cells``, ``regions``, ``multi``,
``failures``) hold the byte layouts and decisions; ``connection``, ``login`` (Kerberos), ``locate`` and
``client`` do the I/O."""

from connectors.hbase.native.client import NativeClient
from connectors.hbase.native.regions import Region

__all__ = ["NativeClient", "Region"]
