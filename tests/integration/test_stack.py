"""The local stack: idempotent `up`, status, readiness by real round trips."""

from __future__ import annotations

import subprocess
import sys
import time

from devstack import LocalStack


def test_up_is_idempotent_and_fast_when_running(stack: LocalStack) -> None:
    t0 = time.monotonic()
    report = stack.up()
    assert report.reused and "start" not in report.timings_s
    # one round trip per part (about 1.5 s on a quiet machine), where a start takes 25 s or more
    assert time.monotonic() - t0 < 15.0


def test_status_reports_state_folder_and_processes(stack: LocalStack) -> None:
    st = stack.status()
    assert st.running
    assert st.state_dir == stack.layout.state
    for proc in st.processes:
        # every JVM holds more than 50 MB; PostgreSQL (with --cdc) is smaller (its family's Pss, ~25-40 MB), the
        # KDC (with --kerberos) smaller still (~5 MB)
        assert proc.pid is not None and proc.rss_mb and proc.rss_mb > {"postgres": 5, "kdc": 1}.get(proc.name, 50)
        assert proc.log.exists()


def test_cli_up_twice_reuses(stack: LocalStack) -> None:
    out = subprocess.run([sys.executable, "-m", "pipeline", "stack", "up"], capture_output=True, text=True,
                         check=True, timeout=60)
    assert "already running" in out.stdout
    status = subprocess.run([sys.executable, "-m", "pipeline", "stack", "status"], capture_output=True,
                            text=True, check=True, timeout=60)
    assert "ready" in status.stdout and str(stack.layout.state) in status.stdout.replace("\n", "")
