"""The network plan of ``stack up --netns`` and its fault rules (pure: no ``ip`` or ``iptables`` call)."""

from __future__ import annotations

import pytest

from devstack.netns import HOST_NODE, Link, exec_prefix, fault_rules, plan_network

SERVERS = ["zookeeper", "namenode", "datanode-1", "master", "regionserver-1", "regionserver-2", "gateway-1"]


def test_every_server_gets_its_namespace_veth_pair_and_slot_address() -> None:
    plan = plan_network(SERVERS, "hi", "10.213.0.0/24")
    assert plan.bridge == "hibr" and plan.bridge_address == "10.213.0.1" and plan.prefix_len == 24
    rs2 = plan.node("regionserver-2")
    assert (rs2.namespace, rs2.veth_host, rs2.veth_ns, rs2.address) == ("hi-regionserver-2", "hi12h", "hi12n",
                                                                         "10.213.0.12")
    assert {n.server: n.address for n in plan.nodes} == {
        "zookeeper": "10.213.0.2", "master": "10.213.0.3", "namenode": "10.213.0.4", "datanode-1": "10.213.0.51",
        "regionserver-1": "10.213.0.11", "regionserver-2": "10.213.0.12", "gateway-1": "10.213.0.31"}


def test_names_are_short_unique_and_stable_when_servers_are_added() -> None:
    big = plan_network([*SERVERS, *(f"regionserver-{i}" for i in range(3, 17)),
                        *(f"gateway-{j}" for j in range(2, 17)), *(f"datanode-{k}" for k in range(2, 9))],
                       "abcdefgh", "10.213.0.0/24")
    names = [big.bridge, *(n.veth_host for n in big.nodes), *(n.veth_ns for n in big.nodes)]
    assert all(len(name) <= 15 for name in names)
    for field in ("namespace", "veth_host", "veth_ns", "address"):
        values = [getattr(n, field) for n in big.nodes]
        assert len(set(values)) == len(values), field
    small = plan_network(["regionserver-2", "zookeeper"], "abcdefgh", "10.213.0.0/24")
    assert all(n == big.node(n.server) for n in small.nodes)  # a server's names depend on its name only
    assert small == plan_network(["regionserver-2", "zookeeper"], "abcdefgh", "10.213.0.0/24")


@pytest.mark.parametrize(("servers", "prefix", "subnet", "why"), [
    (["zookeeper"], "Hi", "10.213.0.0/24", "prefix"),
    (["zookeeper"], "abcdefghi", "10.213.0.0/24", "prefix"),
    (["kafka"], "hi", "10.213.0.0/24", "no network slot"),
    (["regionserver-17"], "hi", "10.213.0.0/24", "no network slot"),
    (["regionserver"], "hi", "10.213.0.0/24", "no network slot"),
    (["zookeeper-1"], "hi", "10.213.0.0/24", "no network slot"),
    (["zookeeper", "zookeeper"], "hi", "10.213.0.0/24", "repeated"),
    (["gateway-1"], "hi", "10.213.0.0/28", "no address"),
])
def test_bad_plans_are_refused(servers: list[str], prefix: str, subnet: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        plan_network(servers, prefix, subnet)


def test_a_cut_both_ways_drops_everything_at_both_ends() -> None:
    plan = plan_network(SERVERS, "hi", "10.213.0.0/24")
    rules = fault_rules(plan, Link("regionserver-1", "zookeeper"))
    assert [(r.namespace, r.spec) for r in rules] == [
        ("hi-zookeeper", ("-s", "10.213.0.11", "-d", "10.213.0.2", "-j", "DROP")),
        ("hi-regionserver-1", ("-s", "10.213.0.2", "-d", "10.213.0.11", "-j", "DROP"))]


def test_a_one_way_cut_drops_only_the_connections_the_source_opens() -> None:
    plan = plan_network(SERVERS, "hi", "10.213.0.0/24")
    [rule] = fault_rules(plan, Link("master", "regionserver-2", both_ways=False))
    assert rule.namespace == "hi-regionserver-2"
    assert rule.spec == ("-s", "10.213.0.3", "-d", "10.213.0.12", "-m", "conntrack", "--ctdir", "ORIGINAL",
                         "-j", "DROP")


def test_links_with_the_host_keep_every_rule_inside_a_namespace() -> None:
    plan = plan_network(SERVERS, "hi", "10.213.0.0/24")
    to_host = fault_rules(plan, Link("gateway-1", HOST_NODE, both_ways=False))
    both = fault_rules(plan, Link(HOST_NODE, "gateway-1"))
    assert {r.namespace for r in [*to_host, *both]} == {"hi-gateway-1"}
    assert to_host[0].spec[:4] == ("-s", "10.213.0.31", "-d", "10.213.0.1")
    with pytest.raises(ValueError, match="two different ends"):
        fault_rules(plan, Link("master", "master"))
    with pytest.raises(KeyError, match="not in the network plan"):
        fault_rules(plan, Link("master", "gateway-9"))


def test_the_launch_prefix_enters_the_servers_namespace() -> None:
    plan = plan_network(SERVERS, "hi", "10.213.0.0/24")
    assert exec_prefix(plan, "master") == ["ip", "netns", "exec", "hi-master"]
