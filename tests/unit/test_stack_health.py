"""A server that died: detected from its pid file, explained from its log's tail."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from devstack import LocalStack
from devstack.health import START_MARKER, death_cause
from devstack.processes import OwnedProcess
from devstack.readiness import parse_region_servers, serving_as
from devstack.settings import StackSettings

_OOM_LOG = """\
2026-11-20T10:00:00,000 INFO  [main] ServerCommandLine: vmInputArguments=[-Xmx1g, -XX:OnOutOfMemoryError=kill -9 %p]
2026-11-20T10:05:00,000 INFO  [MemStoreFlusher.0] MemStoreFlusher: Flush of region x due to global heap pressure
2026-11-20T10:05:01,000 WARN  [RS-EventLoopGroup-1-1] wal.AbstractFSWAL: Slow sync cost: 412 ms
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
\tat org.apache.hadoop.hbase.KeyValue.<init>(KeyValue.java:1)
# java.lang.OutOfMemoryError: Java heap space
# -XX:OnOutOfMemoryError="kill -9 %p"
#   Executing /bin/sh -c "kill -9 4242"...
"""


def test_out_of_memory_is_quoted_not_the_jvm_flag_that_names_it() -> None:
    got = death_cause(_OOM_LOG.splitlines(), limit=2)
    assert got.explained
    assert got.lines == ("java.lang.OutOfMemoryError: Java heap space", "# java.lang.OutOfMemoryError: Java heap space")


def test_abort_beats_a_generic_error_and_frames_are_skipped() -> None:
    log = ["INFO starting", "ERROR [x] zookeeper.ZKWatcher: NoNode for /hbase", "\tat a.b(C.java:1)",
           "ERROR [rs] regionserver.HRegionServer: ***** ABORTING region server localhost,16021,1: YouAreDead *****",
           "INFO stopping"]
    got = death_cause(log)
    assert got.explained and got.lines == (log[3],)


def test_an_error_long_before_the_end_is_not_the_reason() -> None:
    log = ["ERROR [x] zookeeper.ZKWatcher: NoNode for /hbase", *[f"INFO line {i}" for i in range(20)]]
    got = death_cause(log, limit=2)
    assert not got.explained and got.lines == ("INFO line 18", "INFO line 19")
    assert death_cause([*log, "Exception in thread main java.lang.IllegalStateException: boom"]).explained


def test_only_the_last_run_of_the_log_counts() -> None:
    earlier = _OOM_LOG.splitlines()
    log = [*earlier, f"{START_MARKER}regionserver-1 at 2026-11-20T11:00:00+0000 ====", "INFO serving", "INFO quiet"]
    got = death_cause(log)
    assert not got.explained and got.lines == ("INFO serving", "INFO quiet")
    assert death_cause(["Caused by: java.net.BindException: Address already in use"]).explained


def test_a_killed_server_is_reported_died_with_its_log(tmp_path: Path) -> None:
    """A pid file whose process is gone (SIGKILL) is a death; `stop` (the only remover of pid files)
    is not."""
    stack = LocalStack(StackSettings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache"))
    kafka: OwnedProcess = stack.kafka
    pid = kafka.start([sys.executable, "-c",
                       "import time; print('java.lang.OutOfMemoryError: Java heap space', flush=True); "
                       "time.sleep(60)"])
    assert stack.status().processes[0].state == "running"
    deadline = time.monotonic() + 20
    while "OutOfMemoryError" not in kafka.log_file.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    st = stack.status()
    info = st.processes[0]
    assert (info.state, info.pid) == ("died", None) and not st.running
    assert info.died is not None and info.died.pid == pid
    text = info.died.describe()
    assert f"kafka (pid {pid}) died; its log: {kafka.log_file}" in text
    assert "java.lang.OutOfMemoryError: Java heap space" in text
    assert st.processes[1].state == "stopped" and st.processes[1].died is None
    assert kafka.stop() is False and stack.status().processes[0].state == "stopped"


def test_a_zombie_child_counts_as_died(tmp_path: Path) -> None:
    """A server started by this very process and killed stays a zombie until collected: still dead."""
    proc = OwnedProcess("z", tmp_path / "z.pid", tmp_path / "z.log")
    pid = proc.start([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):
        if proc.pid() is None:
            break
        time.sleep(0.05)
    assert proc.pid() is None
    dead = proc.died()
    assert dead is not None and not dead.diagnosis.explained and "killed by a signal" in dead.describe()


def test_region_servers_are_read_from_zookeepers_dump_and_their_logs() -> None:
    dump = ("SessionTracker dump:\nSession Sets (3)/(2):\nephemeral nodes dump:\nSessions with Ephemerals (2):\n"
            "0x1000008d5c20001:\n\t/hbase/rs/localhost,16120,1795483221134\n"
            "0x1000008d5c20002:\n\t/hbase/master\n\t/hbase/rs/localhost,16121,1795483220497\n")
    assert parse_region_servers(dump) == {(16120, 1795483221134), (16121, 1795483220497)}
    log = ["INFO [regionserver/localhost:16120] regionserver.HRegionServer: Serving as localhost,16120,1, RpcServer",
           "INFO [regionserver/localhost:16120] regionserver.HRegionServer: Serving as localhost,16120,2, RpcServer"]
    assert serving_as(log) == (16120, 2) and serving_as(["INFO nothing"]) is None



def test_non_fatal_is_not_an_abort_but_a_master_abort_in_any_case_is() -> None:
    got = death_cause(["WARN [main] x: a non-fatal condition, going on", "INFO quiet"])
    assert not got.explained
    assert death_cause(["ERROR [main] HMaster: MASTER SERVER ABORT: loaded coprocessors are: []"]).explained
