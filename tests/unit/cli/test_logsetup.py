"""The CLI's logging set-up: asyncio's warning about a scan worker reaped at shutdown is dropped,
nothing else is."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pipeline.cli.logsetup import quiet_reaped_workers


@pytest.fixture
def asyncio_logger() -> Iterator[logging.Logger]:
    """The asyncio logger without filters (an in-process ``scan --processes`` test may have
    installed the CLI's already), its filters restored afterwards."""
    logger = logging.getLogger("asyncio")
    filters = list(logger.filters)
    logger.filters.clear()
    yield logger
    logger.filters[:] = filters


def test_only_the_reaped_worker_warning_is_dropped(asyncio_logger: logging.Logger,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    def warn() -> None:
        # the watcher's own call (asyncio.unix_events.ThreadedChildWatcher._do_waitpid)
        asyncio_logger.warning("Unknown child process pid %d, will report returncode 255", 4242)
        asyncio_logger.warning("Task was destroyed but it is pending!")
        asyncio_logger.warning("Unknown child process pid %d, will report returncode %d", 4242, 255)

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        warn()
        assert len(caplog.records) == 3  # before: every warning passes
        caplog.clear()
        quiet_reaped_workers()
        quiet_reaped_workers()  # idempotent
        assert asyncio_logger.filters.count(asyncio_logger.filters[-1]) == 1
        warn()
    assert [r.getMessage() for r in caplog.records] == [
        "Task was destroyed but it is pending!",
        "Unknown child process pid 4242, will report returncode 255",  # another format: kept
    ]
