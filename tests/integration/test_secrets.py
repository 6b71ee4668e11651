"""Secrets never leak: every command runs at DEBUG level (where it has a log level) with a known SASL
password and user name in the settings file and in the environment, fails once on purpose, and the
password appears nowhere: stdout, stderr (logs, the ``error:`` line), ``--help``, the settings' repr
and dumps, a worker's ``/metrics`` page and ``top``'s view of it.

A worker also runs successfully through SASL_SSL at DEBUG with the real password (from the
environment), and that password is searched for in its output and metrics the same way."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path

import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets, make_producer
from devstack.secure import SecureListener
from pipeline.errors import KafkaAuthError
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import KafkaSettings, load_settings

from ..http_get import http_get
from .secure_support import PASSWORD_ENV, cli_env, committed, run_cli, secure_profile, start_cli
from .worker_support import drop_tables, order_event

USER_ENV = "HBASE_INGEST_KAFKA__SASL_PLAIN_USERNAME"
COMMANDS = ["run", "produce", "scan", "demo", "backfill", "top", "stack", "keys", "tables"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clean(label: str, text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{label} shows a password"


@pytest.fixture
def canaries(unique: str) -> tuple[str, str, str]:
    """(password in the settings file, password in the environment, user name in the environment)."""
    return f"FilePw-{unique}-canary", f"EnvPw-{unique}-canary", f"canary-user-{unique}"


async def test_no_command_shows_the_password_when_it_fails(
        secure_listener: SecureListener, kafka_settings: KafkaSettings, hbase: HBaseClient, unique: str,
        tmp_path: Path, canaries: tuple[str, str, str]) -> None:
    file_pw, env_pw, env_user = canaries
    path, settings = secure_profile(tmp_path, unique, secure_listener,
                                    kafka_lines=f'sasl_plain_password = "{file_pw}"\n')
    stopped = tmp_path / "no-stack"
    stopped.mkdir()
    with_stack = tmp_path / "with-stack.toml"
    with_stack.write_text(path.read_text() + f'\n[stack]\nstate_dir = "{stopped}"\n')
    env = cli_env(**{PASSWORD_ENV: env_pw, USER_ENV: env_user})
    file_only = cli_env()  # the settings file's password only
    topic = settings.routes[0].topic
    await create_topics(kafka_settings, {topic: 2, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    runs: dict[str, tuple[list[str], dict[str, str]]] = {
        # a wrong password (the canaries): each fails at its first Kafka login
        "run (password from the environment)": (
            ["run", "-c", str(path), "--no-metrics", "--log-level", "DEBUG"], env),
        "run (password from the settings file)": (
            ["run", "-c", str(path), "--no-metrics", "--log-level", "DEBUG"], file_only),
        "backfill": (["backfill", "-c", str(path), "-t", topic, "--no-metrics", "--no-progress",
                      "--log-level", "DEBUG", "--state-dir", str(tmp_path / "bf")], env),
        "produce": (["produce", "-e", "transactions", "-n", "5", "--topic", topic, "-c", str(path)], env),
        "demo": (["demo", "-n", "5", "--partitions", "1"], cli_env(**{
            PASSWORD_ENV: env_pw, USER_ENV: env_user,
            "HBASE_INGEST_KAFKA__BOOTSTRAP_SERVERS": secure_listener.bootstrap,
            "HBASE_INGEST_KAFKA__SECURITY_PROTOCOL": "SASL_SSL", "HBASE_INGEST_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
            "HBASE_INGEST_KAFKA__SSL_CAFILE": str(secure_listener.ca_file)})),
        # HBase-side commands: they load the same settings; each fails on something else
        "scan (a table that is not there)": (
            ["scan", "-c", str(path), "--route", "seller", "--where", "seller_id=s001", "--timeout", "5"], env),
        "tables describe (a table that is not there)": (
            ["tables", "describe", "-c", str(path), f"nothere_{unique}"], env),
        "keys build (an event that is not JSON)": (["keys", "build", "-r", "[id]", "-e", "{not json"], env),
        "stack status (a stack that is not running)": (["stack", "status", "-c", str(with_stack)], env),
        "top (a stopped metrics endpoint)": (
            ["top", "--once", "--interval", "0.1", "--url", f"http://127.0.0.1:{_free_port()}/metrics"], env),
    }
    try:
        results = {label: run_cli(*args, env=run_env, timeout=180) for label, (args, run_env) in runs.items()}
    finally:
        await drop_tables(hbase, settings)
    for label, done in results.items():
        assert done.returncode != 0, f"{label} did not fail: {done.stdout[-500:]} {done.stderr[-500:]}"
        _clean(f"{label}: stdout", done.stdout, file_pw, env_pw)
        _clean(f"{label}: stderr", done.stderr, file_pw, env_pw)
    for label in ("run (password from the environment)", "backfill", "produce", "demo"):
        error = results[label].stderr.strip().splitlines()[-1]
        assert error.startswith("error: ") and "SASL authentication failed" in error, (label, error)
        assert env_user in error, (label, error)  # the user is named, the password is not
    assert "SASL authentication failed" in results["run (password from the settings file)"].stderr

    for args in ([], *[[c] for c in COMMANDS], ["stack", "up"], ["stack", "status"], ["keys", "build"],
                 ["tables", "create"]):
        shown = run_cli(*args, "--help", env=env)
        assert shown.returncode == 0, args
        _clean(f"{args} --help", shown.stdout + shown.stderr, file_pw, env_pw)

    dumped = load_settings(path)  # the environment of this process holds no password
    for label, text in (("repr", repr(dumped)), ("str", str(dumped)), ("model_dump", str(dumped.model_dump())),
                        ("model_dump_json", dumped.model_dump_json()), ("kafka repr", repr(dumped.kafka))):
        _clean(f"settings {label}", text, file_pw)


async def test_a_working_worker_shows_no_password(
        secure_listener: SecureListener, kafka_settings: KafkaSettings, hbase: HBaseClient, unique: str,
        tmp_path: Path) -> None:
    password = secure_listener.password_file().read_text().strip()
    path, settings = secure_profile(tmp_path, unique, secure_listener)
    topic = settings.routes[0].topic
    await create_topics(kafka_settings, {topic: 2, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    producer = make_producer(secure_listener.kafka_settings())
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, orjson.dumps(order_event(i)), key=str(i).encode())
                               for i in range(50)])
        await asyncio.gather(await producer.send(topic, b"not json", key=b"bad"))  # one dead letter
    finally:
        await producer.stop()
    ends = await end_offsets(kafka_settings, topic)
    port = _free_port()
    proc = start_cli("run", "-c", str(path), "--log-level", "DEBUG", "--metrics", "--metrics-port", str(port),
                     env=cli_env(**{PASSWORD_ENV: password}))
    try:
        deadline = time.monotonic() + 120
        while await committed(kafka_settings, settings.kafka.group_id, topic, 2) != ends:
            assert proc.poll() is None and time.monotonic() < deadline, "the worker did not commit every offset"
            await asyncio.sleep(0.5)
        status, body = await http_get(port, "/metrics")
        page = body.decode()
        top = run_cli("top", "--once", "--interval", "0.2", "--url", f"http://127.0.0.1:{port}/metrics",
                      env=cli_env(**{PASSWORD_ENV: password}))
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        await drop_tables(hbase, settings)
    assert status == 200 and "hbase_ingest" in page
    assert top.returncode == 0, top.stderr
    text = out.decode()
    assert "event='batch_written'" in text or "level=" in text, text[-2000:]  # its log lines were there to search
    _clean("worker output (stdout + stderr, DEBUG)", text, password)
    _clean("/metrics", page, password)
    _clean("top", top.stdout + top.stderr, password)


async def test_client_debug_logs_show_no_password(secure_listener: SecureListener, unique: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """The CLI keeps aiokafka at WARNING; here its DEBUG records (connections, SASL handshakes) are
    captured in-process, for a login that works and one that fails, and searched."""
    password = secure_listener.password_file().read_text().strip()
    wrong = f"WrongPw-{unique}-canary"
    caplog.set_level(logging.DEBUG)
    good = secure_listener.kafka_settings()
    topic = f"secure.debug-{unique}"
    await create_topics(good, {topic: 1})
    with pytest.raises(KafkaAuthError) as refused:
        await end_offsets(secure_listener.kafka_settings(sasl_password_file=None, sasl_plain_password=wrong), topic)
    assert "aiokafka" in caplog.text and "SASL" in caplog.text.upper()  # DEBUG records were there to search
    _clean("aiokafka DEBUG records", caplog.text, password, wrong)
    _clean("the error", str(refused.value) + repr(refused.value), password, wrong)
    _clean("settings repr", repr(good) + str(good.model_dump()), password, wrong)
