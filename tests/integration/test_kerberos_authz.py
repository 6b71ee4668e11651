"""Authorization on the Kerberized HBase (``stack up --kerberos``: the AccessController, and the stack's grant of
CREATE on the ``default`` namespace to the ingest principal, :mod:`devstack.krb_authz`): a principal
without rights (``stranger``) is refused on write and on read, over the SASL gateway and over the native RPC,
with a clear error and nothing committed or dead-lettered; the ingest principal writes and reads the tables it
created; a grant revoked mid-run stops the worker uncommitted, and a worker started once the grant is back
writes every row."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets
from devstack import LocalStack
from devstack.kerberos import KerberosPart
from devstack.krb_authz import ACTIONS, Grant, acl
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import KafkaSettings, Settings, load_settings

from .secure_support import assert_order_rows, cli_env, committed, run_cli, run_until_committed, start_cli
from .shown import show
from .worker_support import drop_tables, order_event, order_settings, produce, write_config

PARTITIONS = 2
EVENTS = 200


def _profile(tmp_path: Path, settings: Settings, k: KerberosPart, name: str, *, principal: str, keytab: Path,
             native_master: str | None = None) -> Path:
    """A worker config that reaches the Kerberized HBase as ``principal`` through its SASL gateway (QOP
    auth-conf), or over the native RPC to ``native_master`` (the gateway then serves table admin only)."""
    path = write_config(tmp_path / name, settings)
    native = f'client = "native"\nmasters = ["{native_master}"]\n' if native_master else ""
    path.write_text(path.read_text() + (
        f'\n[hbase]\nauth = "kerberos"\nkerberos_principal = "{principal}"\nkerberos_keytab = "{keytab}"\n'
        f'sasl_qop = "auth-conf"\n{native}gateways = [{{ host = "{k.host}", port = {k.sasl_thrift1_port}, '
        f"thrift2_port = {k.sasl_thrift2_port} }}]\n"))
    return path


def _env(k: KerberosPart) -> dict[str, str]:
    return cli_env(KRB5_CONFIG=str(k.krb5_conf))


def _error_line(done: object) -> str:
    out = getattr(done, "stderr", "")
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), out[-3000:]
    return lines[-1]


@pytest.fixture
async def owned(krb: KerberosPart, kafka_settings: KafkaSettings, unique: str,
                tmp_path: Path) -> AsyncIterator[tuple[Settings, HBaseClient]]:
    """The order design's tables, created by the ingest principal (their owner) through the SASL gateway, its
    topic and dead-letter topic; dropped afterwards."""
    settings = order_settings(unique)
    await create_topics(kafka_settings, {settings.routes[0].topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    probe = _profile(tmp_path, settings, krb, "ingest-client.toml", principal=krb.client_principal,
                     keytab=krb.client_keytab)
    hbase = HBaseClient(load_settings(probe).hbase)
    try:
        await create_tables(hbase, settings)
        yield settings, hbase
    finally:
        await drop_tables(hbase, settings)
        await hbase.aclose()


async def _nothing_committed(kafka: KafkaSettings, settings: Settings) -> None:
    topic = settings.routes[0].topic
    assert set((await committed(kafka, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}
    assert sum((await end_offsets(kafka, settings.kafka.dead_letter_topic)).values()) == 0


@pytest.mark.parametrize("transport", ["sasl", "native"])
async def test_stranger_is_refused_and_the_ingest_principal_writes_and_reads(
        kerberos_stack: LocalStack, krb: KerberosPart, kafka_settings: KafkaSettings,
        owned: tuple[Settings, HBaseClient], tmp_path: Path, transport: str) -> None:
    settings, hbase = owned
    topic = settings.routes[0].topic
    master = f"{krb.host}:{kerberos_stack.settings.kerberos_master_port}" if transport == "native" else None
    stranger = _profile(tmp_path, settings, krb, "stranger.toml", principal=krb.stranger_principal,
                        keytab=krb.stranger_keytab, native_master=master)
    await produce(settings, topic, [orjson.dumps(order_event(i)) for i in range(EVENTS)])

    done = run_cli("run", "-c", str(stranger), "--no-metrics", env=_env(krb), timeout=120)
    write_error = _error_line(done)
    show(f"\n[authz {transport}] stranger run: exit {done.returncode}: {write_error}\n")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "HBase refused user 'stranger" in write_error and "the WRITE permission on table" in write_error, write_error
    assert any(r.table in write_error for r in settings.routes), write_error
    await _nothing_committed(kafka_settings, settings)

    scanned = run_cli("scan", "-c", str(stranger), "--route", "index", "--where", "order_number=ORD00000007",
                      "--format", "jsonl", env=_env(krb))
    read_error = _error_line(scanned)
    show(f"[authz {transport}] stranger scan: exit {scanned.returncode}: {read_error}\n")
    assert scanned.returncode == 2, scanned.stderr[-3000:]
    assert f"the READ permission on table '{settings.routes[2].table}'" in read_error, read_error
    if transport == "sasl":
        replayed = run_cli("backfill", "-c", str(stranger), "-t", topic, "--from-offset",
                           ",".join(f"{p}:0" for p in range(PARTITIONS)), "--no-progress", "--no-metrics",
                           env=_env(krb))
        backfill_error = _error_line(replayed)
        show(f"[authz {transport}] stranger backfill: exit {replayed.returncode}: {backfill_error}\n")
        assert replayed.returncode == 2, replayed.stderr[-3000:]
        assert "the WRITE permission on table" in backfill_error, backfill_error

    # the ingest principal, the tables' owner, over the same transport
    ingest = _profile(tmp_path, settings, krb, "ingest.toml", principal=krb.client_principal,
                      keytab=krb.client_keytab, native_master=master)
    ends = await end_offsets(kafka_settings, topic)
    await run_until_committed(ingest, _env(krb), kafka_settings, settings, PARTITIONS, ends, 90)
    await assert_order_rows(hbase, settings, EVENTS)
    scanned = run_cli("scan", "-c", str(ingest), "--route", "index", "--where", "order_number=ORD00000007",
                      "--format", "jsonl", env=_env(krb))
    assert scanned.returncode == 0, scanned.stderr[-3000:]
    assert "b0007" in scanned.stdout, scanned.stdout[-2000:]


async def _wait_committed(kafka: KafkaSettings, settings: Settings, ends: dict[int, int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    topic = settings.routes[0].topic
    while (done := await committed(kafka, settings.kafka.group_id, topic, PARTITIONS)) != ends:
        assert time.monotonic() < deadline, (done, ends)
        await asyncio.sleep(0.5)


async def test_a_grant_revoked_mid_run_stops_the_worker_uncommitted_and_it_resumes_once_back(
        kerberos_stack: LocalStack, krb: KerberosPart, kafka_settings: KafkaSettings,
        owned: tuple[Settings, HBaseClient], tmp_path: Path) -> None:
    settings, hbase = owned
    topic, seller = settings.routes[0].topic, settings.routes[0].table
    path = _profile(tmp_path, settings, krb, "ingest.toml", principal=krb.client_principal, keytab=krb.client_keytab)
    await produce(settings, topic, [orjson.dumps(order_event(i)) for i in range(EVENTS)])
    first = await end_offsets(kafka_settings, topic)
    proc = start_cli("run", "-c", str(path), "--no-metrics", env=_env(krb))
    try:
        await _wait_committed(kafka_settings, settings, first, 60)
        acl(kerberos_stack.layout, krb, "revoke", Grant("ingest", "W", seller))
        await produce(settings, topic, [orjson.dumps(order_event(i)) for i in range(EVENTS, 2 * EVENTS)],
                      keys=[str(i).encode() for i in range(EVENTS, 2 * EVENTS)])
        out, _ = await asyncio.to_thread(proc.communicate, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        acl(kerberos_stack.layout, krb, "grant", Grant("ingest", ACTIONS, seller))  # the owner's rights, back
    text = out.decode()
    error = text.strip().splitlines()[-1]
    show(f"\n[authz revoke] worker: exit {proc.returncode}: {error}\n")
    assert proc.returncode == 2, text[-3000:]
    assert f"HBase refused user 'ingest': the WRITE permission on table '{seller}'" in error, error
    assert await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS) == first
    assert sum((await end_offsets(kafka_settings, settings.kafka.dead_letter_topic)).values()) == 0

    ends = await end_offsets(kafka_settings, topic)
    await run_until_committed(path, _env(krb), kafka_settings, settings, PARTITIONS, ends, 90)
    await assert_order_rows(hbase, settings, 2 * EVENTS)  # every row of both halves: 0 lost
