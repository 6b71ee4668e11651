"""``hbase-ingest run`` at start-up, as a subprocess against the real stack:

- ONE SIGTERM stops ``run --wait`` at once, exit status 0 (nothing consumed), while it waits for each
  dependency in turn: HBase, Kafka, the schema registry (each pointed at a closed port, the ones
  checked before it real) and a topic the routes read that does not exist. The time from the signal
  to the exit goes to the terminal, one line per dependency;
- ``run --fail-fast`` on a missing topic exits 2 naming the topic, the cluster and the routes that
  read it, with none of aiokafka's ERROR lines and no unclosed client.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors.hbase import HBaseClient
from connectors.kafka import create_topics, delete_topics
from devstack import LocalStack
from pipeline.runtime.admin.tables import create_tables
from pipeline.settings import HBaseSettings, KafkaSettings, load_settings
from tests.ops_kit import ROOT

_WAIT_S = 60  # for the waiting line: a process start, then one look-up per dependency checked before
_EXIT_S = 10  # for the exit after the signal ("at once": a few tenths of a second here)


@dataclass(frozen=True)
class _Names:
    table: str
    topic: str  # exists
    missing: str  # does not
    dead: str  # the dead-letter topic (exists)
    bootstrap: str
    thrift_port: int
    thrift2_port: int


@pytest.fixture(scope="module")
async def names(stack: LocalStack) -> AsyncIterator[_Names]:
    """One table and two topics (one read, one dead-letter) for every run of this module."""
    unique = f"{int(time.time() * 1000) % 10**9}"
    n = _Names(f"startup_sig_{unique}", f"startup-sig-{unique}", f"startup-sig-missing-{unique}",
               f"startup-sig-dlq-{unique}", stack.bootstrap, stack.settings.thrift_port, stack.settings.thrift2_port)
    kafka = KafkaSettings(bootstrap_servers=n.bootstrap)
    hbase_settings = HBaseSettings(port=n.thrift_port, thrift2_port=n.thrift2_port, timeout_ms=20_000)
    settings = load_settings(None, tables=[{"name": n.table, "families": {"o": {"versions": 1}}}],
                             routes=[{"name": "r1", "topic": n.topic, "table": n.table, "rowkey": "[id]",
                                      "columns": {"o:v": "v"}}])
    await create_topics(kafka, {n.topic: 1, n.dead: 1})
    async with HBaseClient(hbase_settings) as hbase:
        await create_tables(hbase, settings, recreate=True)
        try:
            yield n
        finally:
            with contextlib.suppress(Exception):
                await hbase.delete_table(n.table)
            await delete_topics(kafka, [n.topic, n.dead])


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _profile(path: Path, n: _Names, *, topic: str | None = None, hbase_port: int | None = None,
             kafka_port: int | None = None, registry_port: int | None = None) -> Path:
    """Routes r1 and r2 reading ``topic`` (default: the existing one) into the table; a dependency
    given a port is looked for there (a closed port: unreachable); with ``registry_port`` the topic's
    values are Avro, so the worker checks the registry."""
    read = topic or n.topic
    lines = [f'[kafka]\nbootstrap_servers = "{n.bootstrap if kafka_port is None else f"127.0.0.1:{kafka_port}"}"\n'
             f'group_id = "g-{n.topic}"\ndead_letter_topic = "{n.dead}"\n',
             f"[hbase]\nport = {hbase_port or n.thrift_port}\nthrift2_port = {hbase_port or n.thrift2_port}\n"]
    if registry_port is not None:
        lines.append(f'[registry]\nurl = "http://127.0.0.1:{registry_port}/apis/ccompat/v7"\n'
                     f'[[topics]]\nname = "{read}"\nvalue_format = "avro"\n')
    lines.append(f'[[tables]]\nname = "{n.table}"\nfamilies = {{ o = {{ versions = 1 }} }}\n')
    for name, key in (("r1", "[id]"), ("r2", "[v][id]")):
        lines.append(f'[[routes]]\nname = "{name}"\ntopic = "{read}"\ntable = "{n.table}"\nrowkey = "{key}"\n'
                     'columns = { "o:v" = "v" }\n')
    path.write_text("\n".join(lines))
    return path


class _Worker:
    """``hbase-ingest run`` as a subprocess, its stdout and stderr read line by line."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", *args], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, found: Callable[[str], bool], timeout_s: float) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: any(map(found, self.lines)) or self.proc.poll() is not None,
                                          timeout_s) or not any(map(found, self.lines)):
                self.proc.kill()
                raise AssertionError("the line awaited never came:\n" + "\n".join(self.lines))

    def finish(self, timeout_s: float) -> tuple[int, str]:
        """Wait for the exit (kill it after ``timeout_s``) and the last of the output."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {timeout_s} s later:\n" + "\n".join(self.lines)) from None
        finally:
            self._reader.join(5)
        return code, "\n".join(self.lines)


def _event(line: str) -> dict[str, Any]:
    assert line.startswith("{"), line  # json: every line on stderr is an event
    event: dict[str, Any] = json.loads(line)
    return event


@pytest.mark.parametrize("dependency", ["HBase", "Kafka", "registry", "topic"])
def test_one_sigterm_stops_a_worker_waiting_at_start_up(names: _Names, tmp_path: Path, dependency: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    closed = _closed_port()
    profile = _profile(tmp_path / "p.toml", names, topic=names.missing if dependency == "topic" else None,
                       hbase_port=closed if dependency == "HBase" else None,
                       kafka_port=closed if dependency == "Kafka" else None,
                       registry_port=closed if dependency == "registry" else None)
    awaited = {"HBase": "HBase", "Kafka": f"Kafka at 127.0.0.1:{closed}",
               "registry": f"the schema registry at http://127.0.0.1:{closed}/apis/ccompat/v7",
               "topic": f"topic {names.missing!r} on {names.bootstrap}"}[dependency]

    def waiting(line: str) -> bool:
        return '"waiting_for_dependency"' in line and _event(line)["what"] == awaited

    worker = _Worker("--config", str(profile), "--wait", "--log-format", "json")
    worker.wait_for(waiting, _WAIT_S)
    signalled = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    code, out = worker.finish(_EXIT_S)
    took = time.monotonic() - signalled
    with capsys.disabled():  # the figures, on the terminal of every run
        sys.stdout.write(f"\n[start-up signal] SIGTERM while waiting for {dependency}: exit status {code}, "
                         f"{took:.2f} s after the signal\n")
    assert code == 0, out
    events = [_event(line) for line in out.splitlines()]
    assert [e["signal"] for e in events if e["event"] == "signal_received"] == ["SIGTERM"]
    (summary,) = [e for e in events if e["event"] == "run_summary"]
    assert summary["consumed"] == 0
    assert not [e for e in events if e["level"] == "error"], out


def test_fail_fast_on_a_missing_topic_names_it_and_its_routes_and_nothing_else(names: _Names, tmp_path: Path) -> None:
    worker = _Worker("--config", str(_profile(tmp_path / "p.toml", names, topic=names.missing)), "--fail-fast")
    code, out = worker.finish(60)
    assert code == 2, out
    assert f"error: topic {names.missing!r} does not exist on {names.bootstrap} (routes: r1, r2)" in out.splitlines()
    assert "ERROR aiokafka" not in out and "Unclosed" not in out, out
    assert [line for line in out.splitlines() if line.startswith("error:")] == [
        f"error: topic {names.missing!r} does not exist on {names.bootstrap} (routes: r1, r2)"]
