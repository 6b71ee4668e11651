"""The commands' shared console (:mod:`pipeline.cli.console`): in a pipe, a file or a CI log, tables
take their natural width and text lines are never wrapped, so a long path or a list of ports stays
whole on one line, with no "…"; on a terminal, rich's usual folding."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

from devstack import ProcessInfo, StackStatus
from pipeline.cli import top
from pipeline.cli.console import UNFOLDED_WIDTH, output_console, unfolded
from pipeline.cli.stack import print_processes

_LOG = Path("/var/lib/a-rather-long-state-folder/hbase-ingest/stack/logs/some-server-with-a-long-name.out")
_PORTS = {f"listener-with-a-long-name-{i}": 40000 + i for i in range(8)}
_VERSIONS = ", Apicurio Registry 3.0.9, PostgreSQL 15, Debezium 3.6.1.Final, and more names to make it long"


def _status() -> StackStatus:
    procs = [ProcessInfo("kafka", 101, 394.0, _LOG, dict(_PORTS), "running"),
             ProcessInfo("hbase", None, None, _LOG.with_name("hbase.out"), {"thrift1": 9090}, "stopped")]
    return StackStatus(_LOG.parents[1], Path("/var/cache/hbase-ingest/jars"), "4.2.1", "2.6.1-hadoop3", procs,
                       {**_PORTS, "thrift1": 9090})


def _piped(monkeypatch: pytest.MonkeyPatch) -> Console:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    console = output_console()
    console.file = io.StringIO()
    return console


def _text(console: Console) -> str:
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def test_piped_stack_status_keeps_every_value_whole_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    console = _piped(monkeypatch)
    assert unfolded(console)
    print_processes(_status(), _VERSIONS, console)
    text = _text(console)
    lines = text.splitlines()
    assert "…" not in text
    ports = " ".join(f"{k} {v}" for k, v in _PORTS.items())
    kafka = next(line for line in lines if "kafka" in line and "101" in line)
    assert str(_LOG) in kafka and ports in kafka  # the row is one line, its cells whole
    assert sum(1 for line in lines if "listener-with" in line) == 2  # that row and the "ports:" line
    assert any(line.endswith(f"{_VERSIONS}; shape: standalone") and "Kafka 4.2.1" in line for line in lines)
    assert str(_LOG.with_name("hbase.out")) in text
    assert max(len(line) for line in lines) < 1000  # as wide as the content, not the console


def test_force_color_does_not_make_a_pipe_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich would then take the pipe for an 80-column terminal
    assert _piped(monkeypatch).width == UNFOLDED_WIDTH


def test_a_terminal_keeps_folding_and_columns_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert output_console().width == 80
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert not unfolded(output_console())
    narrow = Console(file=io.StringIO(), width=80)  # what a terminal of 80 columns shows
    print_processes(_status(), _VERSIONS, narrow)
    text = _text(narrow)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert str(_LOG) not in text  # folded or shortened, as before


def test_top_shows_start_keys_whole_when_piped() -> None:
    key = "\\x00\\x01" + "host-with-a-long-name" * 3
    metrics = ('# TYPE hbase_ingest_region_window_rows gauge\n'
               f'hbase_ingest_region_window_rows{{table="t",region="r1",start_key="{key}"}} 5.0\n')
    snap = top.parse_snapshot(metrics, at_s=0.0)
    wide = Console(file=io.StringIO(), width=UNFOLDED_WIDTH, soft_wrap=True, color_system=None)
    wide.print(top.render(None, snap, key_width=None))
    assert key in _text(wide) and "…" not in _text(wide)
    term = Console(file=io.StringIO(), width=UNFOLDED_WIDTH, color_system=None)
    term.print(top.render(None, snap))
    assert key not in _text(term) and "…" in _text(term)  # the terminal's cap stays
