"""Argument checks of the reader's Python API: a wrong type or value fails at the call, with a
message naming the argument, instead of deep inside a running query (or not at all).

Contract: every function returns nothing and raises ``TypeError`` (wrong type; ``bool`` is never
taken for an integer) or ``ValueError`` (wrong value). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.rowkey.codecs import JAVA_LONG_MAX, JAVA_LONG_MIN
from pipeline.settings import RouteSpec

__all__ = ["MAX_PROCESSES", "check_query", "check_reader"]

#: Upper bound of ``Reader(processes=...)``: each worker is a Python process with its own connection.
MAX_PROCESSES = 64


def _int(name: str, value: Any, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {bound}, got {value}")


def _seconds(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds or None, got {type(value).__name__} {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be more than 0 seconds (None: no timeout), got {value}")


def check_reader(*, page_size: Any, first_page: Any, read_ahead: Any, concurrency: Any, timeout_s: Any,
                 processes: Any) -> None:
    """The arguments of ``Reader(...)``."""
    if page_size is not None:
        _int("page_size", page_size, 1)
    _int("first_page", first_page, 1)
    _int("read_ahead", read_ahead, 0)
    if concurrency is not None:
        _int("concurrency", concurrency, 1)
    _seconds("timeout_s", timeout_s)
    _int("processes", processes, 0, MAX_PROCESSES)


def check_query(route: Any, *, where: Any, time_range: Any, limit: Any, columns: Any, timeout_s: Any,
                by_time: Any = False, skip_scan: Any = False) -> None:
    """The arguments of ``Reader.scan(...)``: ``time_range`` is ``(t0, t1)``, epoch ms, ``t0 <= t1``
    (``t0 == t1`` is an empty range; reversed bounds are a mistake, not an empty answer)."""
    if not isinstance(route, RouteSpec):
        raise TypeError(f"route must be a RouteSpec (such as settings.route(name)), got {type(route).__name__} "
                        f"{route!r}")
    if where is not None and not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping of key field -> value, got {type(where).__name__}")
    if time_range is not None:
        if not isinstance(time_range, Sequence) or isinstance(time_range, str | bytes) or len(time_range) != 2:
            raise TypeError(f"time_range must be a pair (t0, t1) of epoch milliseconds, got {time_range!r}")
        for i, bound in enumerate(time_range):
            _int(f"time_range[{i}]", bound, JAVA_LONG_MIN, JAVA_LONG_MAX)
        if time_range[0] > time_range[1]:
            raise ValueError(f"time_range ({time_range[0]}, {time_range[1]}) is reversed: t0 must not be after "
                             "t1 (the range is [t0, t1))")
    if limit is not None:
        _int("limit", limit, 0)
    if columns is not None and (isinstance(columns, str | bytes) or not isinstance(columns, Sequence)
                                or not all(isinstance(c, str) for c in columns)):
        raise TypeError(f"columns must be a list of 'family:qualifier' or 'family' names, got {columns!r}")
    _seconds("timeout_s", timeout_s)
    for name, flag in (("by_time", by_time), ("skip_scan", skip_scan)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__} {flag!r}")
