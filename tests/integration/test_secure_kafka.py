"""The worker against the stack's SASL_SSL listener (SCRAM-SHA-512, TLS from the stack's CA, ACLs):
a full ingest with every row checked, and the errors a user sees for a wrong password, a user without
the ACL and a wrong CA file (exit status, one ``error:`` line, nothing committed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets, make_producer
from devstack.secure import OTHER_USER, WORKER_USER, SecureListener
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import KafkaSettings, Settings

from .secure_support import (
    PASSWORD_ENV,
    assert_order_rows,
    cli_env,
    committed,
    make_ca,
    run_cli,
    run_until_committed,
    secure_profile,
)
from .worker_support import drop_tables, expected_cells, order_event

EVENTS = 300
PARTITIONS = 3


async def _produce(settings: Settings, topic: str, count: int) -> None:
    """Through the secured listener, as the worker user (its ACL allows writing its topics)."""
    producer = make_producer(settings.kafka)
    await producer.start()
    try:
        futs = [await producer.send(topic, orjson.dumps(order_event(i)), key=str(i).encode()) for i in range(count)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


def _password(listener: SecureListener, user: str = WORKER_USER) -> str:
    return listener.password_file(user).read_text().strip()


async def _prepared(tmp_path: Path, unique: str, listener: SecureListener, hbase: HBaseClient,
                    events: int = EVENTS) -> tuple[Path, Settings, str]:
    path, settings = secure_profile(tmp_path, unique, listener,
                                    kafka_lines=f'sasl_password_file = "{listener.password_file()}"\n')
    topic = settings.routes[0].topic
    # created through SASL_SSL: the worker user may create topics under its prefix
    await create_topics(settings.kafka, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    await _produce(settings, topic, events)
    return path, settings, topic


async def _topic_and_tables(plain: KafkaSettings, hbase: HBaseClient, settings: Settings) -> str:
    """The profile's topics (through plaintext) and tables: the worker would start if Kafka let it."""
    topic = settings.routes[0].topic
    await create_topics(plain, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    return topic


async def test_full_ingest_through_sasl_ssl(secure_listener: SecureListener, kafka_settings: KafkaSettings,
                                            hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    path, settings, topic = await _prepared(tmp_path, unique, secure_listener, hbase)
    config = path.read_text()
    assert "sasl_plain_password" not in config and _password(secure_listener) not in config
    ends = await end_offsets(settings.kafka, topic)
    assert sum(ends.values()) == EVENTS
    await run_until_committed(path, cli_env(), kafka_settings, settings, PARTITIONS, ends, 120)
    try:
        await assert_order_rows(hbase, settings, EVENTS)
    finally:
        await drop_tables(hbase, settings)


async def test_wrong_password_names_listener_mechanism_and_user(
        secure_listener: SecureListener, kafka_settings: KafkaSettings, hbase: HBaseClient, unique: str,
        tmp_path: Path) -> None:
    path, settings = secure_profile(tmp_path, unique, secure_listener)
    topic = await _topic_and_tables(kafka_settings, hbase, settings)
    wrong = "not-the-password-" + unique
    try:
        done = run_cli("run", "-c", str(path), "--no-metrics", env=cli_env(**{PASSWORD_ENV: wrong}))
    finally:
        await drop_tables(hbase, settings)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0
    assert lines[-1].startswith("error: "), done.stderr
    error = lines[-1]
    for part in (secure_listener.bootstrap, "SASL_SSL", "SCRAM-SHA-512", repr(WORKER_USER),
                 "authentication failed"):
        assert part in error, error
    assert wrong not in done.stdout + done.stderr
    assert set((await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}


async def test_user_without_the_acl_gets_an_authorization_error(
        secure_listener: SecureListener, kafka_settings: KafkaSettings, hbase: HBaseClient, unique: str,
        tmp_path: Path) -> None:
    path, settings = secure_profile(tmp_path, unique, secure_listener, user=OTHER_USER,
                                    kafka_lines=f'sasl_password_file = "{secure_listener.password_file(OTHER_USER)}"\n')
    topic = await _topic_and_tables(kafka_settings, hbase, settings)
    try:
        done = run_cli("run", "-c", str(path), "--no-metrics", env=cli_env())
    finally:
        await drop_tables(hbase, settings)
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and "not authorized" in error, done.stderr
    names = (repr(topic), repr(settings.kafka.dead_letter_topic), repr(settings.kafka.group_id))
    assert any(f"topic {n}" in error or f"group {n}" in error for n in names), error
    assert set((await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}


async def test_wrong_ca_file_names_the_file(secure_listener: SecureListener, kafka_settings: KafkaSettings,
                                            hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    other_ca = make_ca(tmp_path)
    path, settings = secure_profile(tmp_path, unique, secure_listener,
                                    kafka_lines=f'sasl_password_file = "{secure_listener.password_file()}"\n')
    wrong = path.read_text().replace(str(secure_listener.ca_file), str(other_ca))
    path.write_text(wrong)
    topic = await _topic_and_tables(kafka_settings, hbase, settings)
    try:
        done = run_cli("run", "-c", str(path), "--no-metrics", env=cli_env())
        path.write_text(wrong.replace(str(other_ca), str(tmp_path / "missing-ca.pem")))
        missing = run_cli("run", "-c", str(path), "--no-metrics", env=cli_env())
    finally:
        await drop_tables(hbase, settings)
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: "), done.stderr
    assert str(other_ca) in error and "did not verify" in error, error
    assert set((await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}

    done = missing
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert str(tmp_path / "missing-ca.pem") in error and "does not exist" in error, error


async def test_produce_and_backfill_through_sasl_ssl(secure_listener: SecureListener, kafka_settings: KafkaSettings,
                                                     hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    """``produce`` and ``backfill`` log in with the password from the environment (never the command line)."""
    path, settings, topic = await _prepared(tmp_path, unique, secure_listener, hbase, events=60)
    env = cli_env(**{PASSWORD_ENV: _password(secure_listener)})
    no_file = path.read_text().replace(f'sasl_password_file = "{secure_listener.password_file()}"\n', "")
    path.write_text(no_file)
    produced = run_cli("produce", "-e", "transactions", "-n", "25", "--partitions", "2",
                       "--topic", f"secure.tx-{unique}", "-c", str(path), env=env)
    assert produced.returncode == 0, produced.stderr
    assert sum((await end_offsets(kafka_settings, f"secure.tx-{unique}")).values()) == 25
    try:
        done = run_cli("backfill", "-c", str(path), "-t", topic, "--no-metrics", "--no-progress",
                       "--state-dir", str(tmp_path / "bf"), env=env, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        by_table: dict[str, dict[bytes, dict[bytes, bytes]]] = {}
        for i in range(60):
            for table, (row, cells) in expected_cells(settings, order_event(i)).items():
                by_table.setdefault(table, {})[row] = cells
        for table, expected in by_table.items():
            assert dict(await hbase.scan_page(table, limit=200)) == expected, table
    finally:
        await drop_tables(hbase, settings)
