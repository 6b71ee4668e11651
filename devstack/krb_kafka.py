"""Kafka's SSO listener (``stack up --secure --kerberos``): a second SASL_SSL listener for the token-based
mechanisms, on ``[stack] kafka_sso_port`` (default 9096), with the SECURE listener's keystore (:mod:`.secure`):

- **GSSAPI**: the broker logs in as ``kafka/localhost@REALM`` from ``kafka.keytab`` of the Kerberos part
  (:mod:`.kerberos`; the JVM gets ``-Djava.security.krb5.conf``: :func:`kafka_jvm_options`),
  ``sasl.kerberos.service.name=kafka``. The listener is advertised as ``127.0.0.1``: a client names the
  broker's host with ``sasl_kerberos_domain_name = "localhost"``. :data:`KERBEROS_USER` (``ingest@REALM``)
  maps to ``User:ingest`` by the DEFAULT rule.
- **OAUTHBEARER, test only**: Kafka's unsecured-JWS validator (no signature checked; any unexpired token with
  header ``{"alg":"none"}`` and a ``sub`` is accepted, :func:`unsecured_token` makes one). Production uses a
  real OIDC provider: ``OAuthBearerValidatorCallbackHandler`` with ``sasl.oauthbearer.jwks.endpoint.url``.
- **ACLs** (``infra/conf/kafka/AclSetup.java``): ``User:ingest`` and ``User:`` :data:`OAUTH_SUBJECT` get what the
  SCRAM worker user has (topics :data:`~.secure.TOPIC_PREFIX`, groups :data:`~.secure.GROUP_PREFIX`).

The settings are appended to ``server.properties`` after the SECURE listener's (``infra/conf/kafka/
sso.properties.in``); a running Kafka without them is restarted by the next ``up`` that wants them. Its
readiness: an OAUTHBEARER login and produce/consume round trip on :data:`~.secure.PROBE_TOPIC` (a broker
whose Kerberos login failed does not start at all).
"""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from string import Template

from pipeline.errors import StackError
from pipeline.settings import KafkaSettings

from .kerberos import CLIENT_USER, KerberosPart, KerberosSettings
from .layout import StackLayout
from .readiness import kafka_round_trip
from .secure import GROUP_PREFIX, PROBE_TOPIC, TOPIC_PREFIX, SecureListener

__all__ = ["KERBEROS_USER", "MECHANISMS", "OAUTH_SUBJECT", "SsoListener", "kafka_jvm_options",
           "render_sso_config", "setup_sso_acls", "sso_round_trip", "unsecured_token"]

#: the Kerberos client of the SSO listener (its ACL principal is ``User:ingest``)
KERBEROS_USER = CLIENT_USER
#: the ``sub`` of the OAUTHBEARER tokens the stack's ACLs allow
OAUTH_SUBJECT = "hbase-ingest-oauth"
MECHANISMS = ("GSSAPI", "OAUTHBEARER")
_HOST = "127.0.0.1"


def unsecured_token(subject: str = OAUTH_SUBJECT, lifetime_s: float = 3600.0, now: float | None = None) -> str:
    """An unsecured JWS (``{"alg":"none"}``, claims ``sub``, ``iat``, ``exp``; empty signature) for Kafka's
    unsecured validator; ``lifetime_s`` negative makes an expired one. Test only: anyone can make it."""
    issued = int(time.time() if now is None else now)

    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()

    return f'{part({"alg": "none"})}.{part({"sub": subject, "iat": issued, "exp": issued + int(lifetime_s)})}.'


@dataclass(frozen=True)
class SsoListener:
    """Where the SSO listener is, with the Kerberos part and the SECURE listener (for its CA) it builds on."""

    port: int
    secure: SecureListener
    kerberos: KerberosPart

    @classmethod
    def of(cls, ks: KerberosSettings, secure: SecureListener, part: KerberosPart) -> SsoListener:
        return cls(ks.kafka_sso_port, secure, part)

    @property
    def bootstrap(self) -> str:
        return f"{_HOST}:{self.port}"

    @property
    def broker_principal(self) -> str:
        return self.kerberos.principal(f"kafka/{self.kerberos.host}")

    def gssapi_settings(self, **overrides: object) -> KafkaSettings:
        """Client settings for :data:`KERBEROS_USER` from its keytab (``KRB5_CONFIG`` must name the realm's
        ``krb5.conf``: :meth:`KerberosPart.env`)."""
        values: dict[str, object] = {
            "bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI",
            "sasl_kerberos_domain_name": self.kerberos.host, "sasl_kerberos_principal": self.kerberos.client_principal,
            "sasl_kerberos_keytab": self.kerberos.client_keytab, "ssl_cafile": str(self.secure.ca_file)}
        values.update(overrides)
        return KafkaSettings.model_validate(values)

    def oauth_settings(self, token_file: Path, **overrides: object) -> KafkaSettings:
        """Client settings logging in with the token in ``token_file``."""
        values: dict[str, object] = {
            "bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_file": token_file, "ssl_cafile": str(self.secure.ca_file)}
        values.update(overrides)
        return KafkaSettings.model_validate(values)


def kafka_jvm_options(listener: SsoListener) -> list[str]:
    """What the Kafka JVM needs for the GSSAPI login: the realm's ``krb5.conf``."""
    return [f"-Djava.security.krb5.conf={listener.kerberos.krb5_conf}"]


def render_sso_config(listener: SsoListener, layout: StackLayout, values: dict[str, str]) -> None:
    """Append ``infra/conf/kafka/sso.properties.in`` to the rendered ``server.properties`` (after the SECURE
    listener's, whose keystore password it repeats: the file stays readable by its owner only)."""
    src = layout.infra / "conf" / "kafka" / "sso.properties.in"
    sec = listener.secure
    text = Template(src.read_text()).substitute({
        **values, "KAFKA_SECURE_PORT": str(sec.port), "KAFKA_SSO_PORT": str(listener.port),
        "KAFKA_KEYSTORE": str(sec.keystore), "KAFKA_KEYSTORE_PASSWORD": sec.keystore_password_file.read_text().strip(),
        "KAFKA_KEYTAB": str(listener.kerberos.keytab(f"kafka/{listener.kerberos.host}")),
        "KAFKA_PRINCIPAL": listener.broker_principal, "OAUTH_SUBJECT": OAUTH_SUBJECT})
    dst = layout.conf / "server.properties"
    dst.chmod(0o600)
    with open(dst, "a") as fh:
        fh.write("\n" + text)


def sso_round_trip(listener: SsoListener, timeout_s: float = 10.0) -> None:
    """An OAUTHBEARER login (a fresh unsecured token) over TLS, then a produce/consume round trip on
    :data:`~.secure.PROBE_TOPIC`; raises on failure."""
    from connectors.kafka.admin import common_options  # the clients' own option builder, proven here

    with tempfile.TemporaryDirectory(prefix="hbase-ingest-sso-") as tmp:
        token = Path(tmp) / "token"
        token.write_text(unsecured_token(lifetime_s=600) + "\n")
        kafka_round_trip(listener.bootstrap, timeout_s, PROBE_TOPIC, common_options(listener.oauth_settings(token)))


def setup_sso_acls(layout: StackLayout, plaintext_bootstrap: str) -> None:
    """Grant ``User:ingest`` and ``User:<OAUTH_SUBJECT>`` the SCRAM worker user's ACLs, through the plaintext
    listener."""
    argv = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={layout.conf / 'log4j2.properties'}",
            "-cp", f"{layout.kafka_lib}/*", str(layout.infra / "conf" / "kafka" / "AclSetup.java"),
            plaintext_bootstrap, TOPIC_PREFIX, GROUP_PREFIX, f"User:{KERBEROS_USER}", f"User:{OAUTH_SUBJECT}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=180)
    if done.returncode != 0:
        raise StackError(f"creating the ACLs of the SSO listener failed:\n{(done.stdout + done.stderr)[-2000:]}")
