"""Kafka as a part of the local stack (:class:`KafkaPart`, :mod:`.part`): one KRaft broker, the ``kafka``
process, with its PLAINTEXT and DISTANT listeners, and with ``secure`` the SASL_SSL listener (SCRAM-SHA-512,
TLS, ACLs; :mod:`.secure`) and, on a stack with Kerberos too, the SSO listener (GSSAPI and OAUTHBEARER;
:mod:`.krb_kafka`).

**Render**: ``server.properties`` (``secure.properties`` / ``sso.properties`` in its place when those
listeners are served: :func:`.secure.render_secure_config`, :func:`.krb_kafka.render_sso_config`) from
Kafka's own ports; it reads no value another part contributes.

**Start**: the storage is formatted once (a ``meta.properties`` says it was); a broker with the SSO
listener logs in from its keytab as it starts, so the KDC is started first when it is not running.

**Ready**: a produce/consume round trip on the plaintext listener, then, when served, a SCRAM login and
round trip over TLS and an OAUTHBEARER one. The first wait makes the users and ACLs those listeners need
(once: Kafka keeps them in its metadata).

**Listeners kept**: an ``up`` without ``--secure`` never takes the SASL_SSL listener away from a running
broker (nor the SSO one); an ``up`` that asks for a listener a running broker lacks restarts that broker
(only it), in :meth:`KafkaPart.provision`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from pipeline.errors import StackError

from .krb_kafka import (
    KERBEROS_USER,
    OAUTH_SUBJECT,
    SsoListener,
    kafka_jvm_options,
    render_sso_config,
    setup_sso_acls,
    sso_round_trip,
)
from .launch import kafka_format_argv
from .layout import StackLayout, kafka_listener_rendered
from .part import wait_for
from .processes import OwnedProcess
from .provision import render_kafka_config
from .readiness import kafka_round_trip
from .secure import (
    GROUP_PREFIX,
    OTHER_USER,
    TOPIC_PREFIX,
    WORKER_USER,
    SecureListener,
    ensure_tls_and_passwords,
    render_secure_config,
    secure_round_trip,
    setup_users_and_acls,
)
from .settings import StackSettings
from .topology import HOST, ServerProcess

__all__ = ["KafkaPart", "kafka_values"]


def kafka_values(s: StackSettings) -> dict[str, str]:
    """The placeholders of Kafka's templates that its ports fill (STATE is added by the renderer)."""
    return {"KAFKA_PORT": str(s.kafka_port), "KAFKA_CONTROLLER_PORT": str(s.kafka_controller_port),
            "KAFKA_DISTANT_PORT": str(s.distant_port), "KAFKA_DISTANT_PROXY_PORT": str(s.distant_port + 1)}


class KafkaPart:
    """The ``kafka`` process as a part of the stack (:class:`~.part.Part`; see the module docstring)."""

    roles = frozenset({"kafka"})

    def __init__(self, settings: StackSettings, layout: StackLayout, process: OwnedProcess,
                 secure_listener: SecureListener, sso_listener: SsoListener | None,
                 argv: Callable[[ServerProcess], list[str]], start_kdc: Callable[[float], None]) -> None:
        """``argv``: the broker's command (:func:`~.launch.server_argv`, as the stack builds it); ``start_kdc``:
        starts the KDC when it is not running and returns once it answers (called before a broker with the
        SSO listener starts); ``sso_listener``: None on a stack without Kerberos."""
        self.settings = settings
        self.layout = layout
        self.process = process
        self.secure_listener = secure_listener
        self.sso_listener = sso_listener
        self._argv = argv
        self._start_kdc = start_kdc
        #: the listeners this ``up`` serves, fixed by :meth:`provision` (before it may stop the broker)
        self._serving: tuple[bool, bool] | None = None

    @property
    def bootstrap(self) -> str:
        """The plaintext listener."""
        return f"{HOST}:{self.settings.kafka_port}"

    @property
    def what(self) -> str:
        return f"Kafka at {self.bootstrap}"

    @property
    def secure(self) -> bool:
        """Whether the broker has (or is to get) the SASL_SSL listener: asked for by ``[stack] secure``, or
        already serving it (an ``up`` without ``--secure`` never takes it away from a running broker)."""
        return self.settings.secure or (self.process.pid() is not None
                                        and kafka_listener_rendered(self.layout, "SECURE"))

    @property
    def sso(self) -> bool:
        """Whether the broker has (or is to get) the SSO listener (:mod:`.krb_kafka`): secure, with Kerberos."""
        return self.sso_listener is not None and self.secure

    def provisioned(self) -> bool:
        """True: its jars are cached (with HBase's, by the stack) before it first starts."""
        return True

    def provision(self) -> bool:
        """Fix the listeners this ``up`` serves; stop a running broker that lacks one of them (``up`` then
        starts it afresh). Downloads nothing (the stack caches Kafka's jars with HBase's): False."""
        secure, sso = self._serving = (self.secure, self.sso)
        if self.process.pid() is not None and ((secure and not kafka_listener_rendered(self.layout, "SECURE"))
                                               or (sso and not kafka_listener_rendered(self.layout, "SSO"))):
            self.process.stop()
        return False

    def render(self) -> None:
        """``server.properties``, or with the SASL_SSL (and SSO) listener its secured version, with the TLS
        material and passwords made once (:func:`.secure.ensure_tls_and_passwords`)."""
        secure, sso = self._serving if self._serving is not None else (self.secure, self.sso)
        values = kafka_values(self.settings)
        render_kafka_config(self.layout, values)
        if secure:
            ensure_tls_and_passwords(self.secure_listener)
            render_secure_config(self.secure_listener, self.layout, {"STATE": str(self.layout.state), **values})
        if sso and self.sso_listener is not None:
            render_sso_config(self.sso_listener, self.layout, {"STATE": str(self.layout.state), **values})

    def start(self, proc: ServerProcess, deadline: float) -> None:
        """Format the storage once, start the KDC first for the SSO listener, then launch the broker."""
        data = self.layout.state / "kafka" / "data"
        data.mkdir(parents=True, exist_ok=True)
        if not (data / "meta.properties").exists():
            fmt = subprocess.run(kafka_format_argv(self.layout), capture_output=True, text=True, check=False,
                                 timeout=120)
            if fmt.returncode != 0:
                raise StackError(f"formatting Kafka storage failed:\n{(fmt.stdout + fmt.stderr)[-2000:]}")
        argv = self._argv(proc)
        if self.sso_listener is not None and kafka_listener_rendered(self.layout, "SSO"):
            self._start_kdc(deadline)  # the broker logs in from its keytab as it starts: the KDC must answer first
            argv = [argv[0], *kafka_jvm_options(self.sso_listener), *argv[1:]]
        self.process.start(argv)

    def wait_ready(self, deadline: float) -> None:
        """The plaintext round trip; then, when served, the SCRAM one (users and ACLs made first when it fails)
        and the OAUTHBEARER one (ACLs made first when it fails)."""
        self._wait(lambda: kafka_round_trip(self.bootstrap, 10.0), deadline)
        if self.secure:
            listener = self.secure_listener
            try:
                secure_round_trip(listener, 5.0)
            except Exception:  # users or ACLs not there yet: make them, then wait for the round trip
                setup_users_and_acls(listener, self.layout, self.bootstrap)
                self._wait(lambda: secure_round_trip(listener, 10.0), deadline)
        sso = self.sso_listener
        if sso is not None and self.sso:
            try:
                sso_round_trip(sso, 5.0)
            except Exception:  # ACLs not there yet: make them, then wait for the round trip
                setup_sso_acls(self.layout, self.bootstrap)
                self._wait(lambda: sso_round_trip(sso, 10.0), deadline)

    def _wait(self, check: Callable[[], object], deadline: float) -> None:
        wait_for(self.process, check, deadline, self.settings.start_timeout_s)

    def ready(self, timeout_s: float) -> None:
        """The plaintext round trip, then the SCRAM and OAUTHBEARER ones when served."""
        kafka_round_trip(self.bootstrap, timeout_s)
        if self.secure:
            secure_round_trip(self.secure_listener, timeout_s)
        if self.sso_listener is not None and self.sso:
            sso_round_trip(self.sso_listener, timeout_s)

    def stop(self) -> None:
        """Nothing beyond stopping the broker."""

    def status(self) -> list[str]:
        """The SASL_SSL listener: where it is, its CA and password files (paths, never contents), its ACLs;
        or that there is none."""
        if not self.secure:
            return ["secured listener: none (plaintext only; `stack up --secure` adds SASL_SSL)"]
        lst = self.secure_listener
        return [f"secured listener: SASL_SSL {lst.bootstrap} (SCRAM-SHA-512; plaintext stays on {self.bootstrap})",
                f"  CA certificate: {lst.ca_file}",
                *(f"  user {user}: password file {lst.password_file(user)}" for user in (WORKER_USER, OTHER_USER)),
                f"  ACLs: {WORKER_USER} may use topics '{TOPIC_PREFIX}*' and groups '{GROUP_PREFIX}*'; "
                f"{OTHER_USER} has none"]

    def sso_status(self) -> list[str]:
        """The SSO listener: port, mechanisms, principals (never a secret); none when it is not served.
        Apart from :meth:`status`: ``stack status`` prints it after the Kerberos part's lines."""
        lst = self.sso_listener
        if lst is None or not self.sso:
            return []
        return [f"SSO listener: SASL_SSL {lst.bootstrap} (GSSAPI, OAUTHBEARER; TLS as the secured listener): "
                f"broker principal {lst.broker_principal} (sasl_kerberos_service_name \"kafka\", "
                f"sasl_kerberos_domain_name \"{lst.kerberos.host}\")",
                f"  ACLs as {WORKER_USER}'s for {lst.kerberos.client_principal} (User:{KERBEROS_USER}) and the "
                f"OAUTHBEARER subject User:{OAUTH_SUBJECT} (unsecured JWS tokens: test only)"]
