"""The Kerberized HBase as a part of the local stack (:class:`KerberizedHBase`, :mod:`.part`; ``stack up
--kerberos``): on the standalone shape ``hbase-krb``, a Kerberized HBase beside the plain one (:mod:`.krb_hbase`)
with plain, SASL and HTTPS+SPNEGO Thrift gateways. A cluster is Kerberized itself instead (:mod:`.krb_cluster`:
the KDC's part puts the security into HBase's configuration); this part then has no process of its own and
checks the cluster's Kerberized gateways. The KDC is a part of its own (:mod:`.kdc_part`), ready before this one.

- **render**: on the standalone shape, the Kerberized HBase's configuration and HTTPS keystore;
- **start**: the Kerberized HBase;
- **ready**: a row written and read back through the standalone Kerberized HBase's plain gateway (its master is
  then done initialising), and a call through every Kerberized gateway (SASL and SPNEGO as the client
  principal, the HTTPS ones refusing a request without credentials); **wait_ready** retries it, then makes the
  client principal's grants (:mod:`.krb_authz`, once).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .kerberos import KerberosPart, KerberosSettings
from .krb_authz import ensure_grants
from .krb_hbase import ensure_krb_hbase
from .launch import kerberos_argv
from .layout import StackLayout
from .part import check, wait_for
from .processes import OwnedProcess
from .readiness import hbase_round_trip
from .secure import SecureListener
from .topology import ServerProcess

__all__ = ["KerberizedHBase"]


class KerberizedHBase:
    """The Kerberized HBase of one stack, or a Kerberized cluster's gateways (a :class:`~.part.Part`)."""

    roles = frozenset({"hbase-krb"})

    def __init__(self, settings: KerberosSettings, part: KerberosPart, layout: StackLayout, cluster: bool,
                 procs: dict[str, OwnedProcess], main: OwnedProcess, listener: SecureListener,
                 launcher: Callable[[], Path | None], start_timeout_s: float) -> None:
        """``cluster``: the stack is a Kerberized cluster (no ``hbase-krb``); ``procs``: the owned process of
        ``hbase-krb`` by name (none on a cluster); ``main``: the process whose log a failed readiness points at
        (``hbase-krb``, or a cluster's master); ``listener``: the stack's TLS listener, whose CA signs the HTTPS
        gateways' certificate; ``launcher``: the compiled launcher's folder once ``up`` has it
        (:func:`~.provision.ensure_launcher`); ``start_timeout_s``: the span of ``up``'s deadline (for
        messages)."""
        self.settings = settings
        self.part = part
        self.layout = layout
        self.cluster = cluster
        self.procs = procs
        self.main = main
        self.listener = listener
        self.launcher = launcher
        self.start_timeout_s = start_timeout_s

    @property
    def what(self) -> str:
        part = self.part
        return f"the Kerberized HBase (gateways {part.plain_thrift1_port}..{part.https_thrift2_port})"

    def provisioned(self) -> bool:
        """True: nothing is downloaded for it."""
        return True

    def provision(self) -> bool:
        """Nothing: the KDC's part checks the tools and the ``gssapi`` package. False."""
        return False

    def render(self) -> None:
        if not self.cluster:
            ensure_krb_hbase(self.settings, self.part, self.layout, self.listener)

    def start(self, proc: ServerProcess, deadline: float) -> None:
        self.procs[proc.name].start(kerberos_argv(proc, self.settings, self.part, self.layout, self.launcher()),
                                    cwd=self.layout.krb_hbase)

    def wait_ready(self, deadline: float) -> None:
        wait_for(self.main, lambda: check(self, 10.0), deadline, self.start_timeout_s)
        ensure_grants(self.layout, self.part, cluster=self.cluster)

    def ready(self, timeout_s: float) -> None:
        part = self.part
        from .krb_client import gateways_round_trip  # gssapi is loaded only by stacks with Kerberos

        if not self.cluster:  # a cluster's plain gateways had theirs in HBase's round trip
            # a table created, a row written and read back through the plain gateway: the master is done
            # initialising (the calls of the secured round trip below are answered before it is)
            hbase_round_trip(part.host, part.plain_thrift1_port, part.plain_thrift2_port, timeout_s)
        gateways_round_trip(part, timeout_s)

    def stop(self) -> None:
        """Nothing beyond its process: its data stays in the state folder (``down --wipe`` deletes it)."""

    def status(self) -> list[str]:
        """The Kerberized gateways, and the principal its servers log in as."""
        part = self.part
        lines = []
        what = "the Kerberized cluster's gateways" if self.cluster else "Kerberized HBase"
        for j, d in enumerate(part.shifts):
            name = f"gateway-{j + 1}" if self.cluster else what
            lines.append(f"  {name} on {part.host} (bound to 127.0.0.1): plain Thrift1 {part.plain_thrift1_port + d} "
                         f"Thrift2 {part.plain_thrift2_port + d}; SASL/GSSAPI {part.qops[j]} Thrift1 "
                         f"{part.sasl_thrift1_port + d} Thrift2 {part.sasl_thrift2_port + d}; HTTPS+SPNEGO Thrift1 "
                         f"{part.https_thrift1_port + d} Thrift2 {part.https_thrift2_port + d}")
        lines.append(f"  {what}: servers log in as {part.service_principal}; HTTPS verified by CA {part.ca_file}")
        return lines
