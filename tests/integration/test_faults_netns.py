"""The split brain that loopback cannot produce (``stack up --netns --hdfs``): a live region server cut off
from ZooKeeper and the master, both ways, for three times its ZooKeeper session, while the gateway (and
HDFS) still reach it. Its session expires, the master declares it dead and recovers the lease of its WAL
files before splitting them, and the zombie, still serving the gateway, must abort on its next WAL write
(HDFS fencing) instead of acknowledging edits the split has not read: every write the gateway acknowledged
is there afterwards. Root only (network namespaces); about two minutes."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import happybase
import pytest

from devstack import LocalStack
from devstack.netns import Link
from devstack.settings import StackSettings

from .fault_support import busiest_region_server, network_faults, own_stack, up_until_ok
from .shown import show

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                 reason="needs root and `ip netns` for the cluster's network namespaces"),
              pytest.mark.timeout(600)]

#: host-side ports (Kafka) clear of the other test clusters; the servers' own ports are in their namespaces
PORTS = {"kafka_port": 19292, "kafka_controller_port": 19293, "kafka_distant_port": 19297}
SESSION_TIMEOUT_MS = 6000
TABLE = "netns_split_brain"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from own_stack(StackSettings.model_validate({
        "state_dir": tmp_path_factory.mktemp("faults-netns") / "state", "region_servers": 2, "gateways": 1,
        "hdfs": True, "netns": True, "netns_prefix": "hifn", "netns_subnet": "10.213.5.0/24",
        "session_timeout_ms": SESSION_TIMEOUT_MS, "regionserver_heap_mb": 512, "master_heap_mb": 256,
        "gateway_heap_mb": 256, **PORTS}))


def _connect(stack: LocalStack) -> happybase.Connection:
    gw = stack.gateways[0]
    return happybase.Connection(gw.host, gw.thrift_port, timeout=60_000)


def _log(stack: LocalStack, name: str) -> str:
    return Path(stack.procs[name].log_file).read_text(errors="replace")


def _first(log: str, *words: str) -> float | None:
    """The wall-clock time of the first line of ``log`` holding every one of ``words`` (log4j's ISO8601)."""
    for line in log.splitlines():
        if all(w in line for w in words) and (m := re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3})", line)):
            return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S,%f").timestamp()
    return None


def test_a_region_server_cut_off_from_zookeeper_and_the_master_is_fenced(cluster: LocalStack) -> None:
    conn = _connect(cluster)
    conn.create_table(TABLE, {"f": {}})
    conn.close()
    victim, _ = busiest_region_server(cluster, [TABLE])
    pid = cluster.procs[victim].pid()
    acked: list[bytes] = []
    acked_at: list[float] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            key = b"r%06d" % i
            try:
                c = _connect(cluster)
                c.table(TABLE).put(key, {b"f:a": key})
                c.close()
                acked.append(key)
                acked_at.append(time.time())
            except Exception:  # the zombie refusing, the regions moving: not acknowledged
                pass
            i += 1
            time.sleep(0.2)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        time.sleep(2)
        links = [Link(victim, "zookeeper"), Link(victim, "master")]
        cut_at = time.time()
        with network_faults(cluster).partitioned(links, seconds=60):
            time.sleep(3 * SESSION_TIMEOUT_MS / 1000)
    finally:
        time.sleep(5)
        stop.set()
        writer.join(90)
    master, zombie = _log(cluster, "master"), _log(cluster, victim)
    assert "processing expiration" in master, "the master never declared the cut-off region server dead"
    assert "ABORTING region server" in zombie, "the zombie never aborted"
    assert cluster.procs[victim].pid() != pid
    up_until_ok(cluster)  # the zombie started again
    conn = _connect(cluster)
    present = {k for k, _ in conn.table(TABLE).scan()}
    conn.close()
    missing = [k for k in acked if k not in present]
    assert acked and not missing, f"{len(missing)} of {len(acked)} acknowledged writes lost, e.g. {missing[:3]}"
    # when writes stopped and resumed: the longest pause between two acknowledged writes
    gaps = [(b - a, a, b) for a, b in itertools.pairwise(acked_at)]
    _, paused, resumed = max(gaps) if gaps else (0.0, cut_at, cut_at)
    marks = {"session expired (master)": _first(master, "processing expiration"),
             "crash procedure done": _first(master, "Finished", "ServerCrashProcedure"),
             "zombie aborted": _first(zombie, "ABORTING region server")}
    at = ", ".join(f"{k} +{v - cut_at:.1f} s" if v is not None else f"{k} not logged" for k, v in marks.items())
    done = marks["crash procedure done"]
    show(f"[netns split brain] {victim} cut from zookeeper and master for {3 * SESSION_TIMEOUT_MS / 1000:.0f} s "
         f"(session {SESSION_TIMEOUT_MS / 1000:.0f} s): {at}; writes paused +{paused - cut_at:.1f} s, resumed "
         f"+{resumed - cut_at:.1f} s" + (f" ({resumed - done:+.1f} s after the crash procedure)" if done else "")
         + f"; {len(acked)} acknowledged rows checked, {len(missing)} lost")
