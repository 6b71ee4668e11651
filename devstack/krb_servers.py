"""The Kerberos part (``stack up --kerberos``) as a part of the stack (:mod:`.part`): the ``kdc`` process (an MIT
KDC of a private realm, :mod:`.kerberos`) and, on the standalone shape, ``hbase-krb`` (a Kerberized HBase beside
the plain one, :mod:`.krb_hbase`). A cluster is Kerberized itself instead (:mod:`.krb_cluster`): its servers
are the core's, configured by the core's render (see :mod:`.part`'s open points); this part then runs the KDC
and checks the cluster's Kerberized gateways.

- **provision**: nothing to download; the MIT tools and the Python package ``gssapi`` must be there
  (:func:`~.kerberos.ensure_kdc_tools`, :func:`~.kerberos.ensure_gssapi`), checked before anything starts;
- **render**: the realm (made once: database, principals, keytabs; its configuration every time,
  :func:`~.kerberos.ensure_realm`), the record of the settings for a later ``up`` without ``--kerberos``, and
  on the standalone shape the Kerberized HBase's configuration and HTTPS keystore;
- **start**: the KDC, waited for until ``kinit`` obtains a ticket (every Kerberized server logs in from its
  keytab as it starts); the Kerberized HBase;
- **ready**: a ticket from the client's keytab, a row written and read back through the standalone Kerberized
  HBase's plain gateway (its master is then done initialising), and a call through every Kerberized gateway
  (SASL and SPNEGO as the client principal, the HTTPS ones refusing a request without credentials);
  **wait_ready** retries it, then makes the client principal's grants (:mod:`.krb_authz`, once).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.errors import StackError

from .kerberos import KerberosPart, KerberosSettings, ensure_gssapi, ensure_kdc_tools, ensure_realm, kinit_check
from .krb_authz import ensure_grants
from .krb_hbase import ensure_krb_hbase
from .launch import kerberos_argv
from .layout import StackLayout
from .part import wait_for
from .processes import OwnedProcess
from .readiness import hbase_round_trip
from .secure import SecureListener
from .topology import KERBEROS_ROLES, ServerProcess

__all__ = ["KerberosServers"]


class KerberosServers:
    """The KDC and the Kerberized HBase of one stack (a :class:`~.part.Part`); :attr:`part` is what a client
    needs (``LocalStack.kerberos``)."""

    roles = frozenset(KERBEROS_ROLES)
    beneath_hbase = False
    core = False

    def __init__(self, settings: KerberosSettings, part: KerberosPart, layout: StackLayout, cluster: bool,
                 procs: dict[str, OwnedProcess], main: OwnedProcess, listener: SecureListener,
                 launcher: Callable[[], Path | None], record: Path, start_timeout_s: float) -> None:
        """``cluster``: the stack is a Kerberized cluster (no ``hbase-krb``); ``procs``: the owned processes of
        the part's roles by name; ``main``: the process whose log a failed readiness points at (``hbase-krb``,
        or a cluster's master); ``listener``: the stack's TLS listener, whose CA signs the HTTPS gateways'
        certificate; ``launcher``: the compiled launcher's folder once ``up`` has it
        (:func:`~.provision.ensure_launcher`); ``record``: where the settings are recorded for a later ``up``;
        ``start_timeout_s``: the span of ``up``'s deadline (for messages)."""
        self.settings = settings
        self.part = part
        self.layout = layout
        self.cluster = cluster
        self.procs = procs
        self.main = main
        self.listener = listener
        self.launcher = launcher
        self.record = record
        self.start_timeout_s = start_timeout_s

    @property
    def what(self) -> str:
        part = self.part
        return f"the Kerberized HBase (gateways {part.plain_thrift1_port}..{part.https_thrift2_port})"

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
        if not self.cluster:
            ensure_krb_hbase(self.settings, self.part, self.layout, self.listener)

    def start(self, proc: ServerProcess, deadline: float) -> None:
        owned = self.procs[proc.name]
        owned.start(kerberos_argv(proc, self.settings, self.part, self.layout, self.launcher()),
                    cwd=self.part.folder if proc.role == "kdc" else self.layout.krb_hbase)
        if proc.role == "kdc":
            # HBase logs in from its keytab as it starts: the KDC must answer first
            part = self.part
            wait_for(owned, lambda: kinit_check(part, timeout_s=5.0), deadline, self.start_timeout_s)

    def wait_ready(self, deadline: float) -> None:
        wait_for(self.main, lambda: self.ready(10.0), deadline, self.start_timeout_s)
        ensure_grants(self.layout, self.part, cluster=self.cluster)

    def ready(self, timeout_s: float) -> None:
        part = self.part
        kinit_check(part, timeout_s=timeout_s)
        from .krb_client import gateways_round_trip  # gssapi is loaded only by stacks with Kerberos

        try:
            if not self.cluster:  # a cluster's plain gateways had theirs in HBase's round trip
                # a table created, a row written and read back through the plain gateway: the master is done
                # initialising (the calls of the secured round trip below are answered before it is)
                hbase_round_trip(part.host, part.plain_thrift1_port, part.plain_thrift2_port, timeout_s)
            gateways_round_trip(part, timeout_s)
        except Exception as exc:
            raise StackError(f"{self.what} failed its round trip: {exc!r}") from exc

    def stop(self) -> None:
        """Nothing beyond its processes: the realm stays in the state folder (``down --wipe`` deletes it)."""

    def status(self) -> list[str]:
        """The realm, its krb5.conf and keytabs (paths, never contents), and the Kerberized gateways."""
        part = self.part
        lines = [f"Kerberos: realm {part.realm}, KDC 127.0.0.1:{part.kdc_port}; KRB5_CONFIG={part.krb5_conf}"]
        for principal, keytab in ((part.client_principal, part.client_keytab),
                                  (part.stranger_principal, part.stranger_keytab),
                                  (part.service_principal, part.keytab(f"hbase/{part.host}")),
                                  (part.http_principal, part.keytab(f"HTTP/{part.host}"))):
            lines.append(f"  {principal}: keytab {keytab}")
        what = "the Kerberized cluster's gateways" if self.cluster else "Kerberized HBase"
        for j, d in enumerate(part.shifts):
            name = f"gateway-{j + 1}" if self.cluster else what
            lines.append(f"  {name} on {part.host} (bound to 127.0.0.1): plain Thrift1 {part.plain_thrift1_port + d} "
                         f"Thrift2 {part.plain_thrift2_port + d}; SASL/GSSAPI {part.qops[j]} Thrift1 "
                         f"{part.sasl_thrift1_port + d} Thrift2 {part.sasl_thrift2_port + d}; HTTPS+SPNEGO Thrift1 "
                         f"{part.https_thrift1_port + d} Thrift2 {part.https_thrift2_port + d}")
        lines.append(f"  {what}: servers log in as {part.service_principal}; HTTPS verified by CA {part.ca_file}")
        return lines
