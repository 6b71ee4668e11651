"""The secured Kafka listener of the local stack (``stack up --secure``, ``[stack] secure = true``).

Beside the plaintext listener (kept for the demo and every plaintext client), Kafka gets a SASL_SSL
listener on ``kafka_secure_port`` (default ``kafka_port + 2``):

- **TLS**: a CA the stack creates with ``openssl`` (``ca.pem``, readable by clients; its key stays in
  the folder, mode 0600) signs the broker's certificate for ``127.0.0.1`` and ``localhost``, held in a
  PKCS12 keystore whose password is generated;
- **SCRAM-SHA-512 users** :data:`WORKER_USER` and :data:`OTHER_USER`, their generated passwords in
  ``<user>.password`` (mode 0600), created with Kafka's own Admin client from the cached jars
  (``infra/conf/kafka/SecureSetup.java``), which reads the files: no password is ever on a command line
  or printed;
- **ACLs** under KRaft's StandardAuthorizer, prefixed so tests can use unique names:
  :data:`WORKER_USER` may read, write, describe and create topics starting with :data:`TOPIC_PREFIX`
  and use groups starting with :data:`GROUP_PREFIX`; :data:`OTHER_USER` may do nothing. The plaintext
  and controller listeners' principal (``User:ANONYMOUS``) is a super user.

Everything lives in ``<state>/secure`` (mode 0700) and is made once; later ``up`` calls reuse it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from string import Template

from pipeline.errors import StackError
from pipeline.settings import KafkaSettings

from .layout import StackLayout
from .readiness import kafka_round_trip
from .settings import StackSettings

__all__ = [
    "GROUP_PREFIX",
    "OTHER_USER",
    "PROBE_TOPIC",
    "TOPIC_PREFIX",
    "WORKER_USER",
    "SecureListener",
    "ensure_tls_and_passwords",
    "issue_server_keystore",
    "render_secure_config",
    "secure_port",
    "secure_round_trip",
    "setup_users_and_acls",
]

WORKER_USER = "hbase-ingest"
OTHER_USER = "outsider"
TOPIC_PREFIX = "secure."
GROUP_PREFIX = "secure."
#: the topic of the secure listener's readiness round trip (under the worker user's prefix)
PROBE_TOPIC = f"{TOPIC_PREFIX}hbase-ingest.ready"
_HOST = "127.0.0.1"


def secure_port(s: StackSettings) -> int:
    return s.kafka_secure_port if s.kafka_secure_port is not None else s.kafka_port + 2


@dataclass(frozen=True)
class SecureListener:
    """Where the SASL_SSL listener is and where its CA and password files are (paths, never contents)."""

    port: int
    folder: Path

    @property
    def bootstrap(self) -> str:
        return f"{_HOST}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.folder / "broker.p12"

    @property
    def keystore_password_file(self) -> Path:
        return self.folder / "keystore.password"

    def password_file(self, user: str = WORKER_USER) -> Path:
        return self.folder / f"{user}.password"

    def kafka_settings(self, user: str = WORKER_USER, **overrides: object) -> KafkaSettings:
        """Client settings for ``user`` on this listener (the password read from its file)."""
        values: dict[str, object] = {
            "bootstrap_servers": self.bootstrap, "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
            "sasl_password_file": self.password_file(user), "ssl_cafile": str(self.ca_file)}
        values.update(overrides)
        return KafkaSettings.model_validate(values)

    @classmethod
    def of(cls, settings: StackSettings, layout: StackLayout) -> SecureListener:
        return cls(secure_port(settings), layout.state / "secure")


def _write_secret(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(24) + "\n")


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise StackError(f"openssl {args[0]} failed while making the secure listener's certificates:\n"
                         f"{done.stderr[-1500:]}")


def ensure_tls_and_passwords(listener: SecureListener) -> None:
    """Make what is missing: the passwords (0600), the CA, the broker's key, certificate and keystore."""
    folder = listener.folder
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    for path in (listener.keystore_password_file, listener.password_file(WORKER_USER),
                 listener.password_file(OTHER_USER)):
        if not path.exists():
            _write_secret(path)
    if listener.keystore.exists():
        return
    old = os.umask(0o077)
    try:
        if not (folder / "ca.key").exists() or not listener.ca_file.exists():
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                     "-days", "3650", "-subj", "/CN=hbase-ingest local stack CA",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
                 "-subj", "/CN=localhost", cwd=folder)
        (folder / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                           "extendedKeyUsage=serverAuth\n")
        _openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "broker.pem", "-days", "3650", "-extfile", "broker.ext", cwd=folder)
        _openssl("pkcs12", "-export", "-in", "broker.pem", "-inkey", "broker.key", "-name", "broker",
                 "-out", "broker.p12.tmp", "-passout", f"file:{listener.keystore_password_file}", cwd=folder)
    finally:
        os.umask(old)
    listener.ca_file.chmod(0o644)
    (folder / "broker.p12.tmp").rename(listener.keystore)


def issue_server_keystore(listener: SecureListener, keystore: Path, password_file: Path, name: str) -> None:
    """A PKCS12 ``keystore`` for ``localhost`` and ``127.0.0.1`` signed by the listener's CA (made by
    :func:`ensure_tls_and_passwords`, which runs first), its generated password in ``password_file``
    (0600), so that a client verifies every TLS server of the stack with the one ``ca.pem``. Made once:
    an existing ``keystore`` is kept. ``name``: the certificate's alias and the stem of its files."""
    ensure_tls_and_passwords(listener)
    if keystore.exists():
        return
    folder = keystore.parent
    folder.mkdir(parents=True, exist_ok=True)
    if not password_file.exists():
        _write_secret(password_file)
    ca = listener.folder
    old = os.umask(0o077)
    try:
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", "/CN=localhost", cwd=folder)
        (folder / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                            "extendedKeyUsage=serverAuth\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca / "ca.pem"), "-CAkey", str(ca / "ca.key"),
                 "-CAcreateserial", "-CAserial", str(folder / f"{name}.srl"), "-out", f"{name}.pem",
                 "-days", "3650", "-extfile", f"{name}.ext", cwd=folder)
        _openssl("pkcs12", "-export", "-in", f"{name}.pem", "-inkey", f"{name}.key", "-name", name,
                 "-out", f"{keystore.name}.tmp", "-passout", f"file:{password_file}", cwd=folder)
    finally:
        os.umask(old)
    (folder / f"{keystore.name}.tmp").rename(keystore)


def render_secure_config(listener: SecureListener, layout: StackLayout, values: dict[str, str]) -> None:
    """Append the secure listener's settings (``infra/conf/kafka/secure.properties.in``) to the rendered
    ``server.properties``, which then holds the keystore's password: it becomes readable by its owner only."""
    src = layout.infra / "conf" / "kafka" / "secure.properties.in"
    dst = layout.conf / "server.properties"
    text = Template(src.read_text()).substitute({
        **values, "KAFKA_SECURE_PORT": str(listener.port), "KAFKA_KEYSTORE": str(listener.keystore),
        "KAFKA_KEYSTORE_PASSWORD": listener.keystore_password_file.read_text().strip()})
    dst.chmod(0o600)
    with open(dst, "a") as fh:
        fh.write("\n" + text)


def secure_round_trip(listener: SecureListener, timeout_s: float = 10.0) -> None:
    """A SCRAM login as :data:`WORKER_USER` over TLS (verified against the stack's CA), then a
    produce/consume round trip on :data:`PROBE_TOPIC`; raises on failure."""
    from connectors.kafka.admin import common_options  # the clients' own option builder, proven here

    options = common_options(listener.kafka_settings())
    kafka_round_trip(listener.bootstrap, timeout_s, PROBE_TOPIC, options)


def setup_users_and_acls(listener: SecureListener, layout: StackLayout, plaintext_bootstrap: str) -> None:
    """Create (or update) both SCRAM users and the worker user's ACLs through the plaintext listener."""
    argv = ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={layout.conf / 'log4j2.properties'}",
            "-cp", f"{layout.kafka_lib}/*", str(layout.infra / "conf" / "kafka" / "SecureSetup.java"),
            plaintext_bootstrap, str(listener.folder), WORKER_USER, OTHER_USER, TOPIC_PREFIX, GROUP_PREFIX]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=180)
    if done.returncode != 0:
        raise StackError("creating the SCRAM users and ACLs of the secure listener failed:\n"
                         f"{(done.stdout + done.stderr)[-2000:]}")
