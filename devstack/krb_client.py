"""The Kerberized HBase's gateways (:mod:`.krb_hbase`) as a client reaches them, and the readiness round
trip of ``stack up --kerberos``: the stack uses the project's own Thrift transports
(:mod:`connectors.hbase.transport`), so a stack that is ready is one the worker can use.

- :func:`gateway_security`: the :class:`~connectors.hbase.transport.ThriftSecurity` of the ``plain``,
  ``sasl`` (GSSAPI, QOP auth-conf) or ``https`` (TLS verified against the stack's CA, SPNEGO) gateways, as
  the client principal with its keytab.
- :func:`https_status_without_credentials`: the status an HTTPS gateway answers a request without
  credentials with (401 when SPNEGO is required).
- :func:`service_spnego`: ``Authorization`` headers for ``HTTP/localhost`` as the service principal, from
  its keytab (a Kerberized HDFS's WebHDFS, :class:`.webhdfs.WebHdfs`).

MIT Kerberos finds the realm through ``KRB5_CONFIG``, read whenever a library context is made:
:func:`krb5_config` sets it for the duration of a block (a process-wide variable: the round trips hold a
lock while they use it).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, cast

from connectors.hbase.sasl import KerberosLogin, gss_context
from connectors.hbase.thrift2 import load_idl, open_client
from connectors.hbase.transport import Qop, ThriftSecurity, open_thrift1

from .kerberos import KerberosPart

__all__ = ["GatewayKind", "gateway_ports", "gateway_security", "gateways_round_trip", "hbase_keys",
           "https_status_without_credentials", "krb5_config", "service_spnego"]

GatewayKind = Literal["plain", "sasl", "https"]
_ENV_LOCK = threading.RLock()


@contextlib.contextmanager
def krb5_config(path: Path) -> Iterator[None]:
    """``KRB5_CONFIG=path`` for the block (restored after it), under a process-wide lock."""
    with _ENV_LOCK:
        before = os.environ.get("KRB5_CONFIG")
        os.environ["KRB5_CONFIG"] = str(path)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("KRB5_CONFIG", None)
            else:
                os.environ["KRB5_CONFIG"] = before


def service_spnego(part: KerberosPart) -> Callable[[], str]:
    """A function that returns a new ``Negotiate <token>`` header value for ``HTTP/<part.host>`` on each call
    (a SPNEGO token is accepted once), logged in as the service principal from its keytab: on a Kerberized
    HDFS that is the user who runs the NameNode, its superuser."""
    login = KerberosLogin(part.service_principal, str(part.keytab(f"hbase/{part.host}")), service="HTTP")

    def header() -> str:
        with krb5_config(part.krb5_conf):
            token: bytes = gss_context(login, "HTTP", part.host, spnego=True).step()
        return f"Negotiate {base64.b64encode(token).decode()}"
    return header


def gateway_ports(part: KerberosPart, kind: GatewayKind, gateway: int = 0) -> tuple[int, int]:
    """The Thrift1 and Thrift2 ports of the ``kind`` gateways of gateway JVM ``gateway`` (from 0; a
    Kerberized cluster has several, :attr:`~.kerberos.KerberosPart.shifts`)."""
    t1, t2 = {"plain": (part.plain_thrift1_port, part.plain_thrift2_port),
              "sasl": (part.sasl_thrift1_port, part.sasl_thrift2_port),
              "https": (part.https_thrift1_port, part.https_thrift2_port)}[kind]
    shift = part.shifts[gateway]
    return t1 + shift, t2 + shift


def gateway_security(part: KerberosPart, kind: GatewayKind, *, principal: str | None = None,
                     keytab: Path | None = None, gateway: int = 0) -> ThriftSecurity:
    """How a client reaches the ``kind`` gateways of gateway JVM ``gateway`` as ``principal`` (default: the
    client principal, with its keytab); over SASL with that gateway's QOP."""
    if kind == "plain":
        return ThriftSecurity()
    who = principal or part.client_principal
    tab = str(keytab or part.client_keytab)
    if kind == "sasl":
        return ThriftSecurity(kerberos=True, principal=who, keytab=tab, qop=cast(Qop, part.qops[gateway]))
    return ThriftSecurity(kerberos=True, principal=who, keytab=tab, http=True, tls=True, ca_file=str(part.ca_file))


def hbase_keys(part: KerberosPart, kind: GatewayKind) -> dict[str, Any]:
    """The ``[hbase]`` settings keys that reach the ``kind`` gateways (of every gateway JVM, in order, each
    with its own ``sasl_qop`` over SASL) as the client principal (with its keytab): :func:`gateway_security`
    spelled as settings."""
    sec = gateway_security(part, kind)
    keys: dict[str, Any] = {"gateways": []}
    for j in range(len(part.shifts)):
        t1, t2 = gateway_ports(part, kind, j)
        keys["gateways"].append({"host": part.host, "port": t1, "thrift2_port": t2,
                                 **({"sasl_qop": part.qops[j]} if kind == "sasl" else {})})
    if sec.kerberos:
        keys |= {"auth": "kerberos", "kerberos_principal": sec.principal, "kerberos_keytab": sec.keytab}
    if sec.kerberos and not sec.http:
        keys["sasl_qop"] = sec.qop
    if sec.http:
        keys |= {"transport": "http", "tls": sec.tls, "tls_ca_file": sec.ca_file}
    return keys


def https_status_without_credentials(part: KerberosPart, thrift: int = 1, timeout_s: float = 10.0,
                                     gateway: int = 0) -> int:
    """The HTTP status the HTTPS gateway (of gateway JVM ``gateway``) answers a Thrift POST without credentials
    with (401 expected)."""
    port = gateway_ports(part, "https", gateway)[thrift - 1]
    context = ssl.create_default_context(cafile=str(part.ca_file))
    conn = http.client.HTTPSConnection(part.host, port, timeout=timeout_s, context=context)
    try:
        conn.request("POST", "/", body=b"", headers={"Content-Type": "application/x-thrift"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def gateways_round_trip(part: KerberosPart, timeout_s: float = 10.0) -> None:
    """One call through each of the six gateways of every gateway JVM: Thrift1 ``getTableNames`` and Thrift2
    ``tableExists(hbase:meta)``, plain, over SASL as the client principal, and over HTTPS with SPNEGO after a
    request without credentials was refused with 401. Raises RuntimeError (naming the port) or the
    transport's error."""
    for gateway in range(len(part.shifts)):
        _round_trip(part, gateway, timeout_s)


def _round_trip(part: KerberosPart, gateway: int, timeout_s: float) -> None:
    timeout_ms = int(timeout_s * 1000)
    meta = load_idl().TTableName(ns=b"hbase", qualifier=b"meta")
    for thrift in (1, 2):
        status = https_status_without_credentials(part, thrift, timeout_s, gateway)
        if status != 401:
            port = gateway_ports(part, "https", gateway)[thrift - 1]
            raise RuntimeError(f"the HTTPS Thrift{thrift} gateway on port {port} answered {status} to a request "
                               "without credentials, not 401")
    with krb5_config(part.krb5_conf):
        kinds: tuple[GatewayKind, ...] = ("plain", "sasl", "https")
        for kind in kinds:
            sec = gateway_security(part, kind, gateway=gateway)
            t1, t2 = gateway_ports(part, kind, gateway)
            transport = "http" if sec.http else "buffered"
            conn = open_thrift1(part.host, t1, timeout_ms, transport, "binary", sec)
            try:
                conn.client.getTableNames()
            finally:
                conn.close()
            client = open_client(part.host, t2, timeout_ms, security=sec)
            try:
                if not client.tableExists(meta):
                    raise RuntimeError(f"the Kerberized HBase says hbase:meta does not exist (Thrift2 port {t2})")
            finally:
                client.close()
