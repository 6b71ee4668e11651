"""How a Thrift connection to a gateway is opened: plain sockets, TLS, SASL/GSSAPI (Kerberos) with a
quality of protection, and HTTP(S) with SPNEGO, for Thrift1 (happybase) and Thrift2 (thriftpy2) alike.

The gateway's HBase options each choice must match:

============================  ============================================================================
``ThriftSecurity``            HBase Thrift server (``hbase-site.xml`` of the gateway)
============================  ============================================================================
``tls``                       ``hbase.thrift.ssl.enabled = true`` (a keystore on the server)
``kerberos`` on a socket      ``hbase.thrift.security.qop`` = ``qop`` (``auth``/``auth-int``/``auth-conf``;
                              HBase also spells ``auth-conf`` ``privacy``), the gateway's principal
                              ``<service>/<host>@REALM`` (``hbase.thrift.kerberos.principal``)
``http``                      ``hbase.regionserver.thrift.http = true``; with ``kerberos``, SPNEGO:
                              ``hbase.thrift.spnego.principal`` = ``<http_service>/<host>@REALM``
============================  ============================================================================

Byte layouts on the wire:

- SASL (RFC 4752 over Thrift's SASL transport): each message is one frame, ``i32`` length + payload; with
  ``auth`` the payload is the Thrift message itself, with ``auth-int``/``auth-conf`` it is GSSAPI's
  ``wrap`` of it (signed, or signed and encrypted). Negotiation frames are ``u8`` status + ``i32`` length.
- HTTP: one ``POST <http_path>`` per Thrift call, ``Content-Type: application/x-thrift``, the unframed
  message as body; with Kerberos, ``Authorization: Negotiate <token>`` on every request (a fresh context,
  sent at once rather than after a 401: a round trip less per call). Not ``framed``: HTTP delimits.

Credentials, GSSAPI contexts and the SASL security layer: :mod:`connectors.hbase.sasl` (shared with the
native RPC client). The gateway's principal names the host the client connects to: connect to the name in
the gateway's principal (``localhost``, a FQDN), not to an IP address.

Errors: credentials that cannot be had (no ticket, a keytab without the principal, an unknown principal), a
QOP the gateway does not offer, a certificate that does not verify and an HTTP 401/403 raise
:class:`~pipeline.errors.HBaseAuthError` (not retryable, not a gateway failure: the same call would fail on
every gateway); a KDC that cannot be reached is :class:`~pipeline.errors.HBaseUnavailable`.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import happybase
from thriftpy2.thrift import TClient
from thriftpy2.transport import TBufferedTransport, TFramedTransport, TSocket, TSSLSocket, TTransportException
from thriftpy2.transport import sasl as _sasl
from thriftpy2.transport.base import TTransportBase

from connectors.hbase.sasl import GssSession, Qop, auth_failure, credentials, gss_context
from connectors.kerberos import gss_reason
from pipeline.errors import HBaseAuthError, HBaseUnavailable
from pipeline.settings import GatewaySpec, HBaseSettings

__all__ = ["PLAIN", "Qop", "ThriftSecurity", "credentials", "open_thrift1", "open_transport", "rpc_tls_context",
           "security_of", "tls_context"]

# thriftpy2's transports are untyped
_socket_class: Any = TSocket
_tls_socket_class: Any = TSSLSocket
_buffered: Any = TBufferedTransport
_framed: Any = TFramedTransport
_sasl_transport: Any = getattr(_sasl, "TCySaslClientTransport", None) or _sasl.TSaslClientTransport


@dataclass(frozen=True, slots=True)
class ThriftSecurity:
    """How to reach a gateway's port beyond the plain socket (picklable, hashable: worker processes get it).

    ``http_path`` is the path of HTTP mode's POSTs; ``check_hostname`` checks the certificate's names
    against the host connected to (the CA check itself is always on when ``tls``)."""

    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    check_hostname: bool = True
    kerberos: bool = False
    principal: str | None = None
    keytab: str | None = None
    service: str = "hbase"
    http_service: str = "HTTP"
    qop: Qop = "auth-conf"
    http: bool = False
    http_path: str = "/"

    def describe(self) -> str:
        """A short label for logs and errors (no secret: a keytab's path at most)."""
        parts = ["https" if self.http and self.tls else "http" if self.http else "tls" if self.tls else "plain"]
        if self.kerberos:
            parts.append(f"SPNEGO {self.http_service}" if self.http else f"SASL GSSAPI {self.service} qop={self.qop}")
        return " + ".join(parts)


PLAIN = ThriftSecurity()


def _path(p: Path | None) -> str | None:
    return None if p is None else str(p)


def security_of(spec: GatewaySpec, s: HBaseSettings) -> ThriftSecurity:
    """The security of gateway ``spec``: its own overrides, else the ``[hbase]`` keys."""
    transport = spec.transport or s.transport
    return ThriftSecurity(
        tls=s.tls if spec.tls is None else spec.tls, ca_file=_path(s.tls_ca_file),
        cert_file=_path(s.tls_cert_file), key_file=_path(s.tls_key_file), check_hostname=s.tls_check_hostname,
        kerberos=(spec.auth or s.auth) == "kerberos", principal=s.kerberos_principal,
        keytab=_path(s.kerberos_keytab),
        service=s.kerberos_service, http_service=s.kerberos_http_service, qop=spec.sasl_qop or s.sasl_qop,
        http=transport == "http", http_path=s.http_path)


# -- SASL GSSAPI ---------------------------------------------------------------------------------------


class GssapiSasl:
    """The SASL client thriftpy2's SASL transport drives (``start``/``step``/``encode``/``decode``/
    ``getError``) over a :class:`~connectors.hbase.sasl.GssSession` asking for ``sec.qop``: errors become
    ``getError``'s text (the transport raises it), except those of the KDC and the credentials, raised as
    they are."""

    def __init__(self, sec: ThriftSecurity, host: str) -> None:
        self._sec = sec
        self._session = GssSession(sec, host, peer=f"gateway {sec.service}/{host}",
                                   remedy="set sasl_qop to match hbase.thrift.security.qop")
        self._error = ""

    def getError(self) -> str:
        return self._error

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        return True, mechanism, self._session.start()

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        try:
            return True, self._session.respond(challenge)
        except HBaseAuthError as exc:
            self._error = str(exc)
            return False, b""

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        if not self._session.wraps:
            return True, data  # auth: the transport frames plain messages itself
        wrapped = self._session.wrap(data)
        return True, struct.pack(">I", len(wrapped)) + wrapped

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        try:
            return True, self._session.unwrap(data[4:])
        except Exception as exc:
            self._error = f"a message from the gateway did not unwrap: {gss_reason(exc)}"
            return False, b""


# -- HTTP ------------------------------------------------------------------------------------------------


class HttpTransport(TTransportBase):
    """A Thrift transport that POSTs each flushed message and reads the reply body (module docstring);
    keeps one HTTP/1.1 connection open."""

    def __init__(self, host: str, port: int, timeout_ms: int, sec: ThriftSecurity) -> None:
        self._host, self._port, self._sec = host, port, sec
        self._timeout = timeout_ms / 1000
        self._conn: http.client.HTTPConnection | None = None
        self._wbuf: list[bytes] = []
        self._rbuf = memoryview(b"")

    def is_open(self) -> bool:
        return self._conn is not None

    def open(self) -> None:
        if self._sec.tls:
            self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                     context=tls_context(self._sec))
        else:
            self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def write(self, buf: bytes) -> None:
        self._wbuf.append(bytes(buf))

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/x-thrift", "Accept": "application/x-thrift"}
        if self._sec.kerberos:
            try:
                token = gss_context(self._sec, self._sec.http_service, self._host, spnego=True).step()
            except (HBaseAuthError, HBaseUnavailable):
                raise
            except Exception as exc:
                raise auth_failure(f"Kerberos service ticket for {self._sec.http_service}/{self._host}", exc) from exc
            headers["Authorization"] = "Negotiate " + base64.b64encode(token).decode()
        return headers

    def flush(self) -> None:
        body = b"".join(self._wbuf)
        self._wbuf.clear()
        if not body:
            return
        if self._conn is None:
            self.open()
        assert self._conn is not None
        try:
            self._conn.request("POST", self._sec.http_path, body, self._headers())
            response = self._conn.getresponse()
            data = response.read()
        except ssl.SSLCertVerificationError as exc:
            self.close()
            raise HBaseAuthError(f"the gateway https://{self._host}:{self._port}'s certificate does not verify: "
                                 f"{exc.verify_message or exc}") from exc
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise TTransportException(TTransportException.UNKNOWN, f"HTTP POST to {self._host}:{self._port}: "
                                                                    f"{type(exc).__name__}: {exc}") from exc
        if response.status in (401, 403):
            self.close()
            raise HBaseAuthError(
                f"the gateway {self._host}:{self._port} refused the request: HTTP {response.status} {response.reason}"
                + ("" if self._sec.kerberos else " (it wants Kerberos: set auth = \"kerberos\")"))
        if response.status != 200:
            self.close()
            raise TTransportException(TTransportException.UNKNOWN,
                                      f"the gateway {self._host}:{self._port} answered HTTP {response.status} "
                                      f"{response.reason}")
        self._rbuf = memoryview(data)

    def read(self, sz: int) -> bytes:
        """Up to ``sz`` bytes of the last reply (socket semantics: the buffered transport above asks for
        a whole buffer); ``b""`` once it is consumed."""
        chunk, self._rbuf = self._rbuf[:sz], self._rbuf[sz:]
        return bytes(chunk)

    def _read(self, sz: int) -> bytes:
        return self.read(sz)


# -- opening ---------------------------------------------------------------------------------------------


def tls_context(sec: ThriftSecurity, for_whom: str = "the HBase gateways") -> ssl.SSLContext:
    """The client TLS context of ``sec``: the CA file (else the system's CAs), the client certificate."""
    try:
        ctx = ssl.create_default_context(cafile=sec.ca_file)
        ctx.check_hostname = sec.check_hostname
        if sec.cert_file:
            ctx.load_cert_chain(sec.cert_file, sec.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise HBaseAuthError(f"TLS files for {for_whom} (tls_ca_file {sec.ca_file}, tls_cert_file "
                             f"{sec.cert_file}): {exc}") from exc
    return ctx


def rpc_tls_context(s: HBaseSettings) -> ssl.SSLContext | None:
    """The TLS context of the native transport's connections (``rpc_tls``), None without it: the same
    ``tls_*`` files and host check as the gateways'."""
    if not s.rpc_tls:
        return None
    sec = ThriftSecurity(tls=True, ca_file=_path(s.tls_ca_file), cert_file=_path(s.tls_cert_file),
                         key_file=_path(s.tls_key_file), check_hostname=s.tls_check_hostname)
    return tls_context(sec, "HBase's RPC (rpc_tls)")


def _socket(host: str, port: int, timeout_ms: int, sec: ThriftSecurity) -> Any:
    if not sec.tls:
        return _socket_class(host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms)
    return _tls_socket_class(host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms,
                             ssl_context=tls_context(sec))


def _open(trans: Any, host: str, port: int, sec: ThriftSecurity) -> None:
    try:
        trans.open()
    except ssl.SSLCertVerificationError as exc:
        raise HBaseAuthError(f"the gateway {host}:{port}'s certificate does not verify: "
                             f"{exc.verify_message or exc}") from exc
    except TTransportException as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ssl.SSLCertVerificationError):
            raise HBaseAuthError(f"the gateway {host}:{port}'s certificate does not verify: "
                                 f"{cause.verify_message or cause}") from exc
        text = str(exc.message if hasattr(exc, "message") else exc)
        if sec.kerberos and ("SASL" in text or "Bad status" in text):
            raise HBaseAuthError(f"the gateway {host}:{port} ({sec.describe()}) refused the Kerberos login: "
                                 f"{text}") from exc
        raise


def open_transport(host: str, port: int, timeout_ms: int, sec: ThriftSecurity, *, framed: bool) -> tuple[Any, Any]:
    """``(transport, socket)``: an open Thrift transport to ``host:port`` as ``sec`` says (a Cython-compatible
    one, for thriftpy2's binary protocol), and its socket when a message encoded ahead may be written to the
    socket as it is (plain and TLS; None when SASL or HTTP wrap it). Raises as the module docstring says."""
    trans: Any
    sock: Any = None
    if sec.http:
        trans = _buffered(HttpTransport(host, port, timeout_ms, sec))
    elif sec.kerberos:
        trans = _sasl_transport(lambda: GssapiSasl(sec, host), "GSSAPI", _socket(host, port, timeout_ms, sec))
    else:
        sock = _socket(host, port, timeout_ms, sec)
        trans = _framed(sock) if framed else _buffered(sock)
    _open(trans, host, port, sec)
    return trans, sock


class _Thrift1(happybase.Connection):  # type: ignore[misc]
    """A happybase connection whose transport :func:`open_transport` opens (happybase itself knows only
    plain buffered or framed sockets), keeping its protocol in view."""

    def __init__(self, host: str, port: int, timeout_ms: int, transport: str, protocol: str,
                 sec: ThriftSecurity) -> None:
        self._security = sec
        self._framed = transport == "framed"
        super().__init__(host, port, timeout=timeout_ms, transport="framed" if self._framed else "buffered",
                         protocol=protocol, autoconnect=True)

    def _refresh_thrift_client(self) -> None:
        self.transport, _ = open_transport(self.host, self.port, self.timeout, self._security, framed=self._framed)
        #: the connection's protocol (a second client may share it: :mod:`connectors.hbase.scanrows`)
        self.protocol = self._protocol_class(self.transport, decode_response=False)
        self.client = TClient(happybase.connection.Hbase, self.protocol)


def open_thrift1(host: str, port: int, timeout_ms: int, transport: str, protocol: str,
                 sec: ThriftSecurity = PLAIN) -> happybase.Connection:
    """An open happybase connection to a Thrift1 gateway as ``sec`` says (its ``protocol`` attribute is its
    Thrift protocol); the caller closes it."""
    return _Thrift1(host, port, timeout_ms, transport, protocol, sec)
