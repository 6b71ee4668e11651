"""How the CLI reports bad input: one line ``error: ...`` on stderr and exit status 2, no traceback.

Reported are the project's errors (:class:`~pipeline.errors.HBaseIngestError`) and OS errors that
name a path (a state dir that is a file, a sample that is a directory), raised directly or from
inside a task group (``anyio`` wraps them in an exception group: when every error in the group is
one of these, the first one is reported). Anything else is a bug and keeps its traceback.

The ``check_*`` helpers validate option values up front and raise
:class:`~pipeline.errors.ConfigError` with a message that starts with the option's name.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from pipeline.errors import ConfigError, HBaseIngestError
from pipeline.names import topic_name_problem
from pipeline.rowkey.codecs import JAVA_LONG_MAX, JAVA_LONG_MIN

__all__ = [
    "LOG_LEVELS",
    "check_devstack",
    "check_log_level",
    "check_not_empty",
    "check_rate",
    "check_state_dir",
    "check_time_range",
    "check_topic",
    "error_leaves",
    "error_message",
    "reported_errors",
    "user_error",
]

#: ``--log-level`` values (case-insensitive).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def error_leaves(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` itself, or every error inside it when it is an exception group (depth first)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from error_leaves(inner)
    else:
        yield exc


def _reportable(exc: BaseException) -> bool:
    if isinstance(exc, HBaseIngestError):
        return True
    return isinstance(exc, OSError) and exc.filename is not None


def user_error(exc: BaseException) -> BaseException | None:
    """The error to report for ``exc`` (itself or the first error of a group whose errors are all
    reportable), or None when ``exc`` is not bad input but a bug."""
    leaves = list(error_leaves(exc))
    if leaves and all(_reportable(e) for e in leaves):
        return leaves[0]
    return None


def error_message(exc: BaseException) -> str:
    """The one-line text of a reported error (an OS error names its path first)."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn reportable errors (see the module) into ``error: ...`` on stderr and exit status 2."""
    try:
        yield
    except Exception as exc:  # exception groups of errors are Exceptions too
        found = user_error(exc)
        if found is None:
            raise
        typer.secho(f"error: {error_message(found)}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None


def check_not_empty(value: str | None, option: str) -> str | None:
    """``value`` unless it is an explicitly given empty (or blank) string."""
    if value is not None and not value.strip():
        raise ConfigError(f"{option} must not be empty")
    return value


def check_rate(value: float | None, option: str = "--rate") -> float | None:
    """``value`` unless it is not a finite number more than 0 (no limit is spelled by leaving the
    option out)."""
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{option} {value}: give a number of events per second more than 0 (leave {option} "
                          "out for no limit)")
    return value


def check_topic(value: str | None, option: str = "--topic") -> str | None:
    """``value`` unless it breaks Kafka's rule for topic names (:func:`pipeline.names.topic_name_problem`)."""
    if value is None:
        return None
    problem = topic_name_problem(value)
    if problem is not None:
        raise ConfigError(f"{option} {value!r} is not a valid Kafka topic name: {problem}")
    return value


def check_state_dir(value: Path | None, option: str = "--state-dir") -> Path | None:
    """``value`` unless it exists and is not a directory (a missing one is created when used)."""
    if value is not None and value.exists() and not value.is_dir():
        raise ConfigError(f"{option} {str(value)!r} exists and is not a directory")
    return value


def check_log_level(value: str, option: str = "--log-level") -> str:
    """The upper-cased level name; anything but :data:`LOG_LEVELS` is an error naming them."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"{option} {value!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return level


def check_time_range(start: int, stop: int, options: tuple[str, str] = ("--from", "--to")) -> tuple[int, int]:
    """``(start, stop)``, a half-open range of epoch milliseconds, unless a bound does not fit 64 bits
    or the range is empty (``start`` not before ``stop``: reversed bounds would match nothing)."""
    for value, option in zip((start, stop), options, strict=True):
        if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:  # what a long (or a reverse timestamp) holds
            raise ConfigError(f"{option} {value} is out of range: epoch milliseconds fit in 64 bits")
    if start >= stop:
        raise ConfigError(f"{options[0]} {start} is not before {options[1]} {stop}: the range "
                          f"[{options[0]}, {options[1]}) is empty (the end is exclusive)")
    return start, stop


def check_devstack(what: str) -> None:
    """Raise :class:`ConfigError` unless the local stack's package (``devstack``) can be imported:
    ``what`` (a command) starts or reads the local stack, a test bed the worker itself never needs."""
    if importlib.util.find_spec("devstack") is None:
        raise ConfigError(f"{what} needs the local test stack (the devstack package), which comes with a source "
                          "checkout of hbase-ingest and with its wheel; it is not installed here")
