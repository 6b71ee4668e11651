"""A local cluster (2 region servers, 2 gateways, each its own JVM) in its own state folder and on its
own ports, next to the shared one-JVM stack: round trips on every gateway, status of every process,
a region server killed with SIGKILL reported dead with its log, and brought back by `up`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest

from connectors.hbase.thrift2 import load_idl, open_client
from devstack import LocalStack
from devstack.readiness import hbase_round_trip
from devstack.settings import StackSettings

from .fault_support import own_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# clear of the shared stack (Kafka 9092/9093, ZooKeeper 2181, 16000, 16020, Thrift 9090/9091)
PORTS = {"kafka_port": 9192, "kafka_controller_port": 9193, "zookeeper_port": 2281, "master_port": 16100,
         "regionserver_port": 16120, "thrift_port": 9190, "thrift2_port": 9191}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster")
    path = root / "cluster.toml"
    lines = [f'state_dir = "{root / "state"}"', "region_servers = 2", "gateways = 2",
             *(f"{k} = {v}" for k, v in PORTS.items())]
    path.write_text("[stack]\n" + "\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def cluster(config: Path) -> Iterator[LocalStack]:
    settings = StackSettings.model_validate({"state_dir": config.parent / "state", "region_servers": 2,
                                             "gateways": 2, **PORTS})
    yield from own_stack(settings)


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", "stack", *args, "-c", str(config)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "250"},
                          check=False)


def test_every_process_runs_on_its_own_ports(cluster: LocalStack) -> None:
    st = cluster.status()
    assert st.mode == "cluster" and st.running
    assert [p.name for p in st.processes] == ["kafka", "zookeeper", "master", "regionserver-1", "regionserver-2",
                                              "gateway-1", "gateway-2"]
    pids = {p.pid for p in st.processes}
    assert None not in pids and len(pids) == 7
    for p in st.processes:
        assert p.state == "running" and p.rss_mb and p.rss_mb > 30 and p.log.is_file()
    assert [(g.thrift_port, g.thrift2_port) for g in cluster.gateways] == [(9190, 9191), (9200, 9201)]
    assert (cluster.layout.state / "topology.json").is_file()


def test_round_trips_on_every_gateway_and_across_them(cluster: LocalStack, config: Path) -> None:
    for gw in cluster.gateways:
        hbase_round_trip(gw.host, gw.thrift_port, gw.thrift2_port, 20.0)
    # a row written through gateway 1's Thrift1 is read back through gateway 2's Thrift2
    g1, g2 = cluster.gateways
    table, row, value = f"cluster_{uuid.uuid4().hex[:8]}", b"r1", uuid.uuid4().bytes
    conn = happybase.Connection(g1.host, g1.thrift_port, timeout=30_000)
    try:
        conn.create_table(table, {"d": {"max_versions": 1}})
        conn.table(table).put(row, {b"d:q": value})
    finally:
        conn.close()
    idl = load_idl()
    client = open_client(g2.host, g2.thrift2_port, 30_000)
    try:
        got = client.get(table.encode(), idl.TGet(row=row))
    finally:
        client.close()
    assert [(cv.family, cv.qualifier, cv.value) for cv in got.columnValues] == [(b"d", b"q", value)]
    out = _cli(config, "up")
    assert out.returncode == 0 and "already running" in out.stdout, out.stdout + out.stderr


def test_a_thousand_written_regions_kill_no_server(cluster: LocalStack) -> None:
    """1,024 regions over two region servers of 1 GB, each region written: with HBase's default MSLAB
    (a 2 MB chunk per written store) this alone exhausted the heap; the stack's settings keep every
    server alive and every row readable."""
    g1, g2 = cluster.gateways
    idl = load_idl()
    prefix = f"wide_{uuid.uuid4().hex[:6]}"
    splits = [f"{i:02x}".encode() for i in range(1, 256)]
    admin = open_client(g2.host, g2.thrift2_port, 300_000)
    try:
        for n in range(4):
            admin.createTable(idl.TTableDescriptor(
                tableName=idl.TTableName(ns=b"default", qualifier=f"{prefix}_{n}".encode()),
                columns=[idl.TColumnFamilyDescriptor(name=b"d", maxVersions=1)]), splits)
    finally:
        admin.close()
    conn = happybase.Connection(g1.host, g1.thrift_port, timeout=120_000)
    try:
        for n in range(4):
            with conn.table(f"{prefix}_{n}").batch(batch_size=2000) as batch:
                for i in range(256):
                    for r in range(20):
                        batch.put(f"{i:02x}{r:04d}".encode(), {b"d:v": b"x" * 300})
        counts = [sum(1 for _ in conn.table(f"{prefix}_{n}").scan(batch_size=5000)) for n in range(4)]
    finally:
        conn.close()
    assert counts == [256 * 20] * 4
    st = cluster.status()
    assert st.running and st.died == [], [d.describe() for d in st.died]


def test_a_killed_region_server_is_reported_dead_and_up_restarts_it(cluster: LocalStack, config: Path) -> None:
    victim = cluster.procs["regionserver-2"]
    pid = victim.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while victim.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    st = cluster.status()
    info = next(p for p in st.processes if p.name == "regionserver-2")
    assert info.state == "died" and info.died is not None and info.died.pid == pid and not st.running
    assert [p.state for p in st.processes].count("running") == 6

    out = _cli(config, "status")
    text = " ".join(out.stdout.split())
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"regionserver-2 (pid {pid}) died; its log: {victim.log_file}" in text
    assert "not running: a server died" in text

    report = cluster.up()
    assert [d.name for d in report.died] == ["regionserver-2"] and not report.reused
    assert cluster.status().running
    cluster.check_ready(timeout_s=20.0)
