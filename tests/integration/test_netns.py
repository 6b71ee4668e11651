"""The network layer of ``stack up --netns`` (:mod:`devstack.netns`) on its own: plain TCP servers in three
namespaces on a bridge, reached from the host and from each other, links cut both ways and one way, healed,
a partition that heals by itself, and the network removed without a trace. A few seconds; root only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.netns import (
    HOST_NODE,
    Faults,
    Link,
    NetnsError,
    NetworkPlan,
    Rule,
    ensure_network,
    exec_prefix,
    network_present,
    plan_network,
    remove_network,
)

PORT = 17007
#: clear of the stack's own network (a prefix and subnet of this test only)
PREFIX, SUBNET = "hint", "10.213.7.0/24"
SERVERS = ("zookeeper", "master", "regionserver-1")
TIMEOUT_S = 0.7
_SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept(); c.sendall(b"ok"); c.close()
"""
_CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as c:
        print(c.recv(2).decode())
except OSError as exc:
    print(type(exc).__name__)
"""


def _netns_usable() -> str | None:
    """Why this test cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) for network namespaces"
    if shutil.which("ip") is None or shutil.which("iptables") is None:
        return "needs the ip and iptables commands"
    if subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode != 0:
        return "`ip netns` is not available"
    return None


pytestmark = [pytest.mark.skipif(_netns_usable() is not None, reason=str(_netns_usable())),
              pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def network() -> Iterator[NetworkPlan]:
    """The three namespaces, each running a TCP server on PORT that answers "ok"; removed afterwards."""
    plan = plan_network(SERVERS, PREFIX, SUBNET)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        ensure_network(plan)
        ensure_network(plan)  # idempotent
        for name in SERVERS:
            servers.append(subprocess.Popen([*exec_prefix(plan, name), sys.executable, "-c", _SERVE, str(PORT)]))
        deadline = time.monotonic() + 10
        while not all(_connect(None, plan.address(n)) == "ok" for n in SERVERS):
            assert time.monotonic() < deadline, "the servers in the namespaces never answered"
            time.sleep(0.1)
        yield plan
    finally:
        Faults(plan).heal_all()
        for proc in servers:
            proc.kill()
            proc.wait()
        remove_network(plan)


def _connect(src_namespace: str | None, address: str) -> str:
    """A new connection to ``address``:PORT from the host (None) or a namespace: "ok" or the error's name."""
    prefix = ["ip", "netns", "exec", src_namespace] if src_namespace else []
    done = subprocess.run([*prefix, sys.executable, "-c", _CONNECT, address, str(PORT), str(TIMEOUT_S)],
                          capture_output=True, text=True, check=True, timeout=30)
    return done.stdout.strip()


def _reach(plan: NetworkPlan, src: str, dst: str) -> str:
    return _connect(None if src == HOST_NODE else plan.node(src).namespace, plan.address(dst))


def test_the_recorded_pid_is_the_servers_own_in_its_namespace(network: NetworkPlan) -> None:
    proc = subprocess.Popen([*exec_prefix(network, "master"), sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        assert b"python" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        ident = subprocess.run(["ip", "netns", "identify", str(proc.pid)], capture_output=True, text=True, check=True)
        assert ident.stdout.strip() == network.node("master").namespace
    finally:
        proc.kill()
        proc.wait()


def test_every_namespace_is_reached_from_the_host_and_from_the_others(network: NetworkPlan) -> None:
    for src in (HOST_NODE, *SERVERS):
        for dst in SERVERS:
            if src != dst:
                assert _reach(network, src, dst) == "ok", (src, dst)
    assert _reach(network, "master", HOST_NODE) == "ConnectionRefusedError"  # the host, nothing listening there


def test_a_cut_both_ways_is_silent_in_both_directions_until_healed(network: NetworkPlan) -> None:
    faults = Faults(network)
    try:
        faults.cut("regionserver-1", "zookeeper")
        t0 = time.monotonic()
        assert _reach(network, "regionserver-1", "zookeeper") == "TimeoutError"
        assert _reach(network, "zookeeper", "regionserver-1") == "TimeoutError"
        assert time.monotonic() - t0 < 5
        assert _reach(network, "regionserver-1", "master") == "ok"  # the other links are untouched
        assert _reach(network, HOST_NODE, "zookeeper") == "ok"
    finally:
        faults.heal("regionserver-1", "zookeeper")
    assert faults.active() == []
    assert _reach(network, "regionserver-1", "zookeeper") == "ok"
    assert _reach(network, "zookeeper", "regionserver-1") == "ok"


def test_a_one_way_cut_stops_only_the_connections_its_source_opens(network: NetworkPlan) -> None:
    faults = Faults(network)
    try:
        faults.cut("master", "regionserver-1", both_ways=False)
        faults.cut(HOST_NODE, "zookeeper", both_ways=False)
        assert _reach(network, "master", "regionserver-1") == "TimeoutError"
        assert _reach(network, "regionserver-1", "master") == "ok"
        assert _reach(network, HOST_NODE, "zookeeper") == "TimeoutError"
        assert _reach(network, "zookeeper", HOST_NODE) == "ConnectionRefusedError"  # answered: the host is reached
    finally:
        faults.heal("master", "regionserver-1", both_ways=False)
        faults.heal(HOST_NODE, "zookeeper", both_ways=False)
    assert _reach(network, "master", "regionserver-1") == "ok"
    assert _reach(network, HOST_NODE, "zookeeper") == "ok"


def test_a_partition_heals_on_exit_and_by_itself_when_held_too_long(network: NetworkPlan) -> None:
    faults = Faults(network)
    links = [Link("regionserver-1", "zookeeper"), Link("regionserver-1", "master")]
    with faults.partitioned(links, seconds=30) as rules:
        assert len(rules) == 4 and len(faults.active()) == 4
        assert _reach(network, "master", "regionserver-1") == "TimeoutError"
        assert _reach(network, HOST_NODE, "regionserver-1") == "ok"  # the gateway's side still reaches it
    assert faults.active() == []
    healed_meanwhile: list[Rule] = []

    def overstay() -> None:
        with faults.partitioned(links, seconds=1.0):
            time.sleep(1.8)
            healed_meanwhile.extend(faults.active())

    with pytest.raises(NetnsError, match=r"held past its 1\.0 s"):
        overstay()
    assert healed_meanwhile == []  # the watchdog had healed it before the block ended
    assert _reach(network, "master", "regionserver-1") == "ok"
    with pytest.raises(ValueError, match="at most"), faults.partitioned(links, seconds=3600):
        pass


def test_removal_leaves_nothing_of_the_plan(network: NetworkPlan) -> None:
    other = plan_network(["gateway-1"], PREFIX + "x", "10.213.8.0/24")
    ensure_network(other)
    assert set(network_present(other)) == {"hintx-gateway-1", "hintxbr", "hintx31h"}
    blocker = subprocess.Popen([*exec_prefix(other, "gateway-1"), "sleep", "30"])
    try:
        with pytest.raises(NetnsError, match="still run"):
            remove_network(other)
    finally:
        blocker.kill()
        blocker.wait()
    remove_network(other)
    remove_network(other)  # idempotent
    assert network_present(other) == []
    assert len(network_present(network)) == 3 + 1 + 3  # the module's network is untouched
