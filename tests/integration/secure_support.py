"""Helpers for the secured-Kafka tests: a per-test profile on the SASL_SSL listener, the CLI run as a
subprocess with a clean environment, and the committed offsets of a group read through plaintext."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from connectors.hbase import HBaseClient
from connectors.kafka import TopicPartition, make_consumer
from devstack.kerberos import KerberosPart
from devstack.krb_kafka import SsoListener
from devstack.secure import GROUP_PREFIX, TOPIC_PREFIX, WORKER_USER, SecureListener
from pipeline.settings import KafkaSettings, Settings, load_settings

from .worker_support import expected_cells, order_event, order_settings, write_config

PASSWORD_ENV = "HBASE_INGEST_KAFKA__SASL_PLAIN_PASSWORD"


def secure_profile(tmp_path: Path, unique: str, listener: SecureListener, *, user: str = WORKER_USER,
                   kafka_lines: str = "", name: str = "secure.toml") -> tuple[Path, Settings]:
    """The guides' order design on topic ``secure.orders-<unique>``, group ``secure.g-<unique>`` and
    dead-letter topic ``secure.dlq-<unique>`` (inside the worker user's ACL prefixes), with the
    listener's security settings in ``[kafka]``; no password (give it by environment or file via
    ``kafka_lines``). Returns the file and the settings it holds (loaded without the environment's
    password)."""
    base = write_config(tmp_path / f"base-{name}", order_settings(unique)).read_text()
    text = (base.replace(f'"orders-{unique}"', f'"{TOPIC_PREFIX}orders-{unique}"')
                .replace(f'"g-{unique}"', f'"{GROUP_PREFIX}g-{unique}"')
                .replace(f'"dlq-{unique}"', f'"{TOPIC_PREFIX}dlq-{unique}"'))
    security = (f'bootstrap_servers = "{listener.bootstrap}"\nsecurity_protocol = "SASL_SSL"\n'
                f'sasl_mechanism = "SCRAM-SHA-512"\nsasl_plain_username = "{user}"\n'
                f'ssl_cafile = "{listener.ca_file}"\n{kafka_lines}')
    text = text.replace("[kafka]\n", "[kafka]\n" + security, 1)
    path = tmp_path / name
    path.write_text(text)
    saved = os.environ.pop(PASSWORD_ENV, None)
    try:
        settings = load_settings(path)
    finally:
        if saved is not None:
            os.environ[PASSWORD_ENV] = saved
    return path, settings


def cli_env(**extra: str) -> dict[str, str]:
    """The environment without any HBASE_INGEST_* variable of the caller's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HBASE_INGEST_KAFKA")}
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``hbase-ingest <args>`` in a subprocess; its output captured as text."""
    return subprocess.run([str(Path(sys.executable).parent / "hbase-ingest"), *args],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``hbase-ingest <args>`` started in the background, stdout and stderr merged into one pipe."""
    return subprocess.Popen([str(Path(sys.executable).parent / "hbase-ingest"), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def make_ca(folder: Path, name: str = "other-ca.pem") -> Path:
    """A self-signed CA certificate that did not sign the broker's (for the wrong-CA tests)."""
    out = folder / name
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(folder / f"{name}.key"),
                    "-out", str(out), "-days", "1", "-subj", "/CN=some other CA"], check=True, capture_output=True)
    return out


async def committed(plain: KafkaSettings, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets, read through the plaintext listener (a super user)."""
    consumer = make_consumer(plain, group_id=group)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        await consumer.stop()


async def run_until_committed(config: Path, env: dict[str, str], plain: KafkaSettings, settings: Settings,
                              partitions: int, ends: dict[int, int], timeout_s: float = 180) -> None:
    """``hbase-ingest run -c config`` until its group (read through ``plain``) has committed ``ends``, it
    exits, or ``timeout_s`` passes; then stopped. Fails with the end of its output unless all was committed."""
    topic = settings.routes[0].topic
    proc = start_cli("run", "-c", str(config), "--no-metrics", "--log-level", "INFO", env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            done = await committed(plain, settings.kafka.group_id, topic, partitions)
            if done == ends or proc.poll() is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert done == ends, out.decode()[-3000:]


async def assert_order_rows(hbase: HBaseClient, settings: Settings, events: int) -> None:
    """Every table of :func:`order_settings` holds exactly the rows of ``order_event(0 .. events - 1)``."""
    by_table: dict[str, dict[bytes, dict[bytes, bytes]]] = {}
    for i in range(events):
        for table, (row, cells) in expected_cells(settings, order_event(i)).items():
            by_table.setdefault(table, {})[row] = cells
    for table, expected in by_table.items():
        got = dict(await hbase.scan_page(table, limit=len(expected) + 100))
        assert set(got) == set(expected), f"{table}: {len(set(expected) - set(got))} rows missing"
        assert got == expected, table


def krb_hbase_lines(k: KerberosPart, mode: str, **override: str) -> str:
    """The ``[hbase]`` section that reaches the Kerberized HBase through its SASL (``mode`` "sasl", QOP
    auth-conf) or HTTPS + SPNEGO ("https") gateways as the client principal; ``override`` replaces keys."""
    keys = {"auth": '"kerberos"', "kerberos_principal": f'"{k.client_principal}"',
            "kerberos_keytab": f'"{k.client_keytab}"', "tls_ca_file": f'"{k.ca_file}"'}
    if mode == "sasl":
        ports = (k.sasl_thrift1_port, k.sasl_thrift2_port)
        keys["sasl_qop"] = '"auth-conf"'
    elif mode == "https":
        ports = (k.https_thrift1_port, k.https_thrift2_port)
        keys |= {"transport": '"http"', "tls": "true"}
    else:
        raise ValueError(mode)
    keys.update(override)
    body = "".join(f"{key} = {value}\n" for key, value in keys.items())
    return (f'[hbase]\n{body}gateways = [{{ host = "{k.host}", port = {ports[0]}, '
            f"thrift2_port = {ports[1]} }}]\n")


def gssapi_kafka_lines(sso: SsoListener, keytab: Path | None = None) -> str:
    """``[kafka]`` keys for the SSO listener over GSSAPI as the client principal (from ``keytab``, by default
    the stack's)."""
    part = sso.kerberos
    return (f'bootstrap_servers = "{sso.bootstrap}"\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\n'
            f'sasl_kerberos_domain_name = "{part.host}"\nsasl_kerberos_principal = "{part.client_principal}"\n'
            f'sasl_kerberos_keytab = "{keytab or part.client_keytab}"\nssl_cafile = "{sso.secure.ca_file}"\n')


def sso_profile(folder: Path, unique: str, kafka_lines: str, extra: str = "",
                name: str = "sso.toml") -> tuple[Path, Settings]:
    """The order design on ``secure.``-prefixed topic, group and dead-letter topic (the SSO principals'
    ACLs), with ``kafka_lines`` as the ``[kafka]`` security settings and ``extra`` appended (an ``[hbase]``
    section). Returns the file and the settings it holds."""
    text = write_config(folder / f"base-{name}", order_settings(unique)).read_text()
    for item in (f"orders-{unique}", f"g-{unique}", f"dlq-{unique}"):
        text = text.replace(f'"{item}"', f'"secure.{item}"')
    text = text.replace("[kafka]\n", "[kafka]\n" + kafka_lines, 1)
    path = folder / name
    path.write_text(text + ("\n" + extra if extra else ""))
    return path, load_settings(path)
