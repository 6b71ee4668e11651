"""The Kerberos part of the local stack (``stack up --kerberos``): a KDC of a private realm, the
principals and keytabs its clients and servers use, and :class:`KerberosPart`, what a client needs.

**Realm** :data:`REALM` (MIT Kerberos from Debian: ``krb5-kdc``, ``krb5-admin-server``, ``krb5-user``),
everything in ``<state>/kerberos`` (mode 0700):

- ``kdc.conf`` and ``krb5.conf``, rendered from ``infra/conf/kerberos/``: the KDC on
  ``127.0.0.1:<kdc_port>`` (UDP and TCP), no DNS, ``rdns = false``, ``udp_preference_limit = 1``. Python
  finds the realm through ``KRB5_CONFIG`` (:meth:`KerberosPart.env`), a JVM through
  ``-Djava.security.krb5.conf``;
- the database (``principal*``), made once with ``kdb5_util create -s`` under a generated master
  password that is written nowhere: the stash file (``stash``, 0600) is what the KDC opens it with;
- principals, made with ``kadmin.local`` with random keys, each exported to a keytab (0600):
  ``hbase/localhost`` (``hbase.keytab``: the Kerberized HBase's master, region server and Thrift
  gateways), ``HTTP/localhost`` (``HTTP.keytab``: SPNEGO of the HTTPS gateways), ``kafka/localhost``
  (``kafka.keytab``), the client :data:`CLIENT_USER` (``ingest.keytab``) and a second client
  :data:`STRANGER_USER` (``stranger.keytab``), for tests that need a principal other than the worker's.

The realm is made once (the ``.complete`` marker) and reused by every later ``up``; ``stack down
--wipe`` deletes it with the state folder. The KDC runs as the stack process ``kdc`` (``krb5kdc -n``,
in the foreground, its log on stderr: ``<state>/logs/kdc.out``). It is ready once ``kinit`` obtains a
ticket from :data:`CLIENT_USER`'s keytab into a throwaway credential cache (:func:`kinit_check`).

**Settings** (:class:`KerberosSettings`): ``kerberos``, ``kdc_port`` and the Kerberized HBase's ports
(:mod:`.krb_hbase`). They are named as ``[stack]`` keys; :meth:`KerberosSettings.of` reads them from
:class:`StackSettings` once it declares them, and :class:`LocalStack` otherwise takes them explicitly
(``stack up --kerberos``). A later ``up`` without ``--kerberos`` keeps the part (as ``--registry``), with
the ports the last ``up --kerberos`` recorded in ``<state>/kerberos/settings.json``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from string import Template

from pydantic import ValidationError

from pipeline.errors import StackError

from .layout import StackLayout
from .settings import KerberosStackKeys, StackSettings

__all__ = [
    "CLIENT_USER",
    "CLUSTER_QOPS",
    "GATEWAY_PORT_OFFSETS",
    "KDC_TOOLS",
    "REALM",
    "SERVICE_HOST",
    "SERVICE_USER",
    "STRANGER_USER",
    "KerberosPart",
    "KerberosSettings",
    "cluster_qop",
    "ensure_gssapi",
    "ensure_kdc_tools",
    "ensure_realm",
    "kdc_argv",
    "kinit_check",
    "max_ticket_life",
    "render_kerberos_configs",
    "render_template",
]

REALM = "HBASE-INGEST.TEST"
#: the host of every service principal (``hbase/localhost``, ``HTTP/localhost``): clients connect to this
#: name, never to ``127.0.0.1``, whose principal (``hbase/127.0.0.1``) does not exist
SERVICE_HOST = "localhost"
CLIENT_USER = "ingest"
STRANGER_USER = "stranger"
#: the short name of the service principals ``hbase/<host>``: the Kerberized HBase's superuser
SERVICE_USER = "hbase"
#: the MIT tools the KDC part runs (server side); ``kinit`` comes with ``krb5-user``
KDC_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
_INSTALL_HINT = "apt-get install krb5-kdc krb5-admin-server krb5-user"
#: (principal without realm, keytab file name) of every principal the realm holds
_PRINCIPALS = ((f"hbase/{SERVICE_HOST}", "hbase.keytab"), (f"HTTP/{SERVICE_HOST}", "HTTP.keytab"),
               (f"kafka/{SERVICE_HOST}", "kafka.keytab"), (CLIENT_USER, f"{CLIENT_USER}.keytab"),
               (STRANGER_USER, f"{STRANGER_USER}.keytab"))
#: the SASL QOP of gateway ``j`` (from 0) of a Kerberized cluster: ``CLUSTER_QOPS[j % 3]``, so that a cluster
#: of three gateways serves every level HBase's ``hbase.thrift.security.qop`` knows (the standalone
#: Kerberized HBase's SASL gateways: ``auth-conf``)
CLUSTER_QOPS = ("auth-conf", "auth-int", "auth")
#: the Kerberized HBase's six gateways: label -> offset from ``kerberos_thrift_port``
GATEWAY_PORT_OFFSETS = {"krb plain thrift1": 0, "krb plain thrift2": 1, "krb sasl thrift1": 2,
                        "krb sasl thrift2": 3, "krb https thrift1": 4, "krb https thrift2": 5}


class KerberosSettings(KerberosStackKeys):
    """The Kerberos part's ``[stack]`` keys (:class:`~devstack.settings.KerberosStackKeys`) on their own, with
    the ports they derive and the record a later ``up`` reads back."""

    @classmethod
    def of(cls, stack: StackSettings) -> KerberosSettings:
        """These settings as ``stack`` holds them (the keys it declares; defaults for the others)."""
        declared = {k: getattr(stack, k) for k in cls.model_fields if k in type(stack).model_fields}
        return cls.model_validate(declared)

    def port(self, label: str) -> int:
        """The port of a gateway label of :data:`GATEWAY_PORT_OFFSETS`."""
        return self.kerberos_thrift_port + GATEWAY_PORT_OFFSETS[label]

    def save(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> KerberosSettings | None:
        """What :meth:`save` wrote, or None when ``path`` is missing or malformed."""
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError, ValidationError):
            return None


@dataclass(frozen=True)
class KerberosPart:
    """What a client of the Kerberos part needs: the realm, the files (paths, never contents), the service
    host and the gateways' ports. The gateways listen on ``127.0.0.1``; connect to :attr:`host`."""

    realm: str
    folder: Path
    kdc_port: int
    plain_thrift1_port: int
    plain_thrift2_port: int
    sasl_thrift1_port: int
    sasl_thrift2_port: int
    https_thrift1_port: int
    https_thrift2_port: int
    #: the CA that signed the HTTPS gateways' certificate (the one of Kafka's SASL_SSL listener too)
    ca_file: Path
    host: str = SERVICE_HOST
    #: one entry per gateway JVM: what it adds to each of the six ports above (the first gateway's). The
    #: standalone Kerberized HBase has one (0); a Kerberized cluster of M gateways steps by
    #: :data:`~.topology.GATEWAY_PORT_STEP` (0, 10, 20, ...)
    shifts: tuple[int, ...] = (0,)
    #: each gateway JVM's SASL QOP (``hbase.thrift.security.qop``), in the order of :attr:`shifts`
    qops: tuple[str, ...] = ("auth-conf",)

    @classmethod
    def of(cls, ks: KerberosSettings, layout: StackLayout,
           cluster: tuple[tuple[int, int, int], ...] | None = None) -> KerberosPart:
        """The standalone Kerberized HBase's part, or (``cluster``: each gateway's plain Thrift1 port, plain
        Thrift2 port and shift) that of a Kerberized cluster, whose gateways serve plain Thrift on the
        cluster's own ports and SASL and HTTPS on ``kerberos_thrift_port + 2 .. + 5`` plus their shift."""
        plain = ((ks.port("krb plain thrift1"), ks.port("krb plain thrift2")) if cluster is None
                 else (cluster[0][0], cluster[0][1]))
        shifts = (0,) if cluster is None else tuple(shift for _, _, shift in cluster)
        qops = ("auth-conf",) if cluster is None else tuple(cluster_qop(j) for j in range(len(cluster)))
        return cls(REALM, layout.state / "kerberos", ks.kdc_port, *plain, ks.port("krb sasl thrift1"),
                   ks.port("krb sasl thrift2"), ks.port("krb https thrift1"), ks.port("krb https thrift2"),
                   layout.state / "secure" / "ca.pem", shifts=shifts, qops=qops)

    @property
    def krb5_conf(self) -> Path:
        return self.folder / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.folder / "kdc.conf"

    def principal(self, name: str) -> str:
        """``name@REALM``: ``principal(CLIENT_USER)``, ``principal("hbase/localhost")``."""
        return f"{name}@{self.realm}"

    def keytab(self, name: str) -> Path:
        """The keytab of ``name`` (a client user, or a service principal without realm)."""
        return self.folder / dict(_PRINCIPALS)[name]

    @property
    def client_principal(self) -> str:
        return self.principal(CLIENT_USER)

    @property
    def client_keytab(self) -> Path:
        return self.keytab(CLIENT_USER)

    @property
    def stranger_principal(self) -> str:
        return self.principal(STRANGER_USER)

    @property
    def stranger_keytab(self) -> Path:
        return self.keytab(STRANGER_USER)

    @property
    def service_principal(self) -> str:
        """The Kerberized HBase's principal (master, region server, SASL gateways)."""
        return self.principal(f"hbase/{self.host}")

    @property
    def http_principal(self) -> str:
        """The HTTPS gateways' SPNEGO principal."""
        return self.principal(f"HTTP/{self.host}")

    def https_url(self, thrift: int = 1) -> str:
        """``https://localhost:<port>/`` of the HTTPS Thrift1 (``thrift`` 1) or Thrift2 (2) gateway."""
        return f"https://{self.host}:{self.https_thrift1_port if thrift == 1 else self.https_thrift2_port}/"

    def env(self) -> dict[str, str]:
        """The environment a Kerberos client of this realm needs: ``{"KRB5_CONFIG": <krb5.conf>}``."""
        return {"KRB5_CONFIG": str(self.krb5_conf)}


def cluster_qop(j: int) -> str:
    """The SASL QOP of a Kerberized cluster's gateway ``j`` (from 0): :data:`CLUSTER_QOPS` in turn."""
    return CLUSTER_QOPS[j % len(CLUSTER_QOPS)]


def ensure_kdc_tools() -> None:
    """Raise :class:`StackError` naming the Debian packages when an MIT Kerberos tool is not on PATH."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    missing = [t for t in KDC_TOOLS if shutil.which(t, path=path) is None]
    if missing:
        raise StackError(f"{', '.join(missing)} not found on PATH: `stack up --kerberos` runs an MIT Kerberos KDC "
                         f"(`{_INSTALL_HINT}`)")


def ensure_gssapi() -> None:
    """Raise :class:`StackError` naming the extra to install when this Python lacks the ``gssapi``
    package that the stack's readiness check (and every client of a Kerberized gateway) needs: before
    anything starts, not after the servers are up."""
    if importlib.util.find_spec("gssapi") is None:
        raise StackError("the Python package gssapi is not installed: `stack up --kerberos` checks its gateways as "
                         f"a Kerberos client. Install the extra into this Python: `{sys.executable} -m pip install "
                         "'hbase-ingest[kerberos]'` (it builds against MIT Kerberos: `apt-get install libkrb5-dev`), "
                         "or run `make kerberos`, which does both")


def _tool(name: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    if found is None:
        raise StackError(f"{name} not found on PATH (`{_INSTALL_HINT}`)")
    return found


def render_template(infra: Path, name: str, values: dict[str, str]) -> str:
    """``infra/conf/kerberos/<name>.in`` with its ``${...}`` placeholders filled from ``values`` (pure but for
    the read). Raises :class:`StackError` naming an unknown placeholder."""
    src = infra / "conf" / "kerberos" / f"{name}.in"
    try:
        return Template(src.read_text()).substitute(values)
    except KeyError as exc:
        raise StackError(f"template {src.name} uses an unknown placeholder {exc}") from exc


def render_kerberos_configs(part: KerberosPart, infra: Path) -> dict[Path, str]:
    """The text of ``kdc.conf`` and ``krb5.conf`` for ``part`` (templates in, text out)."""
    values = {"REALM": part.realm, "KDC_PORT": str(part.kdc_port), "KRB_DIR": str(part.folder)}
    return {dst: render_template(infra, name, values)
            for name, dst in (("kdc.conf", part.kdc_conf), ("krb5.conf", part.krb5_conf))}


def _kdc_env(part: KerberosPart) -> dict[str, str]:
    return {**os.environ, "KRB5_CONFIG": str(part.krb5_conf), "KRB5_KDC_PROFILE": str(part.kdc_conf)}


def _run(argv: list[str], part: KerberosPart, what: str, stdin: str | None = None) -> None:
    done = subprocess.run(argv, env=_kdc_env(part), input=stdin, capture_output=True, text=True, check=False,
                          timeout=120)
    if done.returncode != 0:
        raise StackError(f"{what} failed (exit {done.returncode}): {(done.stdout + done.stderr).strip()[-1500:]}")


def ensure_realm(part: KerberosPart, infra: Path) -> bool:
    """Write the configs (every time: the KDC port may have changed) and make the realm's database,
    principals and keytabs unless an earlier ``up`` did. Returns True when the realm was made now.
    Raises :class:`StackError` when a tool is missing or fails."""
    ensure_kdc_tools()
    part.folder.mkdir(parents=True, exist_ok=True)
    part.folder.chmod(0o700)
    for path, text in render_kerberos_configs(part, infra).items():
        path.write_text(text)
    marker = part.folder / ".complete"
    if marker.exists():
        return False
    for stale in [*part.folder.glob("principal*"), part.folder / "stash", *part.folder.glob("*.keytab")]:
        stale.unlink(missing_ok=True)  # an interrupted earlier attempt: start over
    (part.folder / "kadm5.acl").write_text("")  # no kadmind: nobody administers the realm remotely
    old = os.umask(0o077)
    try:
        master = secrets.token_urlsafe(24)
        # the password goes through stdin (kdb5_util prompts twice), never onto a command line
        _run([_tool("kdb5_util"), "-r", part.realm, "create", "-s"], part,
             "creating the realm's database (kdb5_util create -s)", stdin=f"{master}\n{master}\n")
        del master
        kadmin = _tool("kadmin.local")
        for name, keytab in _PRINCIPALS:
            _run([kadmin, "-r", part.realm, "-q", f"addprinc -randkey {name}@{part.realm}"], part,
                 f"adding principal {name}")
            _run([kadmin, "-r", part.realm, "-q", f"ktadd -k {part.folder / keytab} {name}@{part.realm}"], part,
                 f"exporting the keytab of {name}")
            (part.folder / keytab).chmod(0o600)
    finally:
        os.umask(old)
    marker.write_text("ok\n")
    return True


def max_ticket_life(part: KerberosPart, name: str, life: str) -> None:
    """Set the longest ticket the KDC gives principal ``name`` (without realm) to ``life``, in kadmin's
    words (``"30 seconds"``, ``"1 day"``, the realm's default). A test shortens a client's tickets with it
    to see them expire mid-run; tickets already issued keep their lifetime."""
    _run([_tool("kadmin.local"), "-r", part.realm, "-q", f'modprinc -maxlife "{life}" {name}@{part.realm}'], part,
         f"setting the ticket lifetime of {name} to {life}")


def kdc_argv(part: KerberosPart) -> list[str]:
    """The KDC in the foreground (``-n``), its configuration named through the environment (``env``
    execs it: the pid is the KDC's)."""
    return ["env", f"KRB5_CONFIG={part.krb5_conf}", f"KRB5_KDC_PROFILE={part.kdc_conf}",
            _tool("krb5kdc"), "-n", "-r", part.realm]


def kinit_check(part: KerberosPart, principal: str | None = None, keytab: Path | None = None,
                timeout_s: float = 10.0) -> None:
    """Obtain a ticket for ``principal`` (the client's by default) from its keytab into a throwaway
    credential cache; raises :class:`StackError` with ``kinit``'s message when the KDC refuses or
    does not answer."""
    principal = principal or part.client_principal
    keytab = keytab or part.client_keytab
    with tempfile.TemporaryDirectory(prefix="hbase-ingest-kinit-") as tmp:
        env = {**os.environ, **part.env(), "KRB5CCNAME": f"FILE:{tmp}/ccache"}
        try:
            done = subprocess.run([_tool("kinit"), "-kt", str(keytab), principal], env=env, capture_output=True,
                                  text=True, check=False, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"kinit {principal} got no answer from the KDC within {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise StackError(f"kinit -kt {keytab} {principal} failed: {(done.stdout + done.stderr).strip()[-500:]}")
