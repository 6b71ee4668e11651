"""Starting and stopping the server JVMs the stack owns.

A pid file holds ``<pid> <start time in clock ticks>`` (field 22 of ``/proc/<pid>/stat``), so a
recycled pid that now belongs to another program is never mistaken for ours and never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import StackError

__all__ = ["OwnedProcess", "port_in_use", "tail"]


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces; fields after the closing paren are fixed
    return stat.rsplit(")", 1)[1].split()[19]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class OwnedProcess:
    """A server process started by the stack, identified by its pid file."""

    def __init__(self, name: str, pid_file: Path, log_file: Path) -> None:
        self.name = name
        self.pid_file = pid_file
        self.log_file = log_file

    def __repr__(self) -> str:
        return f"OwnedProcess({self.name!r}, pid={self.pid()})"

    def pid(self) -> int | None:
        """The pid if the process we started is still alive, else None."""
        try:
            pid_s, ticks = self.pid_file.read_text().split()
        except (OSError, ValueError):
            return None
        pid = int(pid_s)
        return pid if _start_ticks(pid) == ticks else None

    def rss_mb(self) -> float | None:
        pid = self.pid()
        if pid is None:
            return None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def start(self, argv: Sequence[str], cwd: Path | None = None) -> int:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=cwd, start_new_session=True)
        ticks = _start_ticks(proc.pid)
        self.pid_file.write_text(f"{proc.pid} {ticks}\n")
        return proc.pid

    def check_alive(self) -> None:
        """Raise :class:`StackError` pointing at the log when the process has exited."""
        if self.pid() is None:
            raise StackError(f"{self.name} exited during start-up; see {self.log_file}; last lines:\n"
                             f"{tail(self.log_file)}")

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM (runs the server's shutdown hooks), then SIGKILL after ``timeout_s``.
        Returns True if a process was stopped."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.pid() is not None:
            _reap(pid)
            time.sleep(0.2)
        if self.pid() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            while self.pid() is not None:
                _reap(pid)
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True


def _reap(pid: int) -> None:
    # when the server is our own child (same Python process started it), collect its exit status
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
