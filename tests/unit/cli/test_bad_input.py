"""Bad option values are rejected up front: exit status 2 and a message naming the option, no
traceback, nothing sent to Kafka or HBase."""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Any, NoReturn

import orjson
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.analyze import read_events
from pipeline.cli.errors import check_log_level
from pipeline.cli.logsetup import configure_logging
from pipeline.cli.scan import parse_where
from pipeline.core.examples import EXAMPLES
from pipeline.errors import ConfigError
from pipeline.rowkey import compile_rowkey

runner = CliRunner()


def _rejected(args: list[str], *names: str) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert "Traceback" not in res.output
    for name in names:
        assert name in res.stderr, (args, res.stderr)
    return res.stderr


@pytest.fixture
def produced(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    async def produce_events(settings: Any, topic: str, events: Any, **kwargs: Any) -> int:
        calls.append({"topic": topic, **kwargs})
        return len(list(events))

    monkeypatch.setattr("pipeline.cli.run.produce_events", produce_events)
    return calls


@pytest.fixture
def backfills(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The arguments reaching ``run_backfill``; the fake then stops the command with exit 2."""
    calls: list[dict[str, Any]] = []

    async def run_backfill(settings: Any, args: Any, **kwargs: Any) -> NoReturn:
        calls.append({"settings": settings, "args": args, **kwargs})
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("pipeline.cli.backfill.run_backfill", run_backfill)
    return calls


# -- produce -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "names"), [
    (["--partitions", "0"], ["--partitions"]),
    (["--partitions", "-2"], ["--partitions"]),
    (["--rate", "-5"], ["--rate", "more than 0"]),
    (["--rate", "0"], ["--rate", "more than 0"]),
    (["--rate", "nan"], ["--rate"]),
    (["--topic", ""], ["--topic", "''"]),
    (["--topic", "review bad!"], ["--topic", "'review bad!'", "not a valid Kafka topic name"]),
    (["--topic", "."], ["--topic"]),
    (["--topic", ".."], ["--topic"]),
    (["--topic", "x" * 250], ["--topic"]),
])
def test_produce_rejects_bad_values(produced: list[dict[str, Any]], extra: list[str], names: list[str]) -> None:
    _rejected(["produce", "-e", "logs", "-n", "3", *extra], *names)
    assert produced == []


def test_produce_valid_values(produced: list[dict[str, Any]]) -> None:
    res = runner.invoke(app, ["produce", "-e", "logs", "-n", "3", "--topic", "a.B_c-1", "--rate", "0.5",
                              "--partitions", "1"])
    assert res.exit_code == 0, res.output
    assert produced == [{"topic": "a.B_c-1", "partitions": 1, "rate": 0.5}]
    res = runner.invoke(app, ["produce", "-e", "logs", "-n", "3", "--topic", "x" * 249])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["produce", "-e", "logs", "-n", "3"])
    assert res.exit_code == 0, res.output
    assert produced[-1]["topic"] == EXAMPLES["logs"][0] and produced[-1]["rate"] is None


def test_produce_help_does_not_offer_rate_zero() -> None:
    res = runner.invoke(app, ["produce", "--help"], env={"COLUMNS": "200"})
    assert "more than 0" in res.stdout


# -- run ---------------------------------------------------------------------------------------


def test_run_rejects_an_empty_group_and_unknown_log_levels(profile: Path) -> None:
    _rejected(["run", "-c", str(profile), "--group", ""], "--group must not be empty")
    err = _rejected(["run", "-c", str(profile), "--log-level", "LOUD"], "--log-level", "'LOUD'")
    assert "DEBUG, INFO, WARNING, ERROR, CRITICAL" in err


def test_run_accepts_a_log_level_in_any_case(profile: Path, log_levels: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_worker(*args: Any, **kwargs: Any) -> NoReturn:
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("pipeline.cli.run.run_worker", run_worker)
    _rejected(["run", "-c", str(profile), "--log-level", "debug"], "stopped by the test")
    assert log_levels == ["DEBUG"]


def test_log_levels() -> None:
    assert check_log_level("warning") == "WARNING"
    with pytest.raises(ConfigError, match="LOUD"):
        check_log_level("LOUD")
    with pytest.raises(ValueError, match="LOUD"):
        configure_logging("LOUD")


# -- backfill ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "names"), [
    (["--from-time", ""], ["--from-time must not be empty"]),
    (["--to-time", " "], ["--to-time must not be empty"]),
    (["--from-offset", ""], ["--from-offset must not be empty"]),
    (["--to-offset", ""], ["--to-offset must not be empty"]),
    (["--from-offset", "x"], ["--from-offset", "'x'"]),
    (["--from-time", "yesterday"], ["--from-time", "'yesterday'"]),
    (["--group", ""], ["--group must not be empty"]),
    (["--metrics", "--metrics-port", "-1"], ["--metrics-port"]),
    (["--metrics", "--metrics-port", "65536"], ["--metrics-port"]),
    (["--log-level", "LOUD"], ["--log-level", "DEBUG, INFO"]),
    (["--rate", "0"], ["--rate"]),
    (["--rate", "inf"], ["--rate", "more than 0"]),
    (["--from-time", "2024-01-01", "--from-offset", "0:1"], ["start time or start offsets"]),
])
def test_backfill_rejects_bad_values(profile: Path, backfills: list[dict[str, Any]], extra: list[str],
                                     names: list[str]) -> None:
    _rejected(["backfill", "-c", str(profile), "-t", "cli-logs", *extra], *names)
    assert backfills == []


def test_backfill_rejects_bad_topics_and_state_dirs(profile: Path, tmp_path: Path,
                                                    backfills: list[dict[str, Any]]) -> None:
    _rejected(["backfill", "-c", str(profile), "-t", "bad topic!"], "--topic", "'bad topic!'")
    _rejected(["backfill", "-c", str(profile), "-t", ""], "--topic")
    a_file = tmp_path / "state"
    a_file.write_text("")
    _rejected(["backfill", "-c", str(profile), "-t", "cli-logs", "--state-dir", str(a_file)],
              "--state-dir", "is not a directory")
    assert backfills == []


def test_backfill_passes_valid_values_on(profile: Path, tmp_path: Path, backfills: list[dict[str, Any]]) -> None:
    _rejected(["backfill", "-c", str(profile), "-t", "cli-logs", "--from-time", "1000", "--to-offset", "0:5",
               "--metrics-port", "0", "--state-dir", str(tmp_path / "new")], "stopped by the test")
    (call,) = backfills
    assert call["args"].from_time_ms == 1000 and dict(call["args"].to_offsets) == {0: 5}
    assert call["settings"].metrics.port == 0 and call["state_dir"] == tmp_path / "new"


def test_demo_rejects_zero_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("devstack.LocalStack", None)  # never reached
    _rejected(["demo", "--partitions", "0"], "--partitions")
    _rejected(["demo", "--count", "0"], "--count")


# -- keys, tables ------------------------------------------------------------------------------


def test_samples_that_are_directories(tmp_path: Path) -> None:
    _rejected(["keys", "analyze", "-r", "[a]", "-s", str(tmp_path)], "--sample", "is a directory")
    _rejected(["tables", "create", "--sample", str(tmp_path)], "--sample", "is a directory")
    with pytest.raises(ConfigError, match="is a directory"):
        list(read_events(tmp_path))


def test_analyze_checks_the_plot_path_before_the_analysis(tmp_path: Path) -> None:
    sample = tmp_path / "events.jsonl"
    sample.write_text('{"host": "a", "ts": 1}\n{"host": "b", "ts": 2}\n')
    args = ["keys", "analyze", "-r", "[host][long(ts)]", "-s", str(sample)]
    res = runner.invoke(app, [*args, "--plot", str(tmp_path / "missing" / "x.png")])
    assert res.exit_code == 2 and "--plot" in res.stderr and "does not exist" in res.stderr
    assert res.stdout == ""  # nothing printed before the error
    _rejected([*args, "--plot", str(tmp_path)], "--plot", "is a directory")
    _rejected([*args, "--time-field", ""], "--time-field must not be empty")
    _rejected([*args, "--table", ""], "--table must not be empty")


def test_decode_names_the_option_that_is_not_hex() -> None:
    err = _rejected(["keys", "decode", "-r", "[a]", "--hex", "-k", "zz"], "--key 'zz' is not hex")
    assert "fromhex" not in err


def test_tables_reject_empty_names() -> None:
    _rejected(["tables", "create", "--route", ""], "--route must not be empty")
    _rejected(["tables", "describe", ""], "must not be empty")
    _rejected(["tables", "describe", "bad name!"], "NAME 'bad name!': an HBase table name may only contain")


# -- scan --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bounds", "text"), [
    (["--from", "2025-11-23T00:00:00Z", "--to", "2025-11-22T00:00:00Z"], "is not before --to"),
    (["--from", "100", "--to", "100"], "the range [--from, --to) is empty"),
    (["--from", "99999999999999999999999"], "--from 99999999999999999999999 is out of range"),
])
def test_scan_rejects_empty_and_out_of_range_time_ranges(profile: Path, bounds: list[str], text: str) -> None:
    _rejected(["scan", "--config", str(profile), "--route", "cli_logs", *bounds, "--explain"], text)


def test_keys_plan_rejects_reversed_time_ranges() -> None:
    _rejected(["keys", "plan", "-r", "[host][long(ts)]", "--where", '{"host": "a"}', "--from", "100",
               "--to", "50"], "--from 100 is not before --to 50")


def test_scan_rejects_a_field_given_twice(profile: Path) -> None:
    _rejected(["scan", "--config", str(profile), "--route", "cli_logs", "--where", "hostname=a",
               "--where", "hostname=b", "--explain"], "'hostname' is given twice")
    rowkey = compile_rowkey("[a][b]")
    with pytest.raises(ConfigError, match="'a' is given twice"):
        parse_where(["a=1", "b=2", "a=1"], rowkey)
    assert parse_where(["a=1", "b=2"], rowkey) == {"a": "1", "b": "2"}


# -- top ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "text"), [
    ("not a url", "contains whitespace"),
    ("http://127.0.0.1:99999/m", "the port '99999' is not a port number"),
    ("http://127.0.0.1:0/m", "the port '0'"),
    ("http://h:abc/m", "the port 'abc'"),
    ("", "--url must not be empty"),
    ("http:///metrics", "has no host"),
    ("ftp://h/metrics", "not an http(s) URL"),
])
def test_top_rejects_bad_urls(url: str, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def scrape(url: str, timeout_s: float = 5.0) -> NoReturn:
        raise AssertionError("a bad URL is not scraped")

    monkeypatch.setattr("pipeline.cli.top.scrape", scrape)
    _rejected(["top", "--once", "--interval", "0.1", "--url", url], "--url", text)


def test_top_reports_scrape_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(url: str, timeout_s: float = 5.0) -> NoReturn:
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    monkeypatch.setattr("pipeline.cli.top.scrape", refused)
    _rejected(["top", "--once", "--url", "127.0.0.1:9"], "--url: cannot scrape http://127.0.0.1:9/metrics")
    monkeypatch.setattr("pipeline.cli.top.scrape", lambda url, timeout_s=5.0: "<html>not metrics</html>\n")
    _rejected(["top", "--once", "--url", "127.0.0.1:9"], "does not serve Prometheus metrics")


def test_produce_writes_a_sample_file_instead_of_kafka(tmp_path: Path) -> None:
    out = tmp_path / "logs.jsonl"
    res = runner.invoke(app, ["produce", "--example", "logs", "-n", "5", "--out", str(out)])
    assert res.exit_code == 0, res.output
    events = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(events) == 5 and all("hostname" in e for e in events)
    _rejected(["produce", "--example", "logs", "--out", str(tmp_path / "no" / "x.jsonl")], "does not exist")
    _rejected(["produce", "--example", "logs", "--out", str(tmp_path)], "is a directory")


def test_backfill_route_re_drives_the_dead_letter_topic_only(profile: Path, backfills: list[dict[str, Any]]) -> None:
    from pipeline.settings import load_settings

    dead = load_settings(profile).kafka.dead_letter_topic
    _rejected(["backfill", "-c", str(profile), "-t", "cli-logs", "--route", "cli_logs"],
              "--route re-drives dead letters", f"'{dead}'")
    _rejected(["backfill", "-c", str(profile), "-t", dead, "--route", "nope"], "no route named 'nope'")
    assert backfills == []
    _rejected(["backfill", "-c", str(profile), "-t", dead, "--route", "cli_logs"], "stopped by the test")
    (call,) = backfills
    (route,) = call["settings"].routes
    assert route.topic == dead and call["settings"].topic(dead).redrive_of == "cli-logs"
    assert call["group"].endswith(".cli_logs")
