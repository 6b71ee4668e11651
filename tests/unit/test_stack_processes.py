"""Process ownership: `down` signals only the processes the stack started."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from devstack.layout import StackLayout, infra_dir
from devstack.processes import OwnedProcess, ServerExited, port_in_use
from devstack.provision import render_configs
from devstack.readiness import wait_until
from pipeline.errors import StackError


def test_start_and_stop_owned_process(tmp_path: Path) -> None:
    proc = OwnedProcess("sleeper", tmp_path / "s.pid", tmp_path / "s.log")
    pid = proc.start([sys.executable, "-c", "import time; print('hi', flush=True); time.sleep(60)"])
    assert proc.pid() == pid
    assert proc.stop(timeout_s=5)
    assert proc.pid() is None
    assert not (tmp_path / "s.pid").exists()


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        # a pid file naming a live process with a different start time must not be trusted
        (tmp_path / "x.pid").write_text(f"{other.pid} 1\n")
        proc = OwnedProcess("x", tmp_path / "x.pid", tmp_path / "x.log")
        assert proc.pid() is None
        assert proc.stop(timeout_s=1) is False
        assert other.poll() is None  # still running: never signalled
    finally:
        other.kill()
        other.wait()


def test_dead_process_reports_its_log(tmp_path: Path) -> None:
    proc = OwnedProcess("crasher", tmp_path / "c.pid", tmp_path / "c.log")
    p = proc.start([sys.executable, "-c", "print('boom: bad config'); raise SystemExit(3)"])
    import os
    os.waitpid(p, 0)
    with pytest.raises(StackError) as caught:
        proc.check_alive()
    # two lines: which server could not start and the line of its log that says why, then the log
    assert str(caught.value) == ("crasher could not start: its log ends without an error (killed by a signal, or by "
                                 "the kernel's OOM killer?); its last line: boom: bad config\n"
                                 f"  its log: {tmp_path / 'c.log'}")


def test_a_server_that_aborts_at_start_is_one_line_and_its_log(tmp_path: Path) -> None:
    noise = "\n".join(f"INFO [main] regionserver.HRegionServer: step {i}" for i in range(60))
    abort = ("ERROR [regionserver/localhost:16421] regionserver.HRegionServer: ***** ABORTING region server "
             "localhost,16421,1: org.apache.hadoop.hbase.YouAreDeadException: Server REPORT rejected; currently "
             "processing localhost,16421,1 as dead server " + "x" * 400)
    after = "INFO [regionserver/localhost:16421] regionserver.HRegionServer: aborting server localhost,16421,1"
    script = (f"print({noise!r}); print({abort!r}); print('\\tat org.apache.hadoop.hbase.X.y(X.java:1)'); "
              f"print({after!r})")
    proc = OwnedProcess("regionserver-2", tmp_path / "rs.pid", tmp_path / "rs.log")
    import os
    os.waitpid(proc.start([sys.executable, "-c", script]), 0)
    with pytest.raises(StackError) as caught:
        proc.check_alive()
    first, second = str(caught.value).splitlines()
    assert first.startswith("regionserver-2 could not start: its log says: ERROR [regionserver/localhost:16421] ")
    assert "ABORTING region server" in first and "YouAreDeadException" in first
    assert first.endswith("...") and len(first) < 260
    assert second == f"  its log: {tmp_path / 'rs.log'}"


def test_port_in_use_detects_listener() -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_in_use(s.getsockname()[1])


def test_render_configs_fills_every_placeholder(tmp_path: Path) -> None:
    from devstack.hdfs import hbase_fs_values

    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    render_configs(layout, {"KAFKA_PORT": "19092", "KAFKA_CONTROLLER_PORT": "19093", "KAFKA_DISTANT_PORT": "19097",
                            "KAFKA_DISTANT_PROXY_PORT": "19098", "ZK_PORT": "12181",
                            "MASTER_PORT": "16000", "REGIONSERVER_PORT": "16020", "CLIENT_RETRIES": "5",
                            "CLIENT_OPERATION_TIMEOUT_MS": "30000", "SESSION_TIMEOUT_MS": "30000",
                            "DISTRIBUTED": "false", **hbase_fs_values(layout.state, None)})
    server = (layout.conf / "server.properties").read_text()
    site = (layout.conf / "hbase" / "hbase-site.xml").read_text()
    assert "PLAINTEXT://127.0.0.1:19092" in server and f"log.dirs={tmp_path}/state/kafka/data" in server
    # the DISTANT listener listens on its port and is advertised at the latency proxy's, one above
    assert ",DISTANT://127.0.0.1:19097\n" in server and "advertised.listeners=PLAINTEXT://127.0.0.1:19092," \
        "DISTANT://127.0.0.1:19098\n" in server
    assert "<value>12181</value>" in site and "${" not in site and "${" not in server


def test_missing_java_or_maven_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from devstack.provision import ensure_tools

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StackError, match="`java` was not found on PATH: install a JDK 17"):
        ensure_tools()
    (tmp_path / "java").write_text("#!/bin/sh\n")
    (tmp_path / "java").chmod(0o755)
    with pytest.raises(StackError, match="`mvn` was not found on PATH: install Maven"):
        ensure_tools()


def test_port_taken_by_a_stranger_is_named(tmp_path: Path) -> None:
    import socket

    from devstack import LocalStack
    from devstack.settings import StackSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        stack = LocalStack(StackSettings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache",
                                         kafka_port=port, kafka_controller_port=port + 1 if port < 65535 else 1,
                                         zookeeper_port=2, master_port=3, regionserver_port=4, thrift_port=5,
                                         thrift2_port=6))
        with pytest.raises(StackError, match=rf"port {port} \(kafka\) is already in use") as info:
            stack._check_ports()
        assert "HBASE_INGEST_STACK__KAFKA_PORT or kafka_port in [stack]" in str(info.value)


def test_unreachable_maven_central_is_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from devstack import provision
    from devstack.layout import StackLayout, infra_dir

    class Done:
        returncode = 1
        stdout = ""
        stderr = "[ERROR] Could not transfer artifact junit:junit:pom:4.13.2: Unknown host repo.maven.apache.org"

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: Done())  # the module provision calls
    monkeypatch.setattr(provision, "ensure_tools", lambda: None)
    with pytest.raises(StackError, match="Maven Central is unreachable"):
        provision.ensure_classpaths(StackLayout(tmp_path / "c", tmp_path / "s", infra_dir()))


def test_up_and_down_wait_for_each_other(tmp_path: Path) -> None:
    """A `down` started while another process holds the stack's lock (an `up` or `down` still
    running) waits for it, and a wait past the timeout names the lock."""
    import threading
    import time

    from devstack import LocalStack
    from devstack.settings import StackSettings

    stack = LocalStack(StackSettings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache"))
    (tmp_path / "state").mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, sys, time; fh = open(sys.argv[1], 'a+'); fcntl.flock(fh, fcntl.LOCK_EX); "
         "print('held', flush=True); time.sleep(float(sys.argv[2]))",
         str(stack.layout.lock_file), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StackError, match=r"has held .*\.state\.lock"), stack.exclusive(lock_timeout_s=0.3):
            pass
        done: list[float] = []
        t0 = time.monotonic()
        def stop() -> None:
            stack.down(wipe=True)
            done.append(time.monotonic() - t0)

        waiter = threading.Thread(target=stop)
        waiter.start()
        time.sleep(0.5)
        assert not done and (tmp_path / "state").exists()  # still waiting for the holder
        waiter.join(timeout=10)
        assert done and done[0] >= 1.0 and not (tmp_path / "state").exists()
    finally:
        holder.kill()
        holder.wait()


def test_waiting_stops_at_once_when_the_server_waited_on_has_exited(tmp_path: Path) -> None:
    proc = OwnedProcess("kafka", tmp_path / "k.pid", tmp_path / "k.log")
    import os
    os.waitpid(proc.start([sys.executable, "-c", "raise SystemExit(1)"]), 0)
    calls = []

    def probe() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("not listening yet")  # retried until the deadline
        proc.check_alive()

    with pytest.raises(ServerExited, match=r"^kafka could not start: "):
        wait_until(probe, time.monotonic() + 60, pause_s=0.01)
    assert len(calls) == 3  # not retried once it had exited (60 s of retries would be thousands of calls)
