"""Help texts are plain text: square brackets (rowkey specs, TOML sections) are shown, not taken
for markup."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.keys import keys_app

runner = CliRunner()


def _help(args: list[str]) -> str:
    res = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    return " ".join(res.stdout.split())  # undo line wrapping


@pytest.mark.parametrize(("args", "shown"), [
    (["keys", "build"], "'[salt(id, 16)][id]'"),
    (["keys", "analyze"], "'[salt(host, 8)][long(ts)][host]'"),
    (["tables", "create"], "TOML profile with [[tables]] and [[routes]]."),
    (["tables", "create"], "the [[tables]] entry's regions"),
    (["produce"], "for [kafka] settings"),
    (["run"], "(default: [kafka].group_id)"),
    (["scan"], "field=value on a key field"),
    (["backfill"], "[metrics].enabled"),
])
def test_brackets_in_help_are_shown(args: list[str], shown: str) -> None:
    assert shown in _help(args)


def test_sub_app_help_keeps_brackets_on_its_own() -> None:
    res = runner.invoke(keys_app, ["explain", "--help"], env={"COLUMNS": "100"})
    assert "'[salt(id, 16)][id]'" in " ".join(res.stdout.split())


def test_log_level_help_lists_the_levels() -> None:
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in _help(["run"])
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in _help(["backfill"])
