"""Errors raised inside task groups (run, backfill) are reported as one line, exit status 2."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.cli.errors import error_message, user_error
from pipeline.cli.run import start_metrics
from pipeline.errors import ConfigError, HBaseUnavailable, KafkaError, TableNotFound
from pipeline.settings import load_settings

runner = CliRunner()


async def _fail_in_task_group(*errors: BaseException) -> NoReturn:
    """Raise ``errors`` from tasks of a task group, as the worker and the backfill do."""
    async with anyio.create_task_group() as tg:
        for error in errors:

            async def fail(error: BaseException = error) -> None:
                raise error

            tg.start_soon(fail)
        await anyio.sleep_forever()
    raise AssertionError("unreachable")


def _assert_reported(res: Any, text: str) -> None:
    assert res.exit_code == 2, res.output
    assert f"error: {text}" in res.stderr
    assert "Traceback" not in res.output and "ExceptionGroup" not in res.output


def test_user_error_unwraps_groups_of_project_errors() -> None:
    inner = ConfigError("no route reads topic(s) ['x']")
    group = ExceptionGroup("outer", [ExceptionGroup("inner", [inner]), HBaseUnavailable("down")])
    assert user_error(group) is inner
    assert user_error(inner) is inner
    missing = FileExistsError(errno.EEXIST, "File exists", "/some/state")
    assert user_error(ExceptionGroup("g", [missing])) is missing
    assert error_message(missing) == "/some/state: File exists"


def test_user_error_leaves_bugs_alone() -> None:
    assert user_error(ExceptionGroup("g", [ConfigError("a"), RuntimeError("bug")])) is None
    assert user_error(RuntimeError("bug")) is None
    assert user_error(OSError("no path")) is None  # an OS error that names no path may be a bug
    assert user_error(ExceptionGroup("g", [ValueError("bug")])) is None


def test_run_reports_an_error_raised_in_its_task_group(profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_worker(*args: Any, **kwargs: Any) -> NoReturn:
        await _fail_in_task_group(TableNotFound("table 'cli_logs' does not exist", table="cli_logs"))

    monkeypatch.setattr("pipeline.cli.run.run_worker", run_worker)
    _assert_reported(runner.invoke(app, ["run", "-c", str(profile)]), "table 'cli_logs' does not exist")


@pytest.mark.parametrize(("error", "text"), [
    (ConfigError("no route reads topic(s) ['other']"), "no route reads topic(s) ['other']"),
    (KafkaError("topic 'cli-nope' does not exist"), "topic 'cli-nope' does not exist"),
    (ConfigError("topic 'cli-logs' has no partition(s) [7] (it has [0, 1])"),
     "topic 'cli-logs' has no partition(s) [7]"),
    (FileExistsError(errno.EEXIST, "File exists", "/state/dir"), "/state/dir: File exists"),
])
def test_backfill_reports_an_error_raised_in_its_task_group(
        profile: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException, text: str) -> None:
    async def run_backfill(*args: Any, **kwargs: Any) -> NoReturn:
        await _fail_in_task_group(error)

    monkeypatch.setattr("pipeline.cli.backfill.run_backfill", run_backfill)
    res = runner.invoke(app, ["backfill", "-c", str(profile), "-t", "cli-logs", "--no-progress"])
    _assert_reported(res, text)


def test_a_bug_in_a_task_group_keeps_its_traceback(profile: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_backfill(*args: Any, **kwargs: Any) -> NoReturn:
        await _fail_in_task_group(ConfigError("bad"), RuntimeError("a bug"))

    monkeypatch.setattr("pipeline.cli.backfill.run_backfill", run_backfill)
    res = runner.invoke(app, ["backfill", "-c", str(profile), "-t", "cli-logs", "--no-progress"])
    assert res.exit_code == 1 and isinstance(res.exception, BaseExceptionGroup)


def test_a_metrics_port_that_cannot_be_bound_is_a_config_error() -> None:
    settings = load_settings(None)

    async def serve(*args: Any, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        raise OSError(errno.EADDRINUSE, "Address already in use")

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            await start_metrics(tg, serve, settings, worker=None)  # type: ignore[arg-type]

    with pytest.raises(BaseException) as info:  # noqa: PT011 (anyio wraps it; user_error unwraps below)
        anyio.run(go)
    leaf = user_error(info.value)
    assert isinstance(leaf, ConfigError)
    assert f"cannot serve metrics on {settings.metrics.host}:{settings.metrics.port}" in str(leaf)
    assert "Address already in use" in str(leaf)


def test_start_metrics_returns_the_bound_port() -> None:
    async def serve(*args: Any, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started(12345)
        await anyio.sleep_forever()

    async def go() -> int:
        async with anyio.create_task_group() as tg:
            port = await start_metrics(tg, serve, load_settings(None), worker=None)  # type: ignore[arg-type]
            tg.cancel_scope.cancel()
        return port

    assert anyio.run(go) == 12345
