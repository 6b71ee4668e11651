"""The Kerberized HBase of the local stack (``stack up --kerberos``): a second standalone HBase JVM,
``hbase-krb``, beside the plain ``hbase`` one (which every other test uses, and which this never touches).

**Process**: ``infra/HBaseStack.java kerberos``: master, region server and ZooKeeper in one JVM, with
``-Djava.security.krb5.conf=<state>/kerberos/krb5.conf``, heap ``kerberos_heap_mb``; its own ports
(``kerberos_zookeeper_port`` 2182, ``kerberos_master_port`` 16700, ``kerberos_regionserver_port`` 16720), data in
``<state>/hbase-krb`` and configuration in ``<state>/conf/hbase-krb`` (``hbase-site.xml`` and the
``core-site.xml`` Hadoop's login code needs), all on loopback. It runs the AccessController
(``hbase.security.authorization``), with the service user ``hbase`` as the superuser: the grants of the other
principals are :mod:`.krb_authz`'s. The master, the region server and every
gateway log in as ``hbase/localhost@REALM`` from ``hbase.keytab``. The master's and the region server's RPC
ports take SASL GSSAPI at every QOP (``hbase.rpc.protection = authentication,integrity,privacy``), for the
native client (``[hbase] client = "native"``, ``auth = "kerberos"``, any ``sasl_qop``).

**Gateways**, each a ThriftServer with its own configuration, on ``kerberos_thrift_port`` (9690) + offset
(:data:`~.kerberos.GATEWAY_PORT_OFFSETS`), bound to ``127.0.0.1``; clients name the host ``localhost``
(the principals' host):

======================  ======  ======================================================================
gateway                 port    what a client does
======================  ======  ======================================================================
plain Thrift1 / Thrift2 +0, +1  connects unauthenticated; the gateway calls HBase as ``hbase`` (the
                                baseline of a "what does security cost" comparison on the same HBase)
SASL Thrift1 / Thrift2  +2, +3  SASL/GSSAPI for ``hbase@localhost``, QOP ``auth-conf`` (every frame
                                wrapped); the gateway calls HBase as the client (proxy user)
HTTPS Thrift1 / Thrift2 +4, +5  Thrift over HTTP POST, TLS (a certificate for ``localhost`` signed by the
                                stack's CA, :attr:`.secure.SecureListener.ca_file`), SPNEGO for
                                ``HTTP/localhost``; without a ``Negotiate`` header: 401
======================  ======  ======================================================================

The HTTPS gateways' PKCS12 keystore and its generated password are in ``<state>/hbase-krb/tls`` (made
once, :func:`.secure.issue_server_keystore`); ``hbase-site.xml`` names that password, so the
configuration folder is its owner's only (0700, the file 0600).
"""

from __future__ import annotations

from pathlib import Path

from .kerberos import SERVICE_USER, KerberosPart, KerberosSettings, render_template
from .layout import StackLayout, write_private
from .secure import SecureListener, issue_server_keystore

__all__ = ["KRB_HBASE_CONFIGS", "ensure_https_keystore", "ensure_krb_hbase", "krb_hbase_values",
           "render_krb_hbase_configs"]

KRB_HBASE_CONFIGS = ("hbase-site.xml", "core-site.xml")


def _tls(layout: StackLayout) -> Path:
    return layout.krb_hbase / "tls"


def krb_hbase_values(ks: KerberosSettings, part: KerberosPart, layout: StackLayout,
                     keystore_password: str) -> dict[str, str]:
    """The placeholders of ``infra/conf/kerberos/*-site.xml.in``."""
    return {
        "HBASE_DIR": str(layout.krb_hbase), "ZK_PORT": str(ks.kerberos_zookeeper_port),
        "MASTER_PORT": str(ks.kerberos_master_port), "REGIONSERVER_PORT": str(ks.kerberos_regionserver_port),
        "SERVICE_PRINCIPAL": part.service_principal, "SERVICE_KEYTAB": str(part.keytab(f"hbase/{part.host}")),
        "SUPERUSER": SERVICE_USER,
        "HTTP_PRINCIPAL": part.http_principal, "HTTP_KEYTAB": str(part.keytab(f"HTTP/{part.host}")),
        "KEYSTORE": str(_tls(layout) / "thrift-https.p12"), "KEYSTORE_PASSWORD": keystore_password,
    }


def render_krb_hbase_configs(values: dict[str, str], infra: Path) -> dict[str, str]:
    """File name -> text of :data:`KRB_HBASE_CONFIGS` (pure). Raises :class:`StackError` on an unknown
    placeholder."""
    return {name: render_template(infra, name, values) for name in KRB_HBASE_CONFIGS}


def ensure_https_keystore(layout: StackLayout, listener: SecureListener) -> str:
    """Make the HTTPS gateways' keystore (once; shared by the standalone Kerberized HBase and a Kerberized
    cluster's gateways) and return its password."""
    tls = _tls(layout)
    tls.mkdir(parents=True, exist_ok=True)
    tls.chmod(0o700)
    password_file = tls / "keystore.password"
    issue_server_keystore(listener, tls / "thrift-https.p12", password_file, "thrift-https")
    return password_file.read_text().strip()


def ensure_krb_hbase(ks: KerberosSettings, part: KerberosPart, layout: StackLayout, listener: SecureListener) -> None:
    """Make the HTTPS keystore (once) and the data folders, and render the configuration (each time)."""
    password = ensure_https_keystore(layout, listener)
    for sub in ("tmp", "zk"):
        (layout.krb_hbase / sub).mkdir(parents=True, exist_ok=True)
    conf = layout.krb_hbase_conf
    conf.mkdir(parents=True, exist_ok=True)
    conf.chmod(0o700)
    values = krb_hbase_values(ks, part, layout, password)
    for name, text in render_krb_hbase_configs(values, layout.infra).items():
        write_private(conf / name, text)
