"""Authorization on the Kerberized HBase of the local stack (``stack up --kerberos``): the standalone shape's
second HBase, or a Kerberized cluster (:mod:`.krb_cluster`), alike.

The Kerberized HBase runs the AccessController (``infra/conf/kerberos/hbase-site.xml.in``:
``hbase.security.authorization``, the controller as master, region and region-server coprocessor) with the
service user ``hbase`` (:data:`~.kerberos.SERVICE_USER`) as the superuser. Its servers and its plain
gateways act as that user; the SASL and HTTPS gateways act as the principal that logged in to them, as does
the native client.

**The grant the stack makes** (:data:`INGEST_GRANTS`, :func:`ensure_grants`): the client principal's user
(``ingest``) gets ``CREATE`` on the ``default`` namespace, once per data folder of the Kerberized HBase (the
marker ``grants.done`` in ``<state>/hbase-krb``, or a cluster's ``<state>/hbase``, records what was granted;
HBase keeps the grant in ``hbase:acl``).
HBase makes a table's creator its owner, with every right on it (READ, WRITE, EXEC, CREATE, ADMIN): so the
ingest principal creates its tables (``tables create``) and reads and writes them, and no other table. Any
other principal (``stranger``) has no right at all. A table created through a plain gateway is the
superuser's: the ingest principal needs a grant on it (:func:`acl`).

**Grants and revokes** (:func:`acl`) run ``infra/HBaseStack.java acl``: a short-lived client JVM that logs
in from the service keytab (the superuser) and calls HBase's ``AccessControlClient`` (HBase 2.6.1's Thrift2
IDL has no grant/revoke call; the hbase shell starts a JRuby runtime, several times slower). About 3 s each.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import StackError

from .kerberos import CLIENT_USER, KerberosPart
from .launch import acl_argv
from .layout import StackLayout
from .provision import ensure_launcher

__all__ = ["ACTIONS", "INGEST_GRANTS", "Grant", "acl", "ensure_grants"]

#: HBase's permission letters: READ, WRITE, EXEC, CREATE, ADMIN
ACTIONS = "RWXCA"


@dataclass(frozen=True, slots=True)
class Grant:
    """``actions`` (letters of :data:`ACTIONS`) for ``user`` (a principal's short name) on ``scope``: a table
    name, or ``@namespace``."""

    user: str
    actions: str
    scope: str

    def __post_init__(self) -> None:
        if not self.actions or any(a not in ACTIONS for a in self.actions):
            raise ValueError(f"actions {self.actions!r}: expected letters of {ACTIONS}")

    def __str__(self) -> str:
        return f"{self.user} {self.actions} {self.scope}"


#: what the stack grants at ``up``: the ingest principal may create tables in ``default`` (and owns them)
INGEST_GRANTS = (Grant(CLIENT_USER, "C", "@default"),)


def acl(layout: StackLayout, part: KerberosPart, op: str, grant: Grant, timeout_s: float = 120.0,
        cluster: bool = False) -> None:
    """Apply ``grant`` (``op`` "grant") or take it back ("revoke") on the running Kerberized HBase (``cluster``:
    the Kerberized cluster); returns once HBase applied it. Raises :class:`StackError` with the JVM's last
    lines when it fails."""
    if op not in ("grant", "revoke"):
        raise ValueError(f"op {op!r}: expected 'grant' or 'revoke'")
    argv = acl_argv(layout, part, op, grant.user, grant.actions, grant.scope, ensure_launcher(layout), cluster)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              cwd=_folder(layout, cluster))
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"{op} {grant} on the Kerberized HBase did not finish within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if "Exception" in line or "Error" in line]
        raise StackError(f"{op} {grant} on the Kerberized HBase failed (exit {done.returncode}): "
                         f"{(lines or ['(no output)'])[0][:500]}")


def _folder(layout: StackLayout, cluster: bool) -> Path:
    """The Kerberized HBase's data folder: the standalone shape's second HBase, or the cluster's."""
    return layout.state / "hbase" if cluster else layout.krb_hbase


def ensure_grants(layout: StackLayout, part: KerberosPart, grants: tuple[Grant, ...] = INGEST_GRANTS,
                  cluster: bool = False) -> bool:
    """Make ``grants`` unless the marker says this data folder has them. Returns whether it granted."""
    wanted = "".join(f"{g}\n" for g in grants)
    marker = _folder(layout, cluster) / "grants.done"
    try:
        if marker.read_text() == wanted:
            return False
    except OSError:
        pass
    for g in grants:
        acl(layout, part, "grant", g, cluster=cluster)
    marker.write_text(wanted)
    return True
