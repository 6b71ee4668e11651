"""The client's failover rule (HBaseClient._on_gateway) with fake calls: which failures take a gateway
down, which calls are retried on another gateway, and what is raised when none is left. No socket
is opened: the client's pools connect lazily and the fake calls never touch them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from thriftpy2.transport import TTransportException

from connectors.hbase.client import HBaseClient
from connectors.hbase.doorway import _Endpoint, _Sent
from connectors.hbase.errors import is_gateway_failure, is_stale_connection, translate
from pipeline.errors import HBaseRequestError, HBaseUnavailable
from pipeline.settings import HBaseSettings

SETTINGS = HBaseSettings(gateways=[{"host": "127.0.0.1", "port": 1, "thrift2_port": 2, "server": "rs1:16020"},
                                   {"host": "127.0.0.1", "port": 3, "thrift2_port": 4, "server": "rs2:16020"}],
                         probe_interval_ms=60_000)  # no probe answers within a test


def refused() -> Exception:
    return translate(ConnectionRefusedError("refused"), "t", "write batch")


def fake(behaviour: dict[int, Callable[[_Sent], Any]], log: list[int]) -> Callable[[_Endpoint, _Sent], Any]:
    async def use(ep: _Endpoint, sent: _Sent) -> Any:
        port = ep.spec.port
        log.append(port)
        await anyio.lowlevel.checkpoint()
        return behaviour[port](sent)
    return use


def ok(sent: _Sent) -> str:
    sent.sent = True
    return "done"


def fails_after_send(sent: _Sent) -> str:
    sent.sent = True
    raise refused()


def fails_to_connect(sent: _Sent) -> str:
    raise refused()


async def test_a_failed_idempotent_call_is_retried_on_the_other_gateway_which_goes_down() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        got = await hb._on_gateway(fake({1: fails_after_send, 3: ok}, log), idempotent=True, table="t",
                                   what="write batch", server="rs1:16020")
        assert got == "done" and log == [1, 3]
        stats = hb.statistics()["gateways"]
        assert stats["127.0.0.1:1"]["state"] == "down" and stats["127.0.0.1:1"]["errors"] == 1
        assert stats["127.0.0.1:1"]["failovers"] == 1 and "refused" in stats["127.0.0.1:1"]["last_error"]
        assert stats["127.0.0.1:3"]["state"] == "up" and stats["127.0.0.1:3"]["errors"] == 0
        # the local gateway is down: its region's writes go to the other one, with no error
        log.clear()
        await hb._on_gateway(fake({1: ok, 3: ok}, log), idempotent=True, table="t", what="write", server="rs1:16020")
        assert log == [3]


async def test_an_increment_that_may_have_been_sent_is_not_retried() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        with pytest.raises(HBaseUnavailable, match="refused"):
            await hb._on_gateway(fake({1: fails_after_send, 3: ok}, log), idempotent=False, table="t",
                                 what="increment batch", server="rs1:16020")
        assert log == [1]
        assert hb.statistics()["gateways"]["127.0.0.1:1"]["state"] == "down"


async def test_a_call_that_could_not_connect_is_retried_even_when_not_idempotent() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        got = await hb._on_gateway(fake({1: fails_to_connect, 3: ok}, log), idempotent=False, table="t",
                                   what="increment batch", server="rs1:16020")
        assert got == "done" and log == [1, 3]


async def test_an_error_from_hbase_itself_keeps_the_gateway_up_and_is_not_retried() -> None:
    def rejected(sent: _Sent) -> str:
        sent.sent = True
        raise HBaseRequestError("NoSuchColumnFamilyException", table="t")

    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        with pytest.raises(HBaseRequestError):
            await hb._on_gateway(fake({1: rejected, 3: ok}, log), idempotent=True, table="t", what="write",
                                 server="rs1:16020")
        assert log == [1]
        stats = hb.statistics()["gateways"]["127.0.0.1:1"]
        assert stats["state"] == "up" and stats["errors"] == 1


async def test_a_call_is_tried_on_two_gateways_at_most_then_every_call_fails_at_once() -> None:
    settings = HBaseSettings(gateways=[{"host": "127.0.0.1", "port": p, "thrift2_port": p + 1} for p in (1, 3, 5)],
                             probe_interval_ms=60_000)
    async with HBaseClient(settings) as hb:
        log: list[int] = []
        with pytest.raises(HBaseUnavailable, match="refused"):
            await hb._on_gateway(fake({1: fails_after_send, 3: fails_after_send, 5: ok}, log), idempotent=True,
                                 table="t", what="scan")
        assert log == [1, 3]
        assert [g["state"] for g in hb.statistics()["gateways"].values()] == ["down", "down", "up"]
        with pytest.raises(HBaseUnavailable, match="refused"):
            await hb._on_gateway(fake({5: fails_after_send}, log), idempotent=True, table="t", what="scan")
        log.clear()
        with pytest.raises(HBaseUnavailable, match="every HBase gateway is down"):
            await hb._on_gateway(fake({}, log), idempotent=True, table="t", what="scan")
        assert log == []


async def test_calls_spread_over_healthy_gateways() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        for _ in range(4):
            await hb._on_gateway(fake({1: ok, 3: ok}, log), idempotent=True, table="t", what="scan")
        assert log == [1, 3, 1, 3]
        stats = hb.statistics()
        assert [g["calls"] for g in stats["gateways"].values()] == [2, 2]
        assert stats["thrift1"] == {"size": 16, "open": 0, "idle": 0}


def stale(times: int) -> Callable[[_Sent], str]:
    """A pooled socket found reset by the gateway ``times`` times, then answers."""
    left = [times]

    def call(sent: _Sent) -> str:
        sent.sent = True
        if left[0] > 0:
            left[0] -= 1
            raise translate(ConnectionResetError(104, "Connection reset by peer"), "t", "write batch")
        return "done"
    return call


async def test_a_stale_connection_is_retried_on_a_new_one_and_keeps_its_gateway_up() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        got = await hb._on_gateway(fake({1: stale(1), 3: ok}, log), idempotent=True, table="t", what="write batch",
                                   server="rs1:16020")
        assert got == "done" and log == [1, 1]
        stats = hb.statistics()["gateways"]["127.0.0.1:1"]
        assert stats["state"] == "up" and stats["errors"] == 1 and stats["failovers"] == 0
        # found stale twice in one call: the gateway goes down and the other one takes the call
        log.clear()
        got = await hb._on_gateway(fake({1: stale(2), 3: ok}, log), idempotent=True, table="t", what="write batch",
                                   server="rs1:16020")
        assert got == "done" and log == [1, 1, 3]
        assert hb.statistics()["gateways"]["127.0.0.1:1"]["state"] == "down"


async def test_a_stale_connection_under_an_increment_that_may_have_been_sent_is_not_retried() -> None:
    async with HBaseClient(SETTINGS) as hb:
        log: list[int] = []
        with pytest.raises(HBaseUnavailable, match="reset"):
            await hb._on_gateway(fake({1: stale(1), 3: ok}, log), idempotent=False, table="t",
                                 what="increment batch", server="rs1:16020")
        assert log == [1]


def test_which_connection_failures_are_stale() -> None:
    def wrapped(cause: BaseException) -> TTransportException:
        exc = TTransportException(TTransportException.UNKNOWN, "HTTP POST to gw:9090: ...")
        exc.__cause__ = cause
        return exc

    stale_ones = [ConnectionResetError(104, "reset"), ConnectionAbortedError(103, "abort"), BrokenPipeError(32, "pipe"),
                  TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes"),
                  wrapped(ConnectionResetError(104, "Remote end closed connection without response"))]
    others = [ConnectionRefusedError(111, "refused"), TimeoutError("timed out"),
              TTransportException(TTransportException.NOT_OPEN, "Could not connect to ('gw', 9090)"),
              TTransportException(TTransportException.TIMED_OUT, "timed out"), wrapped(TimeoutError("timed out"))]
    for exc in stale_ones:
        err = translate(exc, "t", "write")
        assert is_gateway_failure(err) and is_stale_connection(err), exc
    for exc in others:
        err = translate(exc, "t", "write")
        assert is_gateway_failure(err) and not is_stale_connection(err), exc
