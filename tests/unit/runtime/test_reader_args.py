"""The reader's Python API refuses wrong arguments at the call, naming them; a scan is read once."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.runtime.read.reader import PAGE_SIZE, PROCESS_PAGE_SIZE, Reader
from pipeline.settings import RouteSpec

from .test_reader_fake import FakeHBase

ROUTE = RouteSpec(name="r", topic="t", table="t", rowkey="[salt(host, 4)][host][_][long(ts)]",
                  columns={"d:h": "host"})


@pytest.mark.parametrize(("kwargs", "error", "text"), [
    ({"processes": 65}, ValueError, "processes must be between 0 and 64"),
    ({"processes": 1.5}, TypeError, "processes must be an int"),
    ({"processes": True}, TypeError, "processes must be an int"),
    ({"processes": float("inf")}, TypeError, "processes must be an int"),
    ({"concurrency": -1}, ValueError, "concurrency must be >= 1"),
    ({"timeout_s": 0}, ValueError, "timeout_s must be more than 0"),
    ({"timeout_s": "x"}, TypeError, "timeout_s must be a number"),
    ({"page_size": 0}, ValueError, "page_size must be >= 1"),
    ({"read_ahead": -1}, ValueError, "read_ahead must be >= 0"),
])
def test_reader_arguments(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text):
        Reader(FakeHBase(), **kwargs)


def test_page_size_defaults_to_the_mode_and_an_explicit_one_wins() -> None:
    hb = FakeHBase()
    assert (PAGE_SIZE, PROCESS_PAGE_SIZE) == (1000, 4000)
    assert Reader(hb).page_size == PAGE_SIZE
    assert Reader(hb, processes=2).page_size == PROCESS_PAGE_SIZE
    assert Reader(hb, processes=2, page_size=50).page_size == 50
    assert Reader(hb, page_size=50, first_page=80).first_page == 50


@pytest.mark.parametrize(("kwargs", "error", "text"), [
    ({"time_range": (10, 5)}, ValueError, r"time_range \(10, 5\) is reversed"),
    ({"time_range": (1.5, 9)}, TypeError, r"time_range\[0\] must be an int"),
    ({"time_range": (None, 9)}, TypeError, r"time_range\[0\] must be an int"),
    ({"time_range": "abc"}, TypeError, "time_range must be a pair"),
    ({"time_range": (1, 2, 3)}, TypeError, "time_range must be a pair"),
    ({"limit": 2.5}, TypeError, "limit must be an int"),
    ({"limit": "5"}, TypeError, "limit must be an int"),
    ({"limit": True}, TypeError, "limit must be an int"),
    ({"limit": -1}, ValueError, "limit must be >= 0"),
    ({"columns": "d:h"}, TypeError, "columns must be a list"),
    ({"timeout_s": -1}, ValueError, "timeout_s must be more than 0"),
    ({"where": ["host", "a"]}, TypeError, "where must be a mapping"),
])
async def test_scan_arguments(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    async with Reader(FakeHBase()) as reader:
        with pytest.raises(error, match=text):
            reader.scan(ROUTE, **kwargs)
        with pytest.raises(TypeError, match="route must be a RouteSpec"):
            reader.scan("r")  # type: ignore[arg-type]
        assert reader.scan(ROUTE, time_range=(5, 5), limit=0) is not None  # empty, not wrong


async def test_a_scan_is_read_once() -> None:
    async with Reader(FakeHBase()) as reader:
        scan = reader.scan(ROUTE)
        assert await scan.collect() == []
        with pytest.raises(RuntimeError, match="has ended"):
            await scan.collect()
        with pytest.raises(RuntimeError, match="has ended"):
            async for _ in scan.batches():
                pass
