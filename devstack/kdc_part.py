"""The KDC as a part of the local stack (:class:`KdcPart`, :mod:`.part`; ``stack up --kerberos``): the ``kdc``
process, an MIT KDC of a private realm (:mod:`.kerberos`).

- **provision**: nothing to download; the MIT tools and the Python package ``gssapi`` must be there
  (:func:`~.kerberos.ensure_kdc_tools`, :func:`~.kerberos.ensure_gssapi`), checked before anything starts;
- **render**: the realm (made once: database, principals, keytabs; its configuration every time,
  :func:`~.kerberos.ensure_realm`) and the record of the settings for a later ``up`` without ``--kerberos``.
  It renders before the parts whose servers log in from its keytabs (Kafka's SSO listener, HBase, HDFS);
- **HBase's configuration** (a Kerberized cluster, :mod:`.krb_cluster`): :meth:`KdcPart.hbase_config` puts the
  cluster's security into ``hbase-site.xml`` and a ``core-site.xml`` beside it, :meth:`KdcPart.hdfs_security`
  a Kerberized HDFS's into HDFS's files;
- **start**: the KDC, waited for until ``kinit`` obtains a ticket (every Kerberized server logs in from its
  keytab as it starts);
- **ready**: a ticket from the client's keytab.
"""

from __future__ import annotations

from pathlib import Path

from .hbase_part import HBaseConfig
from .kerberos import KerberosPart, KerberosSettings, ensure_gssapi, ensure_kdc_tools, ensure_realm, kinit_check
from .krb_cluster import cluster_security, hdfs_security
from .launch import kerberos_argv
from .layout import StackLayout
from .part import wait_for
from .processes import OwnedProcess
from .secure import SecureListener
from .topology import ServerProcess

__all__ = ["KdcPart"]


class KdcPart:
    """The KDC of one stack (a :class:`~.part.Part`); :attr:`part` is what a client needs (``LocalStack.kerberos``)."""

    roles = frozenset({"kdc"})

    def __init__(self, settings: KerberosSettings, part: KerberosPart, layout: StackLayout, process: OwnedProcess,
                 listener: SecureListener, record: Path, start_timeout_s: float) -> None:
        """``process``: the ``kdc`` process; ``listener``: the stack's TLS listener, whose CA signs a Kerberized
        cluster's HTTPS certificate; ``record``: where the settings are recorded for a later ``up``;
        ``start_timeout_s``: the span of ``up``'s deadline (for messages)."""
        self.settings = settings
        self.part = part
        self.layout = layout
        self.process = process
        self.listener = listener
        self.record = record
        self.start_timeout_s = start_timeout_s

    @property
    def what(self) -> str:
        return f"the KDC of {self.part.realm} (127.0.0.1:{self.part.kdc_port})"

    def provisioned(self) -> bool:
        """True: nothing is downloaded for it."""
        return True

    def provision(self) -> bool:
        """Check the KDC's tools and the ``gssapi`` package; False (nothing downloaded)."""
        ensure_kdc_tools()
        ensure_gssapi()
        return False

    def render(self) -> None:
        ensure_realm(self.part, self.layout.infra)
        self.settings.save(self.record)

    def hbase_config(self) -> HBaseConfig:
        """A Kerberized cluster's security (:func:`~.krb_cluster.cluster_security`, which makes the HTTPS keystore
        once and the JAAS file every time): ``hbase-site.xml``'s SECURITY, and the ``core-site.xml`` Hadoop's
        login reads ``hadoop.security.authentication`` from; the folder then names the keystore's password."""
        security, core_site = cluster_security(self.settings, self.part, self.layout, self.listener)
        return HBaseConfig(site={"SECURITY": security}, files={"core-site.xml": core_site}, private=True)

    def hdfs_security(self, namenode_http_port: int) -> tuple[dict[str, str], dict[str, str]]:
        """A Kerberized HDFS's placeholders and its TLS files (:func:`~.krb_cluster.hdfs_security`)."""
        return hdfs_security(self.settings, self.part, self.layout, self.listener, namenode_http_port)

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Launch the KDC and wait until it issues a ticket: servers started after it log in as they start."""
        self.process.start(kerberos_argv(proc, self.settings, self.part, self.layout), cwd=self.part.folder)
        self.wait_ready(deadline)

    def wait_ready(self, deadline: float) -> None:
        part = self.part
        wait_for(self.process, lambda: kinit_check(part, timeout_s=5.0), deadline, self.start_timeout_s)

    def ready(self, timeout_s: float) -> None:
        kinit_check(self.part, timeout_s=timeout_s)

    def stop(self) -> None:
        """Nothing beyond its process: the realm stays in the state folder (``down --wipe`` deletes it)."""

    def status(self) -> list[str]:
        """The realm, its krb5.conf and keytabs (paths, never contents)."""
        part = self.part
        lines = [f"Kerberos: realm {part.realm}, KDC 127.0.0.1:{part.kdc_port}; KRB5_CONFIG={part.krb5_conf}"]
        for principal, keytab in ((part.client_principal, part.client_keytab),
                                  (part.stranger_principal, part.stranger_keytab),
                                  (part.service_principal, part.keytab(f"hbase/{part.host}")),
                                  (part.http_principal, part.keytab(f"HTTP/{part.host}"))):
            lines.append(f"  {principal}: keytab {keytab}")
        return lines
