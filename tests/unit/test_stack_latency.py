"""devstack.latency without servers: how a round trip is split into Toxiproxy's toxics, and the error
when Go is missing (the proxy itself is exercised in tests/integration/test_latency.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack import latency
from devstack.latency import Proxy, Toxiproxy, ensure_toxiproxy
from devstack.layout import StackLayout, infra_dir
from pipeline.errors import StackError


def _calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rtt_ms: int, jitter_ms: int = 0) -> list[tuple[Any, ...]]:
    server = Toxiproxy(StackLayout(tmp_path, tmp_path, infra_dir()))
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(server, "_call", lambda method, path, body=None, missing_ok=False: calls.append(
        (method, path, body)))
    server.set_rtt(Proxy("p", 18600, 9090), rtt_ms, jitter_ms)
    return calls


@pytest.mark.parametrize(("rtt_ms", "upstream", "downstream"), [(1, 1, 0), (2, 1, 1), (5, 3, 2), (20, 10, 10)])
def test_a_round_trip_is_split_into_whole_milliseconds_each_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rtt_ms: int, upstream: int, downstream: int) -> None:
    calls = _calls(tmp_path, monkeypatch, rtt_ms, jitter_ms=4)
    # the old toxics go first, whatever was set before
    assert calls[:2] == [("DELETE", "/proxies/p/toxics/latency_upstream", None),
                         ("DELETE", "/proxies/p/toxics/latency_downstream", None)]
    added = {body["stream"]: body["attributes"] for _, _, body in calls[2:]}
    assert added == {stream: {"latency": ms, "jitter": 2}
                     for stream, ms in (("upstream", upstream), ("downstream", downstream)) if ms}
    assert sum(a["latency"] for a in added.values()) == rtt_ms


def test_zero_removes_the_delay_and_a_negative_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [c[0] for c in _calls(tmp_path, monkeypatch, 0)] == ["DELETE", "DELETE"]
    with pytest.raises(ValueError, match="rtt_ms=-1"):
        _calls(tmp_path, monkeypatch, -1)


def test_without_go_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(latency, "GO_FALLBACKS", ())
    with pytest.raises(StackError, match="`go` was not found on PATH: the latency proxy"):
        ensure_toxiproxy(StackLayout(tmp_path / "cache", tmp_path / "state", infra_dir()))
