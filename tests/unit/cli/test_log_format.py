"""``--log-format json`` (and ``[logging].format``): one JSON object per line on stderr with the
fields the code logs, an exception as one field, the standard library's records in the same format;
text stays the default. The commands pass the option, else the setting, to the logging set-up."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import pytest
import structlog
from typer.testing import CliRunner

from pipeline.cli import app, logsetup
from pipeline.cli.logsetup import check_log_format, configure_logging
from pipeline.errors import ConfigError

runner = CliRunner()


class _Logging:
    """Configures logging as in a fresh process: the root logger's handlers (pytest adds its own
    for each test phase, after fixtures are set up) are set aside at the first call."""

    def __init__(self) -> None:
        self.root = logging.getLogger()
        self.saved: tuple[list[logging.Handler], int] | None = None

    def __call__(self, level: str, fmt: str = "text") -> None:
        if self.saved is None:
            self.saved = (list(self.root.handlers), self.root.level)
            self.root.handlers.clear()
        configure_logging(level, fmt)

    def restore(self) -> None:
        logsetup._format[0] = "text"  # what tell() follows, as in a process that never configured
        for handler in list(logsetup._installed):
            self.root.removeHandler(handler)
        logsetup._installed.clear()
        if self.saved is not None:
            self.root.handlers[:] = self.saved[0]
            self.root.setLevel(self.saved[1])


@pytest.fixture
def configure() -> Iterator[_Logging]:
    """``configure(level, fmt)``; the root logger and structlog's configuration restored afterwards."""
    config = structlog.get_config()
    setup = _Logging()
    try:
        yield setup
    finally:
        setup.restore()
        structlog.configure(**config)


def _lines(err: str) -> list[dict[str, Any]]:
    lines = err.splitlines()
    assert all(line.startswith("{") and line.endswith("}") for line in lines), err
    return [json.loads(line) for line in lines]


def test_json_is_one_object_per_event_with_its_fields(configure: _Logging,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO", "json")
    log = structlog.get_logger("hbase_ingest.worker")
    log.info("batch_written", table="orders", region="r1", rows=200, ratio=0.5, ok=True, missing=None)
    log.debug("not_shown", table="orders")
    log.warning("with\nnewline", note="line one\nline two")
    events = _lines(capsys.readouterr().err)
    assert len(events) == 2
    first = events[0]
    assert list(first)[:4] == ["timestamp", "level", "logger", "event"]
    assert first == {"timestamp": first["timestamp"], "level": "info", "logger": "hbase_ingest.worker",
                     "event": "batch_written", "table": "orders", "region": "r1", "rows": 200, "ratio": 0.5,
                     "ok": True, "missing": None}
    assert datetime.fromisoformat(first["timestamp"]).utcoffset() is not None  # ISO-8601, UTC
    assert events[1]["event"] == "with\nnewline" and events[1]["note"] == "line one\nline two"


def test_what_a_command_tells_is_a_sentence_in_text_and_an_event_in_json(
        configure: _Logging, capsys: pytest.CaptureFixture[str]) -> None:
    long = "x" * 300  # a sentence is never wrapped at the console's width
    configure("INFO", "text")
    assert logsetup.sentences()
    logsetup.tell(f"received SIGTERM: draining [now] {long}", "signal_received", signal="SIGTERM")
    assert capsys.readouterr().err == f"received SIGTERM: draining [now] {long}\n"
    configure("INFO", "json")
    assert not logsetup.sentences()
    logsetup.tell("consumed 5 events", "run_summary", consumed=5, elapsed_s=0.5)
    logsetup.tell("warning: 3 offsets were never delivered", "offsets_never_delivered", warning=True, offsets=3)
    summary, warning = _lines(capsys.readouterr().err)
    assert summary == {"timestamp": summary["timestamp"], "level": "info", "logger": "hbase_ingest.cli",
                       "event": "run_summary", "consumed": 5, "elapsed_s": 0.5}
    assert (warning["level"], warning["event"], warning["offsets"]) == ("warning", "offsets_never_delivered", 3)


def test_json_renders_an_exception_as_one_field(configure: _Logging, capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO", "json")
    log = structlog.get_logger("hbase_ingest.writer")
    secret = "s3cr3t-in-a-local"  # a frame's local variable: never rendered
    try:
        try:
            raise KeyError("region")
        except KeyError as exc:
            raise RuntimeError(f"write failed {len(secret)}") from exc
    except RuntimeError:
        log.exception("write_failed", table="orders")
    out = capsys.readouterr().err
    (event,) = _lines(out)
    assert event["level"] == "error" and event["event"] == "write_failed" and event["table"] == "orders"
    chain = event["exception"]
    assert [e["exc_type"] for e in chain] == ["RuntimeError", "KeyError"]
    assert chain[0]["exc_value"] == "write failed 17"
    assert chain[0]["frames"] and all(set(f) <= {"filename", "lineno", "name"} for f in chain[0]["frames"])
    assert secret not in out and "Traceback" not in out


def test_json_covers_the_standard_library_loggers(configure: _Logging,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    configure("DEBUG", "json")
    logging.getLogger("aiokafka.consumer").info("below WARNING: dropped")
    logging.getLogger("aiokafka.consumer").warning("heartbeat failed for group %s", "g1")
    try:
        raise OSError("connection reset")
    except OSError:
        logging.getLogger("asyncio").error("task failed", exc_info=True)
    events = _lines(capsys.readouterr().err)
    assert [(e["level"], e["logger"], e["event"]) for e in events] == [
        ("warning", "aiokafka.consumer", "heartbeat failed for group g1"),
        ("error", "asyncio", "task failed"),
    ]
    assert events[1]["exception"][0]["exc_type"] == "OSError"


def test_configuring_again_replaces_the_handler(configure: _Logging, capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO", "json")
    configure("INFO", "json")
    logging.getLogger("kafka").warning("once")
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert len(logging.getLogger().handlers) == 1


def test_text_stays_the_default(configure: _Logging, capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO")
    structlog.get_logger("hbase_ingest.worker").info("batch_written", rows=3)
    logging.getLogger("aiokafka").warning("plain")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("timestamp=") and "level='info' event='batch_written' rows=3" in err[0]
    assert err[1] == "WARNING aiokafka: plain"


def test_bad_formats_are_named() -> None:
    assert check_log_format(None) is None
    assert check_log_format("JSON") == "json"
    with pytest.raises(ConfigError, match="--log-format must be one of text, json, not 'xml'"):
        check_log_format("xml")
    with pytest.raises(ValueError, match="xml"):
        configure_logging("INFO", "xml")


# -- the commands pass it on ----------------------------------------------------------------------


@pytest.fixture
def formats(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(level, format) of each logging set-up; the worker and the backfill stop with exit 2 instead
    of running."""
    calls: list[tuple[str, str]] = []

    def record(level: str, fmt: str = "text") -> None:
        calls.append((level, fmt))

    async def stop(*args: Any, **kwargs: Any) -> NoReturn:
        raise ConfigError("stopped by the test")

    for module in ("pipeline.cli.run", "pipeline.cli.backfill"):
        monkeypatch.setattr(f"{module}.configure_logging", record)
    monkeypatch.setattr("pipeline.cli.run.run_worker", stop)
    monkeypatch.setattr("pipeline.cli.backfill.run_backfill", stop)
    return calls


def _stopped(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "stopped by the test" in res.stderr, (res.output, res.exception)


@pytest.mark.parametrize("command", [["run"], ["backfill", "-t", "cli-logs"]])
def test_option_then_setting_then_text(command: list[str], profile: Path, tmp_path: Path,
                                       formats: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    _stopped([*command, "-c", str(profile)])
    _stopped([*command, "-c", str(profile), "--log-format", "JSON"])
    json_profile = tmp_path / "json.toml"
    json_profile.write_text('[logging]\nformat = "json"\n' + profile.read_text())
    _stopped([*command, "-c", str(json_profile)])
    _stopped([*command, "-c", str(json_profile), "--log-format", "text"])
    monkeypatch.setenv("HBASE_INGEST_LOGGING__FORMAT", "json")
    _stopped([*command, "-c", str(profile)])
    assert [fmt for _, fmt in formats] == ["text", "json", "json", "text", "json"]


@pytest.mark.parametrize("command", [["run"], ["backfill", "-t", "cli-logs"]])
def test_bad_format_option_and_setting(command: list[str], profile: Path, tmp_path: Path,
                                       formats: list[tuple[str, str]]) -> None:
    res = runner.invoke(app, [*command, "-c", str(profile), "--log-format", "xml"])
    assert res.exit_code == 2 and "--log-format must be one of text, json, not 'xml'" in res.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[logging]\nformat = "xml"\n' + profile.read_text())
    res = runner.invoke(app, [*command, "-c", str(bad)])
    assert res.exit_code == 2 and "logging.format" in res.stderr, res.stderr
    assert formats == []
