"""The metrics server binds 127.0.0.1 unless told otherwise: by ``--metrics-host`` (run, backfill),
``[metrics].host`` or ``HBASE_INGEST_METRICS__HOST``; ``--metrics-port`` likewise. The address that
reaches the server is the settings' (the server itself binds ``settings.host``: checked against a
real worker in tests/integration/test_ops_kit.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.metrics_address import with_metrics_address
from pipeline.errors import ConfigError
from pipeline.settings import MetricsSettings, Settings, load_settings

runner = CliRunner()


def test_the_default_is_loopback() -> None:
    assert MetricsSettings().host == "127.0.0.1"
    assert load_settings(None).metrics.host == "127.0.0.1"


def test_options_override_the_settings_and_none_keeps_them() -> None:
    settings = load_settings(None, metrics={"host": "10.1.2.3", "port": 9200})
    assert with_metrics_address(settings, None, None) is settings
    assert with_metrics_address(settings, "0.0.0.0", None).metrics.model_dump() == {
        **settings.metrics.model_dump(), "host": "0.0.0.0"}
    assert with_metrics_address(settings, None, 0).metrics.port == 0
    assert with_metrics_address(settings, " ::1 ", 1).metrics.host == "::1"


@pytest.mark.parametrize("host", ["", "  "])
def test_an_empty_host_is_refused(host: str) -> None:
    with pytest.raises(ConfigError, match="--metrics-host must not be empty"):
        with_metrics_address(load_settings(None), host, None)
    with pytest.raises(ConfigError, match=r"metrics\.host"):
        load_settings(None, metrics={"host": host.strip()})


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    """The settings reaching the worker or the backfill, which then stop with exit 2."""
    calls: list[Settings] = []

    async def stop(settings: Settings, *args: Any, **kwargs: Any) -> NoReturn:
        calls.append(settings)
        raise ConfigError("stopped by the test")

    monkeypatch.setattr("pipeline.cli.run.run_worker", stop)
    monkeypatch.setattr("pipeline.cli.backfill.run_backfill", stop)
    return calls


def _invoke(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, (res.output, res.exception)
    return res.stderr


@pytest.mark.parametrize("command", [["run"], ["backfill", "-t", "cli-logs"]])
def test_commands_serve_on_loopback_unless_told(command: list[str], profile: Path, served: list[Settings],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _invoke([*command, "-c", str(profile), "--metrics"])
    _invoke([*command, "-c", str(profile), "--metrics", "--metrics-host", "0.0.0.0", "--metrics-port", "0"])
    monkeypatch.setenv("HBASE_INGEST_METRICS__HOST", "192.0.2.7")
    _invoke([*command, "-c", str(profile), "--metrics"])
    _invoke([*command, "-c", str(profile), "--metrics", "--metrics-host", "127.0.0.2"])
    assert [(s.metrics.host, s.metrics.port) for s in served] == [
        ("127.0.0.1", 9108), ("0.0.0.0", 0), ("192.0.2.7", 9108), ("127.0.0.2", 9108)]


@pytest.mark.parametrize("command", [["run"], ["backfill", "-t", "cli-logs"]])
def test_bad_addresses_are_named(command: list[str], profile: Path, served: list[Settings]) -> None:
    assert "--metrics-host must not be empty" in _invoke([*command, "-c", str(profile), "--metrics-host", ""])
    assert "--metrics-port" in _invoke([*command, "-c", str(profile), "--metrics-port", "70000"])
    assert served == []


def test_help_names_the_default() -> None:
    for command in ("run", "backfill"):
        res = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        text = " ".join(res.stdout.split())
        assert "--metrics-host" in text and "127.0.0.1: this machine only" in text, command
        assert "--log-format" in text, command
