"""structlog configuration, done once at the CLI edge: log events on stderr, as ``key=value`` lines
(``text``, the default; a console layout on a terminal) or as one JSON object per line (``json``, for
log shippers).

A JSON line holds ``timestamp`` (ISO-8601, UTC), ``level``, ``logger`` (the name given to
``structlog.get_logger``), ``event`` and the event's own key-value fields; an exception is one
``exception`` field (a list of its chained exceptions with their frames, never the frames' local
variables), so no event spans lines. Records of the standard library's loggers (aiokafka, asyncio)
go to the same stream in the same format, at WARNING and above; but those of aiokafka's that repeat
what the project reports itself, or that aiokafka retries by itself (:data:`KAFKA_REPEATS`), are
shown only at the DEBUG level, as DEBUG records.

What the long-running commands tell their operator (a signal received, the closing summary, a
warning about the input) goes through :func:`tell`: a sentence on stderr in the text format, a log
event with the same figures as fields in the json format, so that every line on stderr is one JSON
object there.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import structlog
from rich.console import Console
from structlog.typing import EventDict, Processor, WrappedLogger

from pipeline.errors import ConfigError

__all__ = ["KAFKA_REPEATS", "LOG_FORMATS", "LOG_FORMAT_HELP", "STDERR", "check_log_format", "configure_logging",
           "quiet_kafka_repeats", "quiet_reaped_workers", "sentences", "tell"]

#: ``--log-format`` values (and ``[logging].format``).
LOG_FORMATS = ("text", "json")
LOG_FORMAT_HELP = ("text (key=value lines) or json (one object per line, for log shippers); "
                   "default: [logging].format, text")

_TEXT_STDLIB_FORMAT = "%(levelname)s %(name)s: %(message)s"
_FIRST_KEYS = ("timestamp", "level", "logger", "event")

#: the standard library handler this module installed last, replaced by the next configuration
_installed: list[logging.Handler] = []
#: the format of the last configuration (what :func:`tell` follows)
_format: list[str] = ["text"]

#: the console the commands write their sentences (and the backfill its progress bar) to
STDERR = Console(stderr=True)


def sentences() -> bool:
    """Whether the last configuration is the text format (:func:`tell` writes sentences, and a
    progress bar may be drawn), not the json format."""
    return _format[0] != "json"


def tell(text: str, event: str, *, warning: bool = False, **fields: Any) -> None:
    """Tell the operator something: ``text`` on stderr in the text format; in the json format the
    log event ``event`` with ``fields`` (at WARNING when ``warning``, else INFO) instead."""
    if not sentences():
        log = structlog.get_logger("hbase_ingest.cli")
        (log.warning if warning else log.info)(event, **fields)
    else:
        STDERR.print(text, markup=False, highlight=False, soft_wrap=True)


def check_log_format(fmt: str | None) -> str | None:
    """``fmt`` in lower case when it is one of :data:`LOG_FORMATS` (None stays None: not given);
    anything else is a :class:`~pipeline.errors.ConfigError` naming ``--log-format``."""
    if fmt is None:
        return None
    if fmt.lower() not in LOG_FORMATS:
        raise ConfigError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    return fmt.lower()


class _NamedPrintLogger(structlog.PrintLogger):
    """A :class:`structlog.PrintLogger` that keeps the name it was created with."""

    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name


class _NamedPrintLoggerFactory:
    """``structlog.get_logger("hbase_ingest.worker")`` gets a printer to ``file`` named after it."""

    def __init__(self, file: TextIO) -> None:
        self.file = file

    def __call__(self, *args: Any) -> _NamedPrintLogger:
        return _NamedPrintLogger(self.file, str(args[0]) if args else "hbase_ingest")


def _add_logger_name(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    # a foreign (standard library) record names its own logger; structlog's carry the factory's name
    record = event_dict.get("_record")
    name = record.name if record is not None else getattr(logger, "name", None)
    if name:
        event_dict.setdefault("logger", name)
    return event_dict


def _first_keys_first(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    head = {k: event_dict.pop(k) for k in _FIRST_KEYS if k in event_dict}
    return {**head, **event_dict}


def _json_chain() -> tuple[list[Processor], list[Processor]]:
    """(the fields every JSON line gets, the rendering): shared by structlog's events and the
    standard library's records."""
    fields: list[Processor] = [
        structlog.processors.add_log_level,
        _add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    render: list[Processor] = [
        # locals could hold settings with secrets: frames are named, their variables never shown
        structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False, use_rich=False)),
        _first_keys_first,
        structlog.processors.JSONRenderer(),
    ]
    return fields, render


def _install_stdlib_handler(formatter: logging.Formatter, level: int) -> None:
    """Route the standard library's records to stderr through ``formatter``, as
    :func:`logging.basicConfig` would: when the root logger has handlers that this module did not
    install (a test harness, an embedding program), they are kept and nothing is added."""
    root = logging.getLogger()
    while _installed:
        root.removeHandler(_installed.pop())
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(level)
    _installed.append(handler)


#: aiokafka's records (logger name, message template) shown only at DEBUG: a missing topic, a broker
#: that does not answer (aiokafka logs them on every retry; the worker's start-up wait or error names
#: the topic or the address once), and a group coordinator not available yet (a cluster just started:
#: aiokafka looks it up again by itself; shown at WARNING and above when the error is not retriable)
KAFKA_REPEATS: frozenset[tuple[str, str]] = frozenset({
    ("aiokafka.cluster", "Topic %s not found in cluster metadata"),
    ("aiokafka", 'Unable connect to "%s:%s": %s'),
    ("aiokafka", "Unable connect to node with id %s: %s"),
    ("aiokafka.consumer.group_coordinator", "Group Coordinator Request failed: %s"),
})
_RETRIED_BY_AIOKAFKA = frozenset({"Group Coordinator Request failed: %s"})  # repeats only when retriable


class _KafkaRepeatsFilter(logging.Filter):
    """Drops the records of :data:`KAFKA_REPEATS`, or (``show``: the DEBUG level) lowers them to DEBUG."""

    def __init__(self) -> None:
        super().__init__()
        self.show = False

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.name, record.msg) not in KAFKA_REPEATS:
            return True
        if record.msg in _RETRIED_BY_AIOKAFKA and not (
                isinstance(record.args, tuple) and record.args and getattr(record.args[0], "retriable", False)):
            return True
        if not self.show:
            return False
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


_kafka_repeats = _KafkaRepeatsFilter()


def quiet_kafka_repeats() -> None:
    """Keep the records of :data:`KAFKA_REPEATS` out of a command that does not configure logging
    (``stack up``: its readiness probes wait for a broker that is starting)."""
    _quiet_kafka_repeats(show=False)


def _quiet_kafka_repeats(show: bool) -> None:
    """Install :data:`_kafka_repeats` on the loggers of :data:`KAFKA_REPEATS` (a logger's own filters
    see the records it logs itself, whatever handlers are installed); idempotent."""
    _kafka_repeats.show = show
    for name in sorted({logger for logger, _ in KAFKA_REPEATS}):
        logging.getLogger(name).addFilter(_kafka_repeats)  # a filter added twice is kept once


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Configure logging at ``level`` (a level name such as ``INFO``; anything else: ValueError) in
    ``fmt`` (one of :data:`LOG_FORMATS`; anything else: ValueError). Standard library loggers
    log at WARNING and above whatever ``level`` is, but for :data:`KAFKA_REPEATS` (DEBUG only)."""
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")  # noqa: TRY004 (bad user input, reported as such)
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r}; known: {', '.join(LOG_FORMATS)}")
    processors: Sequence[Processor]
    if fmt == "json":
        fields, render = _json_chain()
        processors = [*fields, *render]
        _install_stdlib_handler(structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=fields,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *render]),
            max(lvl, logging.WARNING))
    else:
        processors = [
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty()
            else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"]),
        ]
        _install_stdlib_handler(logging.Formatter(_TEXT_STDLIB_FORMAT), max(lvl, logging.WARNING))
    _quiet_kafka_repeats(lvl <= logging.DEBUG)
    _format[0] = fmt
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=_NamedPrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


#: asyncio's child watcher logs this when the child it waits for was reaped elsewhere
_REAPED = "Unknown child process pid %d, will report returncode 255"


class _ReapedWorkerFilter(logging.Filter):
    """Drops :data:`_REAPED`. When the event loop ends, anyio stops its worker processes (the
    reader's scan workers): it closes a worker's pipes, which ends the worker, then kills it, and
    the kill first polls the process, which may reap it before asyncio's watcher thread does. The
    watcher then logs this warning for a worker that is already gone, after the command's output."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _REAPED


_reaped_filter = _ReapedWorkerFilter()


def quiet_reaped_workers() -> None:
    """Drop asyncio's warning about a worker process reaped at shutdown (idempotent)."""
    logging.getLogger("asyncio").addFilter(_reaped_filter)  # a filter added twice is kept once
