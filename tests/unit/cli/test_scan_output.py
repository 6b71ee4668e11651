"""``scan --format table`` output: one line per row when piped, folded to the terminal's width
otherwise."""

from __future__ import annotations

import io
import sys
from decimal import Decimal

import orjson
import pytest
from rich.console import Console

from pipeline.cli import scan as scan_cli
from pipeline.runtime.read.reader import ReadRow

_LONG = "x" * 150


def _rows() -> list[ReadRow]:
    return [ReadRow(b"\x01host1", {"host": "host1"}, {"d:msg": _LONG, "d:n": 7}, "salt=1"),
            ReadRow(b"\x02host2", {"host": "host2"}, {"d:n": 8}, "salt=2")]


def _render(console: Console) -> list[str]:
    scan_cli.print_rows(console, _rows(), ["host"])
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue().splitlines()


def test_a_piped_table_keeps_each_row_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    console = scan_cli.output_console()
    assert console.width > 1000
    console.file = io.StringIO()
    lines = _render(console)
    body = [line for line in lines if "host1" in line or "host2" in line]
    assert len(body) == 2  # no row folded onto a second line
    assert _LONG in body[0] and "salt=1" in body[0]
    assert body[1].split("│")[3].strip() == ""  # host2 has no d:msg: an empty cell
    assert max(len(line) for line in lines) < 300  # as wide as the content, not the console


def test_columns_or_a_terminal_keep_the_folding_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert scan_cli.output_console().width == 80
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert scan_cli.output_console().width < 1000
    narrow = Console(file=io.StringIO(), width=80)
    lines = _render(narrow)
    assert max(len(line) for line in lines) <= 80
    assert sum(1 for line in lines if "x" * 10 in line) > 1  # the long cell folded


def test_a_decimal_column_shows_its_exact_number() -> None:
    row = ReadRow(b"k", {}, {"d:amount": Decimal("12.50"), "d:big": Decimal("1E+3")}, "all")
    assert orjson.loads(scan_cli._jsonl(row))["columns"] == {"d:amount": 12.5, "d:big": 1000}
    assert b'"d:amount":12.50,' in scan_cli._jsonl(row)  # a JSON number, its scale kept
    console = Console(file=io.StringIO(), width=200)
    scan_cli.print_rows(console, [row], [])
    out = console.file
    assert isinstance(out, io.StringIO)
    assert "12.50" in out.getvalue() and "1000" in out.getvalue()
