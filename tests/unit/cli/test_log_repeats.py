"""aiokafka's records that repeat what the worker reports itself (a missing topic, a broker that does
not answer) or that aiokafka retries by itself (a group coordinator not available yet) are kept out
of the default output, and shown as DEBUG records at the DEBUG level; aiokafka's other records, and a
coordinator error that is not retried, stay as they are."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from aiokafka.errors import GroupAuthorizationFailedError, GroupCoordinatorNotAvailableError

from pipeline.cli import logsetup
from pipeline.cli.logsetup import KAFKA_REPEATS, configure_logging

#: what aiokafka logs, as it logs it (0.14: aiokafka/cluster.py, client.py, consumer/group_coordinator.py)
_REPEATS = [
    ("aiokafka.cluster", logging.ERROR, "Topic %s not found in cluster metadata", ("orders",)),
    ("aiokafka", logging.ERROR, 'Unable connect to "%s:%s": %s', ("127.0.0.1", 1, "Connect call failed")),
    ("aiokafka", logging.ERROR, "Unable connect to node with id %s: %s", (1, "Connect call failed")),
    ("aiokafka.consumer.group_coordinator", logging.ERROR, "Group Coordinator Request failed: %s",
     (GroupCoordinatorNotAvailableError(),)),
]
_KEPT = [
    ("aiokafka.consumer.group_coordinator", logging.ERROR, "Group Coordinator Request failed: %s",
     (GroupAuthorizationFailedError("g"),)),  # not retried: aiokafka raises it, the line stays
    ("aiokafka.consumer.group_coordinator", logging.ERROR, "Heartbeat failed: %r", ("x",)),
    ("aiokafka", logging.WARNING, "Unable to request metadata from node with id %s: %r", (1, "x")),
]


class _Configure:
    """configure_logging as in a fresh process: the root logger's handlers (pytest adds its own for
    each test phase, after fixtures are set up) are set aside at the first call."""

    def __init__(self) -> None:
        self.root = logging.getLogger()
        self.saved: tuple[list[logging.Handler], int] | None = None

    def __call__(self, level: str, fmt: str = "text") -> None:
        if self.saved is None:
            self.saved = (list(self.root.handlers), self.root.level)
            self.root.handlers.clear()
        configure_logging(level, fmt)

    def restore(self) -> None:
        for handler in list(logsetup._installed):
            self.root.removeHandler(handler)
        logsetup._installed.clear()
        logsetup._format[0] = "text"
        if self.saved is not None:
            self.root.handlers[:] = self.saved[0]
            self.root.setLevel(self.saved[1])
        for name in {logger for logger, _ in KAFKA_REPEATS}:
            logging.getLogger(name).removeFilter(logsetup._kafka_repeats)


@pytest.fixture
def configure() -> Iterator[_Configure]:
    """``configure(level, fmt)``; the root logger, structlog's configuration and the aiokafka
    loggers' filters restored afterwards."""
    config = structlog.get_config()
    setup = _Configure()
    try:
        yield setup
    finally:
        setup.restore()
        structlog.configure(**config)


def _log_all() -> None:
    for name, level, msg, args in _REPEATS + _KEPT:
        logging.getLogger(name).log(level, msg, *args)


def test_the_repeats_are_kept_out_of_the_default_output(configure: _Configure,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO")
    _log_all()
    assert capsys.readouterr().err.splitlines() == [
        "ERROR aiokafka.consumer.group_coordinator: Group Coordinator Request failed: "
        "[Error 30] GroupAuthorizationFailedError: g",
        "ERROR aiokafka.consumer.group_coordinator: Heartbeat failed: 'x'",
        "WARNING aiokafka: Unable to request metadata from node with id 1: 'x'",
    ]


def test_at_debug_the_repeats_show_as_debug_records(configure: _Configure,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    configure("INFO")
    configure("DEBUG")  # configured again: the filter follows the last level
    _log_all()
    assert capsys.readouterr().err.splitlines()[:4] == [
        "DEBUG aiokafka.cluster: Topic orders not found in cluster metadata",
        'DEBUG aiokafka: Unable connect to "127.0.0.1:1": Connect call failed',
        "DEBUG aiokafka: Unable connect to node with id 1: Connect call failed",
        "DEBUG aiokafka.consumer.group_coordinator: Group Coordinator Request failed: "
        "[Error 15] GroupCoordinatorNotAvailableError",
    ]
    configure("WARNING", "json")
    _log_all()
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(events) == len(_KEPT) and not any("Unable connect" in e["event"] for e in events)
    configure("DEBUG", "json")
    _log_all()
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [e["level"] for e in events] == ["debug"] * len(_REPEATS) + ["error", "error", "warning"]


def test_a_command_without_logging_set_up_keeps_the_repeats_out() -> None:
    """``stack up`` configures no logging: the probes' retries reach no handler (nor the last resort)."""
    seen: list[logging.LogRecord] = []

    class _Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)
    handler, root = _Count(), logging.getLogger()
    root.addHandler(handler)  # every record reaches the root once (propagation)
    try:
        logsetup.quiet_kafka_repeats()
        for name, level, msg, args in _REPEATS + _KEPT:
            logging.getLogger(name).log(level, msg, *args)
    finally:
        root.removeHandler(handler)
    assert [(r.name, r.msg) for r in seen] == [(name, msg) for name, _, msg, _ in _KEPT]
