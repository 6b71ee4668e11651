"""Gateway health and choice (connectors.hbase.gateways), the probe thread with a fake probe, and the
settings that name several gateways."""

from __future__ import annotations

import pickle
import threading
import time

import pytest
from thriftpy2.transport import TTransportException

from connectors.hbase.errors import is_gateway_failure, translate
from connectors.hbase.gateways import GatewayBoard
from connectors.hbase.pool import PoolExhausted
from connectors.hbase.probe import Prober
from pipeline.errors import ConfigError, HBaseTimeout, HBaseUnavailable
from pipeline.settings import GatewaySpec, HBaseSettings, load_settings


def board(n: int = 3, servers: dict[int, str] | None = None) -> GatewayBoard:
    servers = servers or {}
    return GatewayBoard([(f"g{i}:9090", servers.get(i)) for i in range(n)])


def test_idle_calls_go_round_robin() -> None:
    b = board(3)
    assert [b.choose() for _ in range(6)] == [0, 1, 2, 0, 1, 2]


def test_the_least_busy_gateway_is_chosen() -> None:
    b = board(3)
    b.started(0)
    b.started(0)
    b.started(1)
    assert b.choose() == 2
    b.started(2)
    assert b.choose() == 1  # 1 and 2 have one call each; 0 has two
    b.finished(0)
    b.finished(0)
    assert b.choose() == 0


def test_a_down_gateway_is_not_chosen_until_it_is_up_again() -> None:
    b = board(2)
    assert b.mark_down(0, "refused", now=1.0) is True
    assert b.mark_down(0, "refused again", now=2.0) is False  # already down: one change
    assert [b.choose() for _ in range(3)] == [1, 1, 1]
    assert b.down() == [0]
    assert b.mark_up(0, now=3.0) is True and b.mark_up(0, now=4.0) is False
    assert {b.choose() for _ in range(2)} == {0, 1}


def test_none_when_every_gateway_is_down_or_excluded() -> None:
    b = board(2)
    assert b.choose(exclude=[0, 1]) is None
    b.mark_down(1, "reset", now=0.0)
    assert b.choose(exclude=[0]) is None and not b.any_up([0]) and b.any_up()
    b.mark_down(0, "reset", now=0.0)
    assert b.choose() is None


def test_locality_prefers_the_gateway_on_the_region_server_then_any() -> None:
    b = board(3, {1: "rs1:16020", 2: "rs2:16020"})
    assert [b.choose("rs2:16020") for _ in range(3)] == [2, 2, 2]
    assert b.choose("rs1:16020") == 1
    b.mark_down(2, "refused", now=0.0)
    assert b.choose("rs2:16020") in (0, 1)  # its gateway is down: any healthy one
    assert b.choose("elsewhere:16020") in (0, 1)
    b.started(1)
    assert b.choose("rs1:16020") == 1  # busy or not, the local one while it is up


def test_statistics_count_calls_errors_and_state() -> None:
    b = board(2, {0: "rs1:16020"})
    b.started(0)
    b.finished(0)
    b.started(0)
    b.finished(0, "boom")
    b.failed_over(0)
    b.mark_down(0, "connection refused", now=5.0)
    snap = b.snapshot()
    assert snap["g0:9090"] == {"state": "down", "server": "rs1:16020", "in_flight": 0, "calls": 2, "errors": 1,
                               "failovers": 1, "downs": 1, "last_error": "connection refused", "changed_at": 5.0}
    assert snap["g1:9090"]["state"] == "up" and snap["g1:9090"]["calls"] == 0


def test_a_board_needs_a_gateway() -> None:
    with pytest.raises(ValueError, match="at least one gateway"):
        GatewayBoard([])


# -- connection-level failures are marked, HBase's own errors are not -------------------------------


def test_transport_errors_mark_a_gateway_failure_and_survive_pickling() -> None:
    for exc in (TTransportException(message="Could not connect"), ConnectionResetError("reset"),
                TimeoutError("timed out"), TTransportException(message="read timed out")):
        err = translate(exc, "t", "scan")
        assert isinstance(err, HBaseUnavailable | HBaseTimeout) and is_gateway_failure(err), exc
        assert is_gateway_failure(pickle.loads(pickle.dumps(err)))


def test_errors_from_hbase_itself_and_pool_waits_are_not_gateway_failures() -> None:
    class TIOError(Exception):  # the Thrift2 IDL's name; HBase's message inside
        message = "RegionTooBusyException: over memstore limit"
        canRetry = True

    busy = translate(TIOError(), "t", "write batch")
    assert isinstance(busy, HBaseUnavailable) and not is_gateway_failure(busy)
    waited = translate(PoolExhausted("no free connection"), "t", "scan")
    assert isinstance(waited, HBaseTimeout) and not is_gateway_failure(waited)


# -- the probe thread ----------------------------------------------------------------------------------


def wait_for(cond: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return True
        time.sleep(0.01)
    return False


def test_the_prober_takes_a_gateway_back_in_once_it_answers_then_stops() -> None:
    b = board(2)
    answers = threading.Event()
    probed: list[int] = []

    def probe(i: int) -> None:
        probed.append(i)
        if not answers.is_set():
            raise ConnectionRefusedError("down")

    prober = Prober(b, probe, interval_s=0.01)
    try:
        b.mark_down(1, "refused", now=0.0)
        prober.wake()
        assert wait_for(lambda: len(probed) >= 3)
        assert b.down() == [1] and set(probed) == {1}
        answers.set()
        assert wait_for(lambda: b.is_up(1))
        assert wait_for(lambda: prober._thread is None)  # nothing down: the thread ended
        b.mark_down(0, "reset", now=1.0)
        prober.wake()  # a new thread for the next outage
        assert wait_for(lambda: b.is_up(0))
    finally:
        prober.close()


def test_a_closed_prober_probes_no_more() -> None:
    b = board(1)
    b.mark_down(0, "refused", now=0.0)
    prober = Prober(b, lambda i: None, interval_s=0.01)
    prober.close()
    prober.wake()
    time.sleep(0.1)
    assert prober.probes == 0 and b.down() == [0]


# -- settings --------------------------------------------------------------------------------------------


def test_one_host_and_port_is_a_one_gateway_list() -> None:
    s = HBaseSettings(host="h", port=1, thrift2_port=2)
    assert s.endpoints() == [GatewaySpec(host="h", port=1, thrift2_port=2)]


def test_gateways_with_their_servers() -> None:
    s = HBaseSettings(gateways=[{"host": "a", "port": 9090, "thrift2_port": 9091, "server": "a:16020"},
                                {"host": "b", "port": 9190, "thrift2_port": 9191}])
    assert [(g.name, g.server) for g in s.endpoints()] == [("a:9090", "a:16020"), ("b:9190", None)]


@pytest.mark.parametrize(("gateways", "single", "expected"), [
    ([{"host": "a"}, {"host": "a"}], {}, "gateways\\[1\\] .* as gateways\\[0\\] does"),
    ([{"host": "a", "port": 9090, "thrift2_port": 9190}, {"host": "a", "port": 9190, "thrift2_port": 9191}], {},
     "gateways\\[1\\] .*a:9190"),
    ([{"host": "a"}], {"port": 9090}, "either gateways or port"),
    ([{"host": "a", "server": "no-port"}], {}, "host:port"),
    ([{"host": "a", "port": 0}], {}, "greater than or equal to 1"),
    ([{"host": "a", "thrift_port": 1}], {}, "thrift_port"),
])
def test_bad_gateways_are_refused_naming_the_entry(gateways: list[dict[str, object]], single: dict[str, object],
                                                   expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(hbase={"gateways": gateways, **single})
