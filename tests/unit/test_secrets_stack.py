"""The secure listener's files: generated passwords readable by their owner only, a CA that clients
can read and that signed the broker's certificate for 127.0.0.1, and a Kafka config with the SASL_SSL
listener that only its owner can read (it holds the keystore's password)."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from devstack.layout import StackLayout, infra_dir
from devstack.provision import render_configs
from devstack.secure import (
    OTHER_USER,
    WORKER_USER,
    SecureListener,
    ensure_tls_and_passwords,
    render_secure_config,
    secure_port,
)
from devstack.settings import StackSettings

VALUES = {"KAFKA_PORT": "19092", "KAFKA_CONTROLLER_PORT": "19093", "KAFKA_DISTANT_PORT": "19097",
          "KAFKA_DISTANT_PROXY_PORT": "19098", "ZK_PORT": "12181", "MASTER_PORT": "16000",
          "REGIONSERVER_PORT": "16020", "CLIENT_RETRIES": "5", "CLIENT_OPERATION_TIMEOUT_MS": "30000",
          "SESSION_TIMEOUT_MS": "30000", "DISTRIBUTED": "false", "ROOTDIR": "file:///tmp/hbase/root",
          "STREAM_CAPABILITY_ENFORCE": "false", "WAL_PROVIDER": "filesystem"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_secure_port_defaults_to_kafka_port_plus_two() -> None:
    assert secure_port(StackSettings(kafka_port=19092)) == 19094
    assert secure_port(StackSettings(kafka_port=19092, kafka_secure_port=29094)) == 29094


def test_files_modes_and_certificate(tmp_path: Path) -> None:
    listener = SecureListener(19094, tmp_path / "secure")
    ensure_tls_and_passwords(listener)
    for path in (listener.password_file(WORKER_USER), listener.password_file(OTHER_USER),
                 listener.keystore_password_file, listener.keystore, listener.folder / "ca.key"):
        assert _mode(path) == 0o600, path
    assert _mode(listener.ca_file) == 0o644 and _mode(listener.folder) == 0o700
    passwords = {listener.password_file(u).read_text() for u in (WORKER_USER, OTHER_USER)}
    assert len(passwords) == 2 and all(len(p.strip()) >= 24 for p in passwords)
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(listener.ca_file), "-verify_ip", "127.0.0.1",
                               str(listener.folder / "broker.pem")], capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    before = listener.password_file().read_text()
    ensure_tls_and_passwords(listener)  # made once: a second call keeps every file
    assert listener.password_file().read_text() == before


def test_rendered_config_has_the_secure_listener_and_is_private(tmp_path: Path) -> None:
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    listener = SecureListener(19094, layout.state / "secure")
    ensure_tls_and_passwords(listener)
    render_configs(layout, VALUES)
    render_secure_config(listener, layout, {"STATE": str(layout.state), **VALUES})
    conf = layout.conf / "server.properties"
    text = conf.read_text()
    assert _mode(conf) == 0o600
    props = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert props["listeners"].endswith("SECURE://127.0.0.1:19094,DISTANT://127.0.0.1:19097")  # the later key wins
    assert props["listener.security.protocol.map"].endswith("SECURE:SASL_SSL,DISTANT:PLAINTEXT")
    assert props["super.users"] == "User:ANONYMOUS"
    for user in (WORKER_USER, OTHER_USER):  # user passwords live in their files only
        assert listener.password_file(user).read_text().strip() not in text
