"""Tickets that expire mid-run (``stack up --secure --kerberos``). The KDC gives the client principal
tickets of :data:`LIFETIME_S`; two workers run across at least three lifetimes, one writing through the
SASL gateway, one through the HTTPS + SPNEGO gateway, both reading Kafka over GSSAPI. Every lifetime the
test cuts their connections to the SASL gateway and to Kafka (``ss -K``), so that each transport has to
authenticate again with a ticket it renewed; the HTTPS gateway authenticates every request by itself.
The KDC's log shows the renewals: the distinct tickets (their ``authtime``) that asked for a ticket to
each service. 0 lost. A keytab removed mid-run stops the worker at its next renewal with a clear error,
uncommitted past what was written, and a restart with the keytab back finishes the topic."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, end_offsets, make_producer
from devstack import LocalStack
from devstack.kerberos import KerberosPart, max_ticket_life
from devstack.krb_kafka import SsoListener
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import KafkaSettings, Settings, load_settings

from .secure_support import (
    assert_order_rows,
    cli_env,
    committed,
    gssapi_kafka_lines,
    krb_hbase_lines,
    run_cli,
    run_until_committed,
    sso_profile,
    start_cli,
)
from .shown import show
from .worker_support import drop_tables, order_event

#: the client principal's ticket lifetime during these tests
LIFETIME_S = 20
#: how long the workers run: a little over four lifetimes
RUN_S = 4.25 * LIFETIME_S
PARTITIONS = 2
#: events per second into each topic while the workers run
RATE = 25
#: events of the keytab test: produced over one and a half lifetimes
KEYTAB_EVENTS = int(1.5 * LIFETIME_S * RATE)

_TICKET = re.compile(r"(AS|TGS)_REQ .*ISSUE: authtime (\d+),.* ingest@\S+ for (\S+?)/")


@pytest.fixture
def short_tickets(sso: SsoListener, kerberos_stack: LocalStack) -> Iterator[Path]:
    """The client principal's tickets shortened to :data:`LIFETIME_S` for the test (the realm's 24 h
    after it); yields the KDC's log."""
    part = sso.kerberos
    max_ticket_life(part, "ingest", f"{LIFETIME_S} seconds")
    try:
        yield kerberos_stack.layout.log_file("kdc")
    finally:
        max_ticket_life(part, "ingest", "1 day")


def tickets_per_service(log: Path, start: int) -> dict[str, set[int]]:
    """Per service (``hbase``, ``HTTP``, ``kafka``, ``krbtgt``): the distinct client tickets (authtime) that
    the KDC issued it a ticket for, from byte ``start`` of its log on."""
    seen: dict[str, set[int]] = {}
    with log.open("rb") as f:
        f.seek(start)
        for line in f.read().decode("utf-8", "replace").splitlines():
            m = _TICKET.search(line)
            if m:
                seen.setdefault(m.group(3), set()).add(int(m.group(2)))
    return seen


def cut_connections(*ports: int) -> None:
    """Close every TCP connection this machine holds to ``ports`` at once (``ss -K``: the kernel aborts
    the client's sockets); the worker has to connect, and authenticate, again."""
    for port in ports:
        subprocess.run(["ss", "-K", "dst", "127.0.0.1", "dport", "=", str(port)], capture_output=True, check=False,
                       timeout=10)


async def _produce_steadily(plain: KafkaSettings, topics: list[str], start: int, count: int, rate: int) -> None:
    """``order_event(start .. start + count - 1)`` into each topic, ``rate`` per second."""
    producer = make_producer(plain)
    await producer.start()
    try:
        for i in range(start, start + count):
            for topic in topics:
                await producer.send(topic, orjson.dumps(order_event(i)), key=str(i).encode())
            if (i - start) % rate == rate - 1:
                await producer.flush()
                await asyncio.sleep(1.0)
        await producer.flush()
    finally:
        await producer.stop()


def _worker_profiles(folder: Path, unique: str, sso: SsoListener, keytab: Path | None = None,
                     modes: tuple[str, ...] = ("sasl", "https")) -> dict[str, tuple[Path, Settings]]:
    part = sso.kerberos
    over = {} if keytab is None else {"kerberos_keytab": f'"{keytab}"'}
    return {mode: sso_profile(folder, f"{unique}{mode[0]}", gssapi_kafka_lines(sso, keytab),
                              krb_hbase_lines(part, mode, **over), name=f"{mode}.toml") for mode in modes}


async def _prepare(profiles: dict[str, tuple[Path, Settings]], plain: KafkaSettings, part: KerberosPart) -> None:
    for path, settings in profiles.values():
        await create_topics(plain, {settings.routes[0].topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
        created = run_cli("tables", "create", "-c", str(path), env=cli_env(**part.env()))
        assert created.returncode == 0, created.stderr[-3000:]


def _secured(path: Path) -> HBaseClient:
    return HBaseClient(load_settings(path).hbase)


async def test_workers_run_across_ticket_lifetimes_over_every_transport(
        sso: SsoListener, krb: KerberosPart, short_tickets: Path, kafka_settings: KafkaSettings, unique: str,
        tmp_path: Path) -> None:
    part = sso.kerberos
    profiles = _worker_profiles(tmp_path, unique, sso)
    await _prepare(profiles, kafka_settings, part)
    topics = [s.routes[0].topic for _, s in profiles.values()]
    log_start = short_tickets.stat().st_size  # noqa: ASYNC240 - one stat
    env = cli_env(**part.env())
    workers = {mode: start_cli("run", "-c", str(path), "--no-metrics", "--log-level", "INFO", env=env)
               for mode, (path, _) in profiles.items()}
    events = int(RUN_S * RATE)
    began = time.monotonic()
    outputs: dict[str, str] = {}
    try:
        producing = asyncio.ensure_future(_produce_steadily(kafka_settings, topics, 0, events, RATE))
        cuts = 0
        while not producing.done():
            await asyncio.sleep(0.5)
            if time.monotonic() - began >= (cuts + 0.5) * LIFETIME_S:
                cut_connections(part.sasl_thrift1_port, part.sasl_thrift2_port, sso.port)
                cuts += 1
            for mode, proc in workers.items():
                assert proc.poll() is None, f"the {mode} worker exited: " + proc.communicate()[0].decode()[-3000:]
        await producing
        for mode, (_, settings) in profiles.items():
            topic = settings.routes[0].topic
            ends = await end_offsets(kafka_settings, topic)
            deadline = time.monotonic() + 60
            while (await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS) != ends
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.5)
            assert await committed(kafka_settings, settings.kafka.group_id, topic, PARTITIONS) == ends, mode
        ran_s = time.monotonic() - began
    finally:
        for mode, proc in workers.items():
            proc.terminate()
            outputs[mode] = proc.communicate(timeout=60)[0].decode()
    seen = tickets_per_service(short_tickets, log_start)
    renewals = {service: len(tickets) for service, tickets in sorted(seen.items())}
    retries = {mode: (m.group(1) if (m := re.search(r"retries (\d+)", out)) else "?") for mode, out in outputs.items()}
    show(f"\n[ticket expiry] lifetime_s={LIFETIME_S} run_s={ran_s:.0f} connection_cuts={cuts} "
                     f"events_per_worker={events} write retries per worker: {retries}; client tickets seen per "
                     f"service: {renewals}\n")
    for mode, out in outputs.items():
        assert "Ticket expired" not in out and "Kerberos" not in out, f"{mode}: {out[-3000:]}"
        assert "level='error'" not in out and "\nerror: " not in out, f"{mode}: {out[-3000:]}"
    assert ran_s >= 3 * LIFETIME_S
    for service in ("hbase", "HTTP", "kafka"):  # each transport logged in with at least three tickets
        assert len(seen.get(service, ())) >= 3, (service, renewals)
    for path, settings in profiles.values():
        hbase = _secured(path)
        try:
            await assert_order_rows(hbase, settings, events)
            assert sum((await end_offsets(kafka_settings, settings.kafka.dead_letter_topic)).values()) == 0
        finally:
            await drop_tables(hbase, settings)
            await hbase.aclose()


async def _stops_on_the_removed_keytab(proc: subprocess.Popen[bytes], keytab: Path, label: str,
                                      cut: tuple[int, ...] = ()) -> tuple[str, float]:
    """Remove ``keytab`` 3 s into the worker's run; after a lifetime, cut its connections to ``cut``. The
    worker must stop with exit 2 within a lifetime and 10 s of the removal; returns its error line and
    when it stopped (seconds after the removal)."""
    await asyncio.sleep(3)
    await anyio.Path(keytab).unlink()
    removed = time.monotonic()
    cuts_done = not cut
    while proc.poll() is None and time.monotonic() - removed < 3 * LIFETIME_S:
        await asyncio.sleep(0.5)
        if not cuts_done and time.monotonic() - removed > LIFETIME_S:
            cut_connections(*cut)
            cuts_done = True
    stopped_after = time.monotonic() - removed
    assert proc.poll() is not None, "the worker did not stop within three ticket lifetimes"
    out = proc.communicate(timeout=30)[0].decode()
    error = next((line for line in reversed(out.splitlines()) if line.startswith("error: ")), "(no error line)")
    show(f"\n[ticket expiry] keytab removed ({label}): exit {proc.returncode} after "
                     f"{stopped_after:.1f} s (lifetime {LIFETIME_S} s): {error}\n")
    assert proc.returncode == 2, out[-3000:]
    assert stopped_after <= LIFETIME_S + 10, stopped_after
    return error, stopped_after


async def _finish_with_the_keytab_back(path: Path, settings: Settings, env: dict[str, str], keytab: Path,
                                       part: KerberosPart, plain: KafkaSettings, hbase: HBaseClient) -> None:
    """With ``keytab`` restored, the worker finishes the topic: every event's rows, none dead-lettered."""
    shutil.copyfile(part.client_keytab, keytab)
    topic = settings.routes[0].topic
    ends = await end_offsets(plain, topic)
    await run_until_committed(path, env, plain, settings, PARTITIONS, ends, 120)
    try:
        await assert_order_rows(hbase, settings, KEYTAB_EVENTS)
        assert sum((await end_offsets(plain, settings.kafka.dead_letter_topic)).values()) == 0
    finally:
        await drop_tables(hbase, settings)


async def test_a_keytab_removed_mid_run_stops_the_hbase_side_at_its_next_renewal(
        sso: SsoListener, krb: KerberosPart, short_tickets: Path, kafka_settings: KafkaSettings, unique: str,
        tmp_path: Path) -> None:
    part = sso.kerberos
    keytab = tmp_path / "ingest.keytab"
    shutil.copyfile(part.client_keytab, keytab)
    profiles = _worker_profiles(tmp_path, unique, sso, keytab, modes=("https",))
    await _prepare(profiles, kafka_settings, part)
    path, settings = profiles["https"]
    env = cli_env(**part.env())
    proc = start_cli("run", "-c", str(path), "--no-metrics", env=env)
    producing = asyncio.ensure_future(
        _produce_steadily(kafka_settings, [settings.routes[0].topic], 0, KEYTAB_EVENTS, RATE))
    try:
        error, _ = await _stops_on_the_removed_keytab(proc, keytab, "HTTPS gateway")
        assert error == (f"error: kerberos_keytab {keytab}: no such file (renewing its ticket, which expires in "
                         f"{error.rsplit('expires in ', 1)[-1]}"), error
        await producing
    finally:
        if proc.poll() is None:
            proc.kill()
        producing.cancel()
    hbase = _secured(path)
    try:
        await _finish_with_the_keytab_back(path, settings, env, keytab, part, kafka_settings, hbase)
    finally:
        await hbase.aclose()


async def test_a_keytab_removed_mid_run_stops_the_kafka_side_at_its_next_login(
        sso: SsoListener, krb: KerberosPart, short_tickets: Path, kafka_settings: KafkaSettings,
        hbase: HBaseClient, unique: str, tmp_path: Path) -> None:
    part = sso.kerberos
    keytab = tmp_path / "ingest.keytab"
    shutil.copyfile(part.client_keytab, keytab)
    path, settings = sso_profile(tmp_path, unique, gssapi_kafka_lines(sso, keytab))  # HBase: the plain gateways
    topic = settings.routes[0].topic
    await create_topics(kafka_settings, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    await create_tables(hbase, settings, recreate=True)
    env = cli_env(**part.env())
    proc = start_cli("run", "-c", str(path), "--no-metrics", env=env)
    producing = asyncio.ensure_future(_produce_steadily(kafka_settings, [topic], 0, KEYTAB_EVENTS, RATE))
    try:
        error, _ = await _stops_on_the_removed_keytab(proc, keytab, "Kafka GSSAPI", cut=(sso.port,))
        assert (f"the Kerberos login of {part.client_principal} cannot get a new ticket: its keytab '{keytab}' "
                "(sasl_kerberos_keytab) is gone") in error, error
        await producing
    finally:
        if proc.poll() is None:
            proc.kill()
        producing.cancel()
    await _finish_with_the_keytab_back(path, settings, env, keytab, part, kafka_settings, hbase)
