"""Process ownership: `down` signals only the processes the stack started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from connectors.stack.processes import OwnedProcess, port_in_use
from connectors.stack.provision import render_configs
from connectors.stack.layout import StackLayout, infra_dir
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
    with pytest.raises(StackError, match="boom: bad config"):
        proc.check_alive()


def test_port_in_use_detects_listener() -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_in_use(s.getsockname()[1])


def test_render_configs_fills_every_placeholder(tmp_path: Path) -> None:
    layout = StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir())
    render_configs(layout, {"KAFKA_PORT": "19092", "KAFKA_CONTROLLER_PORT": "19093", "ZK_PORT": "12181",
                            "MASTER_PORT": "16000", "REGIONSERVER_PORT": "16020", "CLIENT_RETRIES": "5",
                            "CLIENT_OPERATION_TIMEOUT_MS": "30000"})
    server = (layout.conf / "server.properties").read_text()
    site = (layout.conf / "hbase" / "hbase-site.xml").read_text()
    assert "PLAINTEXT://127.0.0.1:19092" in server and f"log.dirs={tmp_path}/state/kafka/data" in server
    assert "<value>12181</value>" in site and "${" not in site and "${" not in server
