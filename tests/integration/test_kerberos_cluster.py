"""A Kerberized cluster on a Kerberized HDFS (``stack up --region-servers 2 --gateways 3 --hdfs --kerberos``) in
its own state folder and on its own ports: every server, the NameNode and DataNodes too, logs in from its
keytab and the region servers reach the master over SASL/GSSAPI; ZooKeeper takes SASL logins and guards
HBase's znodes, the AccessController refuses a principal without grants;
the three gateways serve SASL with QOP auth-conf, auth-int and auth, each checked on the wire; the worker
writes over SASL through all of them, survives gateway-1 and a region server killed mid-stream, and every row
is compared; ``top`` reads the worker meanwhile, the reads go through the HTTPS + SPNEGO gateways,
and the demo runs over SASL."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from connectors.hbase import HBaseClient, transport
from connectors.hbase.transport import GssapiSasl, open_thrift1
from connectors.kafka import create_topics, end_offsets
from devstack import LocalStack
from devstack.kerberos import REALM, KerberosPart
from devstack.krb_client import gateway_ports, gateway_security, hbase_keys
from devstack.settings import load_stack_settings
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.settings import FamilySpec, GatewaySpec, HBaseSettings, KafkaSettings, Settings, load_settings

from .fault_support import free_port, kill_9, own_stack
from .secure_support import assert_order_rows, cli_env, committed, run_cli, start_cli
from .shown import show
from .worker_support import order_event, order_settings, produce, write_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# clear of the shared stack (9090-9093, its Kerberized HBase's 9690-9695 and KDC 8890) and of the other
# tests' clusters (x90..x93, 2x81, 16x00/16x20 for x = 1..5)
PORTS = {"kafka_port": 9792, "kafka_controller_port": 9793, "zookeeper_port": 2781, "master_port": 16600,
         "regionserver_port": 16620, "thrift_port": 9790, "thrift2_port": 9791, "kdc_port": 8990,
         "kerberos_thrift_port": 9890, "namenode_port": 19200, "datanode_port": 19210}
PARTITIONS = 4
EVENTS = 4000


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("krb-cluster")
    path = root / "cluster.toml"
    lines = [f'state_dir = "{root / "state"}"', "region_servers = 2", "gateways = 3", "kerberos = true", "hdfs = true",
             *(f"{k} = {v}" for k, v in PORTS.items())]
    path.write_text("[stack]\n" + "\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def cluster(config: Path) -> Iterator[LocalStack]:
    yield from own_stack(load_stack_settings(config))


@pytest.fixture
def part(cluster: LocalStack, monkeypatch: pytest.MonkeyPatch) -> KerberosPart:
    k = cluster.kerberos
    assert k is not None and cluster.kerberized_cluster
    monkeypatch.setenv("KRB5_CONFIG", str(k.krb5_conf))
    return k


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join("{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in item.items()) + " }"
                               for item in value) + "]"
    return str(value) if isinstance(value, int) else f'"{value}"'


def _profile(tmp_path: Path, settings: Settings, part: KerberosPart, kind: str, name: str) -> Path:
    """The worker's profile on the cluster's Kafka and its ``kind`` (``sasl`` or ``https``) gateways, all of them."""
    text = write_config(tmp_path / f"base-{name}", settings).read_text()
    text = text.replace("[kafka]\n", f'[kafka]\nbootstrap_servers = "127.0.0.1:{PORTS["kafka_port"]}"\n', 1)
    keys = hbase_keys(part, kind)  # type: ignore[arg-type]
    hbase = "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items())
    path = tmp_path / name
    path.write_text(f"{text}\n[hbase]\n{hbase}")
    return path


def _env(part: KerberosPart) -> dict[str, str]:
    return cli_env(KRB5_CONFIG=str(part.krb5_conf))


def test_every_server_logs_in_from_its_keytab_and_calls_the_master_over_kerberos(cluster: LocalStack,
                                                                                  config: Path) -> None:
    st = cluster.status()
    assert [p.name for p in st.processes] == ["kafka", "kdc", "zookeeper", "namenode", "datanode-1", "master",
                                              "regionserver-1", "regionserver-2", "gateway-1", "gateway-2",
                                              "gateway-3"]
    assert all(p.state == "running" for p in st.processes)
    login = f"Login successful for user hbase/localhost@{REALM} using keytab file"
    for name in ("namenode", "datanode-1", "master", "regionserver-1", "regionserver-2", "gateway-1", "gateway-2",
                 "gateway-3"):
        assert login in cluster.procs[name].log_file.read_text(errors="replace"), name
    # each region server reports to the master over SASL, authenticated by Kerberos
    master_log = cluster.procs["master"].log_file.read_text(errors="replace")
    assert f"Auth successful for hbase/localhost@{REALM} (auth:KERBEROS)" in master_log
    assert "service=RegionServerStatusService" in master_log
    namenode_log = cluster.procs["namenode"].log_file.read_text(errors="replace")
    assert f"Auth successful for hbase/localhost@{REALM} (auth:KERBEROS)" in namenode_log  # HBase, an HDFS client
    # HBase's files on the Kerberized HDFS, listed through WebHDFS over HTTPS with SPNEGO (the stack's probe)
    web = cluster.webhdfs
    assert web is not None and web.base.startswith("https://")
    assert any(f.path.startswith("/hbase/WALs/") for f in web.walk("/hbase/WALs")), "no WAL file on HDFS"
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "status", "-c", str(config)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"},
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"Kerberos: realm {REALM}" in out.stdout
    assert "gateway-2 on localhost (bound to 127.0.0.1): plain Thrift1 9800 Thrift2 9801; SASL/GSSAPI auth-int " \
           "Thrift1 9902 Thrift2 9903; HTTPS+SPNEGO Thrift1 9904 Thrift2 9905" in " ".join(out.stdout.split())
    keytab = (cluster.kerberos.keytab("hbase/localhost") if cluster.kerberos else None)
    assert keytab is not None and keytab.read_bytes()[:40].hex() not in out.stdout


def _zookeeper_cli(cluster: LocalStack, *command: str) -> str:
    """ZooKeeper's own command-line client, without SASL (an outsider), running ``command``; its output."""
    argv = ["java", "-Xmx64m", "-Dzookeeper.sasl.client=false", "-cp", f"{cluster.layout.hbase_lib}/*",
            "org.apache.zookeeper.ZooKeeperMain", "-server", f"127.0.0.1:{PORTS['zookeeper_port']}", *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return done.stdout + done.stderr


def test_zookeeper_takes_sasl_logins_and_hbase_s_znodes_are_protected(cluster: LocalStack) -> None:
    # HBase made its znodes with the creator's rights: it logged in to ZooKeeper over SASL as "hbase"
    acl = _zookeeper_cli(cluster, "getAcl", "/hbase/master")  # a znode clients read: read for anyone
    assert "'sasl,'hbase\n: cdrwa" in acl and "'world,'anyone\n: r\n" in acl, acl[-2000:]
    unread = _zookeeper_cli(cluster, "get", "/hbase/running")  # the others: the service user's alone
    assert "Insufficient permission : /hbase/running" in unread, unread[-2000:]
    refused = _zookeeper_cli(cluster, "create", "/hbase/intruder", "x")
    show(f"\n[kerberized cluster] ZooKeeper ACL of /hbase/master: "
                     f"{' '.join(line for line in acl.splitlines() if line.startswith((chr(39), ':')))}; "
                     f"an outsider's create under /hbase: {refused.strip().splitlines()[-1]}; its read of "
                     f"/hbase/running: {unread.strip().splitlines()[-1]}\n")
    assert "Insufficient permission : /hbase/intruder" in refused, refused[-2000:]


def test_a_principal_without_grants_is_refused_on_the_cluster(part: KerberosPart, tmp_path: Path,
                                                             unique: str) -> None:
    settings = order_settings(unique)
    path = _profile(tmp_path, settings, part, "sasl", "stranger.toml")
    text = path.read_text().replace(f'"{part.client_principal}"', f'"{part.stranger_principal}"')
    path.write_text(text.replace(f'"{part.client_keytab}"', f'"{part.stranger_keytab}"'))
    done = run_cli("tables", "create", "-c", str(path), env=_env(part))
    error = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    show(f"\n[kerberized cluster] stranger creates a table: exit {done.returncode}: {error}\n")
    assert done.returncode == 2, (done.stdout + done.stderr)[-3000:]
    assert "stranger" in error and "CREATE" in error, error


async def test_the_native_client_writes_and_reads_at_auth_conf_on_the_cluster(
        part: KerberosPart, unique: str) -> None:
    """HBase's own RPC to the master and the region servers, sealed (auth-conf), as the ingest principal on a
    table of four regions it created through a SASL gateway: every row read back natively."""
    table = f"native_cluster_{unique}"
    keys = {"auth": "kerberos", "kerberos_principal": part.client_principal, "kerberos_keytab": part.client_keytab,
            "gateways": [GatewaySpec(host=part.host, port=part.sasl_thrift1_port, thrift2_port=part.sasl_thrift2_port,
                                     sasl_qop="auth-conf")]}
    origin = Origin(TopicPartition("native-cluster", 0), 0)
    puts = [Mutation(table, b"r%04d" % i, MutationKind.PUT, {b"d:v": b"v%d" % i}, 1_700_000_000_000 + i, origin)
            for i in range(400)]
    native_keys = {**keys, "sasl_qop": "auth-conf", "client": "native",
                   "masters": [f"{part.host}:{PORTS['master_port']}"]}
    async with HBaseClient(HBaseSettings.model_validate({**keys, "sasl_qop": "auth-conf"})) as thrift, \
            HBaseClient(HBaseSettings.model_validate(native_keys)) as native:
        await thrift.create_table(table, {"d": FamilySpec()}, [b"r0100", b"r0200", b"r0300"])
        try:
            await native.write(table, puts)
            got = dict(await native.scan_page(table, limit=1000))
            assert got == {m.row: {b"d:v": m.cells[b"d:v"]} for m in puts}
            servers = {r.server for r in await thrift.regions(table)}
            show(f"\n[kerberized cluster] native auth-conf: {len(puts)} rows written and read back "
                             f"from {len(servers)} region server(s) holding its 4 regions\n")
        finally:
            await thrift.delete_table(table)


def test_each_gateway_speaks_its_qop_on_the_wire(part: KerberosPart, monkeypatch: pytest.MonkeyPatch) -> None:
    """gateway-1 seals every message (auth-conf), gateway-2 signs it (auth-int: the bytes travel in clear with
    a checksum), gateway-3 only authenticates (auth: the bytes as they are); asking a gateway for a QOP it
    does not offer is refused naming both."""
    assert part.qops == ("auth-conf", "auth-int", "auth")
    sent: list[tuple[bytes, bytes]] = []
    real_encode = GssapiSasl.encode

    def spy(self: GssapiSasl, data: bytes) -> tuple[bool, bytes]:
        ok, out = real_encode(self, data)
        sent.append((data, out))
        return ok, out

    monkeypatch.setattr(transport.GssapiSasl, "encode", spy)
    for j, qop in enumerate(part.qops):
        sent.clear()
        conn = open_thrift1(part.host, gateway_ports(part, "sasl", j)[0], 10_000, "buffered", "binary",
                            gateway_security(part, "sasl", gateway=j))
        try:
            conn.client.getTableNames()
        finally:
            conn.close()
        calls = [(data, out) for data, out in sent if b"getTableNames" in data]
        assert calls, qop
        for data, out in calls:
            if qop == "auth":
                assert out == data
            elif qop == "auth-int":
                assert len(out) > len(data) + 4 and data in out  # signed, not encrypted
            else:
                assert len(out) > len(data) + 4 and b"getTableNames" not in out  # sealed
    asking = gateway_security(part, "sasl", gateway=0)  # auth-conf, at gateway-3 (auth only)
    with pytest.raises(Exception, match=r"asks for QOP auth-conf, the server is offering \(auth\)"):
        open_thrift1(part.host, gateway_ports(part, "sasl", 2)[0], 10_000, "buffered", "binary", asking)


async def _busiest_region_server(cluster: LocalStack, profile: Path, settings: Settings) -> str:
    """The region server holding most regions of ``settings``' tables (located as the profile's principal)."""
    locator = HBaseClient(load_settings(profile).hbase)
    try:
        ports: Counter[int] = Counter()
        for table in {r.table for r in settings.routes}:
            ports.update(r.port for r in await locator.regions(table))
    finally:
        await locator.aclose()
    port = ports.most_common(1)[0][0]
    return next(p.name for p in cluster.topology().by_role("regionserver") if p.ports["regionserver"] == port)


async def _wait_committed(plain: KafkaSettings, settings: Settings, topic: str, want: dict[int, int],
                          proc: subprocess.Popen[bytes], limit_s: float = 240) -> dict[int, int | None]:
    deadline = time.monotonic() + limit_s
    while True:
        done = await committed(plain, settings.kafka.group_id, topic, PARTITIONS)
        if all((done.get(p) or 0) >= n for p, n in want.items()) or proc.poll() is not None \
                or time.monotonic() > deadline:
            return done
        await asyncio.sleep(0.5)


async def test_ingest_over_sasl_fails_over_between_kerberized_gateways_and_every_row_arrives(
        cluster: LocalStack, part: KerberosPart, unique: str, tmp_path: Path) -> None:
    plain = KafkaSettings(bootstrap_servers=f"127.0.0.1:{PORTS['kafka_port']}")
    settings = order_settings(unique)
    sasl = _profile(tmp_path, settings, part, "sasl", "sasl.toml")
    https = _profile(tmp_path, settings, part, "https", "https.toml")
    topic = settings.routes[0].topic
    await create_topics(plain, {topic: PARTITIONS, settings.kafka.dead_letter_topic: 1})
    created = run_cli("tables", "create", "-c", str(sasl), env=_env(part))
    assert created.returncode == 0, created.stderr[-3000:]
    described = run_cli("tables", "describe", "-c", str(https), settings.routes[2].table, env=_env(part))
    assert described.returncode == 0, described.stderr[-3000:]
    events = [orjson.dumps(order_event(i)) for i in range(EVENTS)]
    produced = settings.model_copy(update={"kafka": plain.model_copy(update={"group_id": settings.kafka.group_id})})
    await produce(produced, topic, events[:EVENTS // 2])
    port = free_port()
    proc = start_cli("run", "-c", str(sasl), "--metrics", "--metrics-port", str(port), "--log-level", "INFO",
                     env=_env(part))
    try:
        half = await end_offsets(plain, topic)
        done = await _wait_committed(plain, settings, topic, {p: n // 2 for p, n in half.items()}, proc)
        assert proc.poll() is None, f"the worker exited early: {done}"
        victim = await _busiest_region_server(cluster, sasl, settings)
        kill_9(cluster, "gateway-1")  # its SASL and HTTPS servers with it: the worker goes on through the others
        # and the region server of most regions: the master splits its WALs on the Kerberized HDFS
        kill_9(cluster, victim)
        killed = time.monotonic()
        await produce(produced, topic, events[EVENTS // 2:])
        ends = await end_offsets(plain, topic)
        done = await _wait_committed(plain, settings, topic, ends, proc)
        assert done == ends, f"committed {done}, ends {ends}"
        show(f"\n[kerberized cluster, Kerberized HDFS] gateway-1 and {victim} killed -9 mid-ingest: "
                         f"every offset committed {time.monotonic() - killed:.1f} s after the kills\n")
        top = run_cli("top", "--once", "--interval", "0.5", "--url", f"http://127.0.0.1:{port}/metrics",
                      env=_env(part))
        assert top.returncode == 0, top.stderr[-2000:]
        assert "hbase-ingest top" in top.stdout and "events" in top.stdout.lower(), top.stdout[-2000:]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    log = out.decode(errors="replace")
    assert "gateway_failover" in log or "gateway_down" in log, log[-3000:]
    client = HBaseClient(load_settings(sasl).hbase)  # gateway-1 is down: served by gateway-2 (auth-int) or -3
    try:
        await assert_order_rows(client, settings, EVENTS)
    finally:
        await client.aclose()
    # `up` brings gateway-1 back; its readiness is a call through each of its six Thrift servers
    report = cluster.up()
    assert sorted(d.name for d in report.died) == sorted(["gateway-1", victim])
    scanned = run_cli("scan", "-c", str(https), "--route", "index", "--where", "order_number=ORD00000007",
                      "--format", "jsonl", env=_env(part))
    assert scanned.returncode == 0, scanned.stderr[-3000:]
    assert "s000" in scanned.stdout and "b0007" in scanned.stdout, scanned.stdout[-2000:]


def test_the_demo_writes_and_reads_back_through_the_sasl_gateways(cluster: LocalStack, part: KerberosPart,
                                                                  config: Path, tmp_path: Path) -> None:
    """``demo -c`` with the demo's designs on this cluster, its ``[hbase]`` the SASL gateways: tables made,
    events written and the rows and the fan-out reader's newest events read back, all over Kerberos."""
    for profile in (Path(__file__).resolve().parents[2] / "config").glob("*.toml"):
        shutil.copy(profile, tmp_path)
    demo = (tmp_path / "demo.toml").read_text()
    demo = re.sub(r"^\[hbase\]\n(?:[^\[\n].*\n)*", "", demo, flags=re.M)  # this test's [hbase] replaces it
    assert "[hbase]" not in demo
    demo = demo.replace("[kafka]\n", f'[kafka]\nbootstrap_servers = "127.0.0.1:{PORTS["kafka_port"]}"\n', 1)
    hbase = "".join(f"{k} = {_toml(v)}\n" for k, v in hbase_keys(part, "sasl").items())
    path = tmp_path / "demo-krb.toml"
    path.write_text(f"{demo}\n{config.read_text()}\n[hbase]\n{hbase}")
    done = run_cli("demo", "-c", str(path), "--count", "300", "--partitions", "2", env=_env(part), timeout=600)
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "stack reused" in out and re.search(r"dead-lettered\W+0\b", out), out[-3000:]
    consumed = re.search(r"events consumed\W+(\d+)", out)
    assert consumed is not None and int(consumed.group(1)) > 0, out[-3000:]
    assert "newest 3 events across every host" in out, out[-3000:]
