"""Loading the HBase Thrift2 IDL and opening blocking Thrift2 clients (used for DDL with split keys,
which Thrift1 cannot do). The IDL comes from the ``hbase-thrift`` jar the stack downloads; its path is
``$HBASE_INGEST_THRIFT2_IDL`` or the stack cache.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TBufferedTransportFactory, TFramedTransportFactory

from pipeline.errors import HBaseUnavailable

__all__ = ["load_idl", "open_client"]

_lock = threading.Lock()
_module: ModuleType | None = None


def _idl_path() -> Path:
    if env := os.environ.get("HBASE_INGEST_THRIFT2_IDL"):
        return Path(env)
    from connectors.stack.layout import StackLayout, default_cache_dir, default_state_dir, infra_dir

    return StackLayout(default_cache_dir(), default_state_dir(), infra_dir()).thrift2_idl


def load_idl(path: Path | None = None) -> ModuleType:
    """The parsed Thrift2 IDL module (parsed once per process)."""
    global _module
    with _lock:
        if _module is None:
            p = path or _idl_path()
            if not p.exists():
                raise HBaseUnavailable(
                    f"the HBase Thrift2 IDL {p} is missing: run `hbase-ingest stack up` once to fetch it, "
                    "or set HBASE_INGEST_THRIFT2_IDL")
            _module = thriftpy2.load(str(p), module_name="hbase2_thrift")
        return _module


def open_client(host: str, port: int, timeout_ms: int, *, framed: bool = False, compact: bool = False) -> Any:
    """A blocking THBaseService client; the caller closes it (``client.close()``)."""
    idl = load_idl()
    factory: Any = TCompactProtocolFactory if compact else TBinaryProtocolFactory
    proto = factory(decode_response=False)
    trans = TFramedTransportFactory() if framed else TBufferedTransportFactory()
    return make_client(idl.THBaseService, host, port, proto_factory=proto, trans_factory=trans,
                       timeout=timeout_ms)
