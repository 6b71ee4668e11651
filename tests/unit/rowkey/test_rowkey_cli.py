"""``hbase-ingest keys``: the typer sub-app."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pipeline.cli.keys import keys_app

runner = CliRunner()
SPEC = "[salt(user_id, 16)][user_id][_][long(ts)]"


def test_build_prints_shell_escaped_key_and_hex() -> None:
    res = runner.invoke(
        keys_app, ["build", "--rowkey", "[a][_][long(ts)]", "--event", '{"a": "abc", "ts": 1}']
    )
    assert res.exit_code == 0
    assert res.stdout.strip() == "abc_\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01"
    res = runner.invoke(
        keys_app, ["build", "-r", "[a][_][long(ts)]", "-e", '{"a": "a", "ts": 1}', "--hex"]
    )
    assert res.stdout.strip() == "615f0000000000000001"


def test_explain_prints_layout() -> None:
    res = runner.invoke(keys_app, ["explain", "--rowkey", SPEC])
    assert res.exit_code == 0 and "salt(user_id, 16)" in res.stdout and "queries:" in res.stdout


def test_decode_round_trip() -> None:
    res = runner.invoke(
        keys_app,
        [
            "decode",
            "-r",
            "[a][_][long(ts)]",
            "--key",
            "abc_\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x07",
        ],
    )
    assert res.exit_code == 0 and json.loads(res.stdout) == {"a": "abc", "ts": 7}
    res = runner.invoke(
        keys_app, ["decode", "-r", "[a][_][long(ts)]", "--hex", "--key", "615f0000000000000007"]
    )
    assert json.loads(res.stdout) == {"a": "a", "ts": 7}


def test_plan_and_splits() -> None:
    res = runner.invoke(keys_app, ["plan", "-r", SPEC, "--from", "0", "--to", "10"])
    assert res.exit_code == 0 and res.stdout.startswith("ranges=16 fans_out=True exact=False")
    res = runner.invoke(keys_app, ["splits", "-r", SPEC, "-n", "4", "--hex"])
    assert res.stdout.split() == ["04", "08", "0c"]


def test_errors_exit_2_without_traceback() -> None:
    cases = [
        ["build", "-r", "[a", "-e", "{}"],
        ["build", "-r", "[long(ts)]", "-e", '{"ts": "x"}'],
        ["build", "-r", "[a]", "-e", "not json"],
        ["build", "-r", "[a]", "-e", "[1]"],
        ["decode", "-r", "[a][b]", "-k", "ab"],
        ["plan", "-r", "[a][b]", "-w", '{"a": "x"}'],
        ["splits", "-r", "[a]", "-n", "3"],
    ]
    for args in cases:
        res = runner.invoke(keys_app, args)
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output and "error:" in res.stderr
    res = runner.invoke(keys_app, ["build", "-r", "[a", "-e", "{}"])
    assert "^" in res.stderr and "position 2" in res.stderr
