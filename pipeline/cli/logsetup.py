"""structlog configuration, done once at the CLI edge: key=value lines on stderr."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging", "quiet_reaped_workers"]


def configure_logging(level: str = "INFO") -> None:
    """Configure logging at ``level`` (a level name such as ``INFO``; anything else: ValueError)."""
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        raise ValueError(f"unknown log level {level!r}")
    logging.basicConfig(level=max(lvl, logging.WARNING), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty()
            else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "event"]),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
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
