"""Starting and stopping the server JVMs the stack owns.

A pid file holds ``<pid> <start time in clock ticks>`` (field 22 of ``/proc/<pid>/stat``), so a
recycled pid that now belongs to another program is never mistaken for ours and never signalled.
Only :meth:`OwnedProcess.stop` removes a pid file: a pid file whose process is gone means the server
died (:meth:`OwnedProcess.died`). A server that forks a process per connection and helper (PostgreSQL)
is owned with ``forks=True``: its memory is that of the whole family (:meth:`OwnedProcess.rss_mb`).
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

from .health import START_MARKER, DiedProcess, death_cause


class ServerExited(StackError):
    """A server of the stack has exited while the stack waited for it: nothing starts it again meanwhile,
    so waiting longer cannot help (:func:`.readiness.wait_until` raises it at once)."""

__all__ = ["OwnedProcess", "ServerExited", "port_in_use", "tail", "tail_lines"]


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces; fields after the closing paren are fixed
    fields = stat.rsplit(")", 1)[1].split()
    # a zombie (state Z) has exited: only its parent has not collected it yet
    return None if fields[0] in ("Z", "X") else fields[19]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def tail_lines(path: Path, max_bytes: int = 256 * 1024) -> list[str]:
    """The lines of the last ``max_bytes`` of ``path`` (the first, likely cut, line dropped); [] if unreadable."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    lines = data.decode(errors="replace").splitlines()
    return lines[1:] if size > max_bytes else lines


def tail(path: Path, lines: int = 30) -> str:
    got = tail_lines(path)
    return "\n".join(got[-lines:]) if got or path.exists() else "(no log)"


class OwnedProcess:
    """A server process started by the stack, identified by its pid file."""

    def __init__(self, name: str, pid_file: Path, log_file: Path, stop_signal: int = signal.SIGTERM,
                 forks: bool = False) -> None:
        """``stop_signal``: what :meth:`stop` sends first; ``forks``: the server's children are part of it."""
        self.name = name
        self.pid_file = pid_file
        self.log_file = log_file
        self.stop_signal = stop_signal
        self.forks = forks

    def __repr__(self) -> str:
        return f"OwnedProcess({self.name!r}, pid={self.pid()})"

    def _recorded(self) -> tuple[int, str] | None:
        try:
            pid_s, ticks = self.pid_file.read_text().split()
            return int(pid_s), ticks
        except (OSError, ValueError):
            return None

    def pid(self) -> int | None:
        """The pid if the process we started is still alive, else None."""
        recorded = self._recorded()
        if recorded is None:
            return None
        pid, ticks = recorded
        return pid if _start_ticks(pid) == ticks else None

    def died(self) -> DiedProcess | None:
        """The process this pid file names is gone although nothing stopped it: which pid, its log, and
        the log lines that say why. None while it runs, or when it was never started or was stopped."""
        recorded = self._recorded()
        if recorded is None or _start_ticks(recorded[0]) == recorded[1]:
            return None
        _reap(recorded[0])
        return DiedProcess(self.name, recorded[0], self.log_file, death_cause(tail_lines(self.log_file)))

    def rss_mb(self) -> float | None:
        """Resident memory in MiB (None when not running). With ``forks``: the sum of the proportional set
        sizes (Pss) of the process and its children, which counts memory they share (PostgreSQL's
        shared buffers) once, where a sum of their RSS would count it in every process."""
        pid = self.pid()
        if pid is None:
            return None
        if self.forks:
            return sum(_pss_kb(p) for p in (pid, *_children(pid))) / 1024
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
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            log.write(f"{START_MARKER}{self.name} at {stamp} ====\n".encode())
            log.flush()
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=cwd, start_new_session=True)
        ticks = _start_ticks(proc.pid)
        self.pid_file.write_text(f"{proc.pid} {ticks}\n")
        return proc.pid

    def check_alive(self) -> None:
        """Raise :class:`ServerExited` (a :class:`StackError`) of two lines when the process has exited:
        which server could not start and why (:meth:`.DiedProcess.headline`: the one strongest line of its
        log, cut short), then the log's path. No raw tail of the log: the log is there to read."""
        if self.pid() is None:
            dead = self.died()
            why = dead.headline() if dead else "it is not running"
            raise ServerExited(f"{self.name} could not start: {why}\n  its log: {self.log_file}")

    def stop(self, timeout_s: float = 30.0) -> bool:
        """``stop_signal`` (SIGTERM by default: runs the server's shutdown hooks), then SIGKILL after
        ``timeout_s``. Returns True if a process was stopped."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, self.stop_signal)
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


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return 0
    return 0


def _reap(pid: int) -> None:
    # when the server is our own child (same Python process started it), collect its exit status
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
