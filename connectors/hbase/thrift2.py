"""Loading the HBase Thrift2 IDL and opening blocking Thrift2 clients (writes, DDL with split keys,
small scan pages). Where the IDL file comes from: :mod:`connectors.hbase.thrift2_idl`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
from thriftpy2.thrift import TApplicationException, TClient, TMessageType

from connectors.hbase.thrift2_idl import resolve_idl
from connectors.hbase.transport import PLAIN, ThriftSecurity, open_transport
from pipeline.errors import ConfigError

__all__ = ["Thrift2Client", "load_idl", "open_client", "parse_idl"]

_lock = threading.Lock()
_module: ModuleType | None = None


def parse_idl(path: Path, module_name: str = "hbase2_thrift") -> ModuleType:
    """``path`` parsed as the Thrift2 IDL, registered as ``module_name`` (thriftpy2 keeps one module
    per name, in ``sys.modules``; the worker processes unpickle Thrift objects by it). A file that
    does not parse, or that does not define ``THBaseService``, is a
    :class:`~pipeline.errors.ConfigError` naming it."""
    try:
        module = thriftpy2.load(str(path), module_name=module_name)
    except Exception as exc:  # thriftpy2 raises its own parser errors, and OSError for unreadable files
        raise ConfigError(f"the Thrift2 IDL {path} does not parse: {type(exc).__name__}: {exc}") from exc
    if not hasattr(module, "THBaseService"):
        raise ConfigError(f"the Thrift2 IDL {path} defines no THBaseService: it is not HBase's thrift2 hbase.thrift")
    return module


def load_idl(path: Path | None = None) -> ModuleType:
    """The parsed Thrift2 IDL module, parsed once per process from ``path`` or, by default, from
    :func:`~connectors.hbase.thrift2_idl.resolve_idl` (which may download it once)."""
    global _module
    with _lock:
        if _module is None:
            _module = parse_idl(path or resolve_idl())
        return _module


class Thrift2Client(TClient):
    """thriftpy2's THBaseService client, keeping what :mod:`connectors.hbase.putwire` needs to send
    a message it encoded: :meth:`send`, and whether that message must carry a frame header (``framed``)."""

    def __init__(self, service: Any, protocol: Any, socket: Any, framed: bool, wrapping: Any = None) -> None:
        super().__init__(service, protocol)
        self.service = service
        self.protocol = protocol
        self.socket = socket
        self.framed = framed
        self._wrapping = wrapping  # a SASL or HTTP transport: messages go through it, not to the socket

    def receive(self, api: str) -> Any:
        """Read the reply to a call of ``api`` sent with :meth:`send`: its result, or raise what it carries
        (the IDL's exception, or a ``TApplicationException``), as thriftpy2's own client does."""
        proto = self.protocol
        _, mtype, _ = proto.read_message_begin()
        if mtype == TMessageType.EXCEPTION:
            failure = TApplicationException()
            failure.read(proto)
            proto.read_message_end()
            raise failure
        result = getattr(self.service, api + "_result")()
        result.read(proto)
        proto.read_message_end()
        if getattr(result, "success", None) is not None:
            return result.success
        for name, value in result.__dict__.items():  # the IDL's exceptions (TIOError, TIllegalArgument)
            if name != "success" and value:
                raise value
        return None

    def send(self, message: bytes | bytearray) -> None:
        """Send an encoded call message (framed when ``framed``) as the transport needs it."""
        if self._wrapping is None:
            self.socket.write(message)  # the whole message in one sendall
        else:
            self._wrapping.write(bytes(message))  # SASL's and HTTP's write take bytes only
            self._wrapping.flush()


def open_client(host: str, port: int, timeout_ms: int, *, framed: bool = False, compact: bool = False,
                security: ThriftSecurity = PLAIN) -> Any:
    """A blocking THBaseService client (a :class:`Thrift2Client`), connected as ``security`` says
    (:mod:`connectors.hbase.transport`); the caller closes it (``client.close()``). Raises thriftpy2's
    ``TTransportException`` when the gateway is unreachable, :class:`~pipeline.errors.HBaseAuthError` when
    it refuses the client."""
    idl = load_idl()
    factory: Any = TCompactProtocolFactory if compact else TBinaryProtocolFactory
    trans, sock = open_transport(host, port, timeout_ms, security, framed=framed)
    proto = factory(decode_response=False).get_protocol(trans)
    if sock is None:
        return Thrift2Client(idl.THBaseService, proto, None, False, wrapping=trans)
    return Thrift2Client(idl.THBaseService, proto, sock, framed)
