"""The worker against Kafka's SSO listener (``stack up --secure --kerberos``: GSSAPI and OAUTHBEARER over
TLS, :mod:`devstack.krb_kafka`): a full ingest over each mechanism with every row checked, and the
errors a user sees for a keytab without the principal's keys and for an expired or garbage token (exit 2,
one ``error:`` line naming what is wrong, nothing committed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets, make_producer
from devstack.krb_kafka import SsoListener, unsecured_token
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import KafkaSettings, Settings

from .secure_support import (
    assert_order_rows,
    cli_env,
    committed,
    gssapi_kafka_lines,
    run_cli,
    run_until_committed,
    sso_profile,
)
from .shown import show
from .worker_support import drop_tables, order_event

EVENTS = 200
PARTITIONS = 3


def _oauth_lines(sso: SsoListener, token_file: Path) -> str:
    return (f'bootstrap_servers = "{sso.bootstrap}"\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "OAUTHBEARER"\n'
            f'sasl_oauth_token_file = "{token_file}"\nssl_cafile = "{sso.secure.ca_file}"\n')


async def _produce(plain: KafkaSettings, topic: str, count: int) -> None:
    producer = make_producer(plain)
    await producer.start()
    try:
        futs = [await producer.send(topic, orjson.dumps(order_event(i)), key=str(i).encode()) for i in range(count)]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()


async def _ingest_and_check(path: Path, settings: Settings, plain: KafkaSettings, hbase: HBaseClient,
                            env: dict[str, str]) -> None:
    topic = settings.routes[0].topic
    await create_topics(plain, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    await _produce(plain, topic, EVENTS)
    ends = await end_offsets(plain, topic)
    await run_until_committed(path, env, plain, settings, PARTITIONS, ends, 120)
    try:
        await assert_order_rows(hbase, settings, EVENTS)
    finally:
        await drop_tables(hbase, settings)


async def _refused(path: Path, settings: Settings, plain: KafkaSettings, hbase: HBaseClient,
                   env: dict[str, str]) -> str:
    """Run the worker, expect exit 2 with one ``error:`` line and nothing committed; return that line."""
    topic = settings.routes[0].topic
    await create_topics(plain, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    try:
        done = run_cli("run", "-c", str(path), "--no-metrics", env=env)
    finally:
        await drop_tables(hbase, settings)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: "), done.stderr
    assert set((await committed(plain, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}
    return error


async def test_full_ingest_over_gssapi(sso: SsoListener, kafka_settings: KafkaSettings, hbase: HBaseClient,
                                       unique: str, tmp_path: Path) -> None:
    path, settings = sso_profile(tmp_path, unique, gssapi_kafka_lines(sso))
    await _ingest_and_check(path, settings, kafka_settings, hbase, cli_env(**sso.kerberos.env()))


async def test_full_ingest_over_oauthbearer(sso: SsoListener, kafka_settings: KafkaSettings, hbase: HBaseClient,
                                            unique: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token = unsecured_token(lifetime_s=900)
    token_file.write_text(token + "\n")
    path, settings = sso_profile(tmp_path, unique, _oauth_lines(sso, token_file))
    assert token not in path.read_text()
    await _ingest_and_check(path, settings, kafka_settings, hbase, cli_env())


async def test_wrong_keytab_and_bad_tokens_are_clear_errors(sso: SsoListener, kafka_settings: KafkaSettings,
                                                            hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    part = sso.kerberos
    (tmp_path / "k").mkdir()
    path, settings = sso_profile(tmp_path / "k", unique, gssapi_kafka_lines(sso, part.stranger_keytab))
    keytab_error = await _refused(path, settings, kafka_settings, hbase, cli_env(**part.env()))
    for piece in (part.client_principal, str(part.stranger_keytab), "sasl_kerberos_keytab"):
        assert piece in keytab_error, keytab_error

    errors = {"wrong keytab": keytab_error}
    for label, token in (("expired token", unsecured_token(lifetime_s=-600)), ("garbage token", "not-a-token")):
        folder = tmp_path / label.replace(" ", "-")
        folder.mkdir()
        token_file = folder / "token"
        token_file.write_text(token + "\n")
        path, settings = sso_profile(folder, f"{unique}{len(errors)}", _oauth_lines(sso, token_file))
        error = await _refused(path, settings, kafka_settings, hbase, cli_env())
        assert "sasl_oauth_token_file" in error and str(token_file) in error, error
        assert token not in error
        assert ("expired at" in error) if label == "expired token" else ("does not hold a JWT" in error), error
        errors[label] = error
    show("\n[kafka kerberos errors] " + "\n[kafka kerberos errors] ".join(
        f"{k}: {v}" for k, v in errors.items()) + "\n")
