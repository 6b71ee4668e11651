"""The worker and the CLI against a Kerberized HBase (``stack up --kerberos``: an MIT KDC and an HBase whose
gateways require SASL GSSAPI with QOP auth-conf, or HTTPS with SPNEGO): a full ingest with every row
compared, the reads and the admin commands over HTTPS, and each way to get security wrong as a clear error
with nothing committed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets
from devstack.kerberos import KerberosPart
from pipeline.settings import KafkaSettings, Settings, load_settings

from .secure_support import (
    assert_order_rows,
    cli_env,
    committed,
    krb_hbase_lines,
    make_ca,
    run_cli,
    run_until_committed,
)
from .shown import show
from .worker_support import drop_tables, order_event, order_settings, produce, write_config

EVENTS = 3000
PARTITIONS = 4


def _profile(tmp_path: Path, settings: Settings, k: KerberosPart, mode: str, name: str, **override: str) -> Path:
    path = write_config(tmp_path / name, settings)
    path.write_text(path.read_text() + "\n" + krb_hbase_lines(k, mode, **override))
    return path


def _env(k: KerberosPart) -> dict[str, str]:
    return cli_env(KRB5_CONFIG=str(k.krb5_conf))


async def _secured_client(tmp_path: Path, k: KerberosPart, mode: str) -> HBaseClient:
    probe = _profile(tmp_path, order_settings("probe"), k, mode, f"client-{mode}.toml")
    return HBaseClient(load_settings(probe).hbase)


async def test_full_ingest_over_kerberized_thrift_auth_conf(
        krb: KerberosPart, kafka_settings: KafkaSettings, unique: str, tmp_path: Path) -> None:
    settings = order_settings(unique)
    path = _profile(tmp_path, settings, krb, "sasl", "sasl.toml")
    topic = settings.routes[0].topic
    await create_topics(kafka_settings, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    created = run_cli("tables", "create", "-c", str(path), env=_env(krb))
    assert created.returncode == 0, created.stderr[-3000:]
    await produce(settings, topic, [orjson.dumps(order_event(i)) for i in range(EVENTS)])
    ends = await end_offsets(kafka_settings, topic)
    await run_until_committed(path, _env(krb), kafka_settings, settings, PARTITIONS, ends)
    hbase = await _secured_client(tmp_path, krb, "sasl")
    try:
        await assert_order_rows(hbase, settings, EVENTS)
        # the reads and the admin commands over the HTTPS + SPNEGO gateway of the same HBase
        https = _profile(tmp_path, settings, krb, "https", "https.toml")
        index = settings.routes[2].table
        described = run_cli("tables", "describe", "-c", str(https), index, env=_env(krb))
        assert described.returncode == 0, described.stderr[-3000:]
        scanned = run_cli("scan", "-c", str(https), "--route", "index", "--where", "order_number=ORD00000007",
                          "--format", "jsonl", env=_env(krb))
        assert scanned.returncode == 0, scanned.stderr[-3000:]
        assert "s000" in scanned.stdout and "b0007" in scanned.stdout, scanned.stdout[-2000:]
        # the whole topic replayed by a backfill through the HTTPS gateway: the same rows
        spec = ",".join(f"{p}:0" for p in sorted(ends))
        replayed = run_cli("backfill", "-c", str(https), "-t", topic, "--from-offset", spec, "--no-progress",
                           "--no-metrics", env=_env(krb), timeout=300)
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        assert f"done: {EVENTS:,} events" in replayed.stdout + replayed.stderr, replayed.stderr[-3000:]
        await assert_order_rows(hbase, settings, EVENTS)
    finally:
        await drop_tables(hbase, settings)
        await hbase.aclose()


def _refused(krb: KerberosPart, path: Path) -> str:
    done = run_cli("run", "-c", str(path), "--no-metrics", env=_env(krb), timeout=180)
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: "), done.stderr[-3000:]
    return error


@pytest.fixture
async def refused_setup(krb: KerberosPart, kafka_settings: KafkaSettings, unique: str,
                        tmp_path: Path) -> AsyncIterator[tuple[Settings, str]]:
    settings = order_settings(unique)
    topic = settings.routes[0].topic
    await create_topics(kafka_settings, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await produce(settings, topic, [b'{"order_number": "x"}'] * 20)
    yield settings, topic
    assert set((await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS)).values()) == {None}


async def test_a_keytab_without_the_principal_is_a_clear_error(krb: KerberosPart, refused_setup: Any,
                                                                tmp_path: Path) -> None:
    settings, _ = refused_setup
    path = _profile(tmp_path, settings, krb, "sasl", "wrong-keytab.toml", kerberos_keytab=f'"{krb.stranger_keytab}"')
    error = _refused(krb, path)
    show(f"\n[kerberos errors] wrong keytab: {error}\n")
    assert (f"the keytab {krb.stranger_keytab} holds no key of {krb.client_principal} "
            f"(it holds {krb.stranger_principal})") in error, error


def _kadmin(k: KerberosPart, query: str) -> None:
    env = {**os.environ, "KRB5_CONFIG": str(k.krb5_conf), "KRB5_KDC_PROFILE": str(k.kdc_conf)}
    subprocess.run(["kadmin.local", "-r", k.realm, "-q", query], env=env, check=True, capture_output=True)


async def test_a_principal_the_kdc_does_not_know_is_a_clear_error(krb: KerberosPart, refused_setup: Any,
                                                                  tmp_path: Path, unique: str) -> None:
    settings, _ = refused_setup
    gone = f"gone-{unique}@{krb.realm}"
    keytab = tmp_path / "gone.keytab"
    _kadmin(krb, f"addprinc -randkey {gone}")  # a keytab made, then its principal deleted from the KDC
    _kadmin(krb, f"ktadd -k {keytab} {gone}")
    _kadmin(krb, f"delprinc -force {gone}")
    path = _profile(tmp_path, settings, krb, "sasl", "gone.toml", kerberos_principal=f'"{gone}"',
                    kerberos_keytab=f'"{keytab}"')
    error = _refused(krb, path)
    show(f"\n[kerberos errors] principal unknown to the KDC: {error}\n")
    assert gone in error and "not found in Kerberos database" in error, error


async def test_a_qop_mismatch_names_both_qops(krb: KerberosPart, refused_setup: Any, tmp_path: Path) -> None:
    settings, _ = refused_setup
    path = _profile(tmp_path, settings, krb, "sasl", "qop.toml", sasl_qop='"auth"')
    error = _refused(krb, path)
    show(f"\n[kerberos errors] QOP mismatch: {error}\n")
    assert "QOP auth" in error and "auth-conf" in error, error


async def test_a_gateway_certificate_that_does_not_verify_is_a_clear_error(
        krb: KerberosPart, refused_setup: Any, tmp_path: Path) -> None:
    settings, _ = refused_setup
    other = make_ca(tmp_path)
    path = _profile(tmp_path, settings, krb, "https", "wrong-ca.toml", tls_ca_file=f'"{other}"')
    error = _refused(krb, path)
    show(f"\n[kerberos errors] certificate: {error}\n")
    assert "certificate does not verify" in error, error


async def test_no_credentials_at_all_is_a_clear_error(krb: KerberosPart, refused_setup: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    settings, _ = refused_setup
    path = _profile(tmp_path, settings, krb, "sasl", "no-creds.toml")
    text = path.read_text()
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("kerberos_keytab", "kerberos_principal")))
    path.write_text(text + "\n")
    env = _env(krb) | {"KRB5CCNAME": f"FILE:{tmp_path / 'empty-ccache'}"}
    env.pop("KRB5_CLIENT_KTNAME", None)
    done = run_cli("run", "-c", str(path), "--no-metrics", env=env, timeout=180)
    assert done.returncode == 2, done.stderr[-3000:]
    error = done.stderr.strip().splitlines()[-1]
    show(f"\n[kerberos errors] no credentials: {error}\n")
    assert "ticket cache" in error, error
