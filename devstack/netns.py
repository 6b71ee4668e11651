"""Each server of the local cluster in a Linux network namespace of its own, on a bridge (``stack up --netns``),
and faults between them: links cut and healed, both ways or one way, always bounded in time.

**The plan** (:func:`plan_network`, pure): every server name gets a fixed *slot* from its role
(:data:`SLOTS`: ZooKeeper 2, the master 3, the NameNode 4, region server ``i`` 10 + i, gateway ``j``
30 + j, DataNode ``k`` 50 + k), so a server keeps its address and names when others are added. In a
subnet (``10.213.0.0/24`` say) the bridge has the first host address (``.1``, on the host) and a server
``subnet + slot``. Names start with a prefix of the stack's own (at most 8 lower-case letters or digits):
the bridge ``<prefix>br``, the namespace ``<prefix>-<server>``, the veth pair ``<prefix><slot>h`` (on the
host, a port of the bridge) and ``<prefix><slot>n`` (inside the namespace): at most 15 characters each.

**The network** (:func:`ensure_network`, :func:`remove_network`: ``ip`` calls, root only): the bridge
and its address, one namespace per server with ``lo`` up, its veth pair, its address and the on-link route
of the subnet (through which it reaches the bridge's address and every other namespace). No default route:
a namespace reaches its subnet and its own loopback, nothing else. Both are idempotent, and
:func:`remove_network` removes only what the plan names.

**Faults** (:class:`Faults`): iptables rules inside the namespaces (never on the host), in a chain of their
own (:data:`FAULT_CHAIN`) that ``INPUT`` and ``OUTPUT`` jump to, so that healing removes them whole.
``cut(src, dst)`` black-holes the link both ways: every packet between the two is dropped (their peers
see silence, as across a real partition, until their own timeouts). ``cut(src, dst, both_ways=False)``
cuts the direction src -> dst only: every connection ``src`` opens to ``dst`` (new or established) goes
silent, while those ``dst`` opens to ``src`` still work (conntrack tells the two apart: the rule drops the
packets of connections whose originator is ``src``). :meth:`Faults.partitioned` cuts a set of links for
a block and always heals them on exit; a watchdog process heals them by itself after ``seconds`` even if
the caller hangs or dies, and the block then fails.

**Launching** (:func:`exec_prefix`): ``ip netns exec <namespace>`` execs the command in place (no fork),
so the pid of the process started with that prefix is the server's own.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

__all__ = ["FAULT_CHAIN", "HOST_NODE", "MAX_FAULT_S", "SLOTS", "Faults", "Link", "NetnsError", "NetworkPlan",
           "Node", "Rule", "ensure_network", "exec_prefix", "fault_rules", "namespace_pids", "network_present",
           "plan_network",
           "remove_network"]

#: the iptables chain of the fault rules inside each namespace
FAULT_CHAIN = "HI-FAULTS"
#: the name of the host's end of the bridge in a link (the worker, Kafka, the readiness checks)
HOST_NODE = "host"
#: the longest a fault may last (seconds): :meth:`Faults.partitioned` refuses more
MAX_FAULT_S = 600.0
#: role (the server name without its ``-<n>``) -> (first slot, how many servers of the role)
SLOTS: dict[str, tuple[int, int]] = {"zookeeper": (2, 1), "master": (3, 1), "namenode": (4, 1),
                                     "regionserver": (11, 16), "gateway": (31, 16), "datanode": (51, 8)}
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_SERVER = re.compile(r"^(?P<role>[a-z]+)(?:-(?P<n>[1-9][0-9]*))?$")
_IFNAMSIZ = 15


class NetnsError(RuntimeError):
    """An ``ip`` or ``iptables`` call failed, or the network is not in the state a call needs."""


@dataclass(frozen=True)
class Node:
    """One server's namespace: its name, the veth pair joining it to the bridge, and its address."""

    server: str
    namespace: str
    veth_host: str
    veth_ns: str
    address: str


@dataclass(frozen=True)
class NetworkPlan:
    """The bridge (``bridge_address`` on the host, in ``subnet``) and one :class:`Node` per server."""

    prefix: str
    subnet: str
    bridge: str
    bridge_address: str
    nodes: tuple[Node, ...]

    @property
    def prefix_len(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen

    def node(self, server: str) -> Node:
        """The node of ``server``. Raises :class:`KeyError` naming the servers the plan has."""
        for n in self.nodes:
            if n.server == server:
                return n
        raise KeyError(f"{server!r} is not in the network plan (it has {[n.server for n in self.nodes]})")

    def address(self, name: str) -> str:
        """The address of server ``name``, or the bridge's for :data:`HOST_NODE`."""
        return self.bridge_address if name == HOST_NODE else self.node(name).address


def _slot(server: str) -> int:
    match = _SERVER.match(server)
    if match is None or match["role"] not in SLOTS:
        raise ValueError(f"no network slot for server {server!r}: the roles are {sorted(SLOTS)}")
    first, count = SLOTS[match["role"]]
    n = int(match["n"] or 1)
    if n > count or (count > 1) != (match["n"] is not None):
        raise ValueError(f"no network slot for server {server!r}: {match['role']} takes "
                         + (f"-1 .. -{count}" if count > 1 else "no number"))
    return first + n - 1


def plan_network(servers: Sequence[str], prefix: str, subnet: str) -> NetworkPlan:
    """The namespaces, veth names and addresses of ``servers`` (topology names such as ``zookeeper``,
    ``regionserver-2``), deterministic: a server's names and address depend on its name, the prefix and
    the subnet only. Raises :class:`ValueError` for a bad prefix, an unknown or repeated server name, or a
    subnet too small for a slot."""
    if not _PREFIX.match(prefix):
        raise ValueError(f"network prefix {prefix!r}: 1-8 lower-case letters and digits, a letter first")
    net = ipaddress.IPv4Network(subnet, strict=True)
    if len(set(servers)) != len(servers):
        raise ValueError(f"repeated server names in {list(servers)}")
    nodes = []
    for server in servers:
        slot = _slot(server)
        if slot >= net.num_addresses - 1:
            raise ValueError(f"subnet {subnet} has no address for slot {slot} ({server}): use a /24 or larger")
        nodes.append(Node(server, f"{prefix}-{server}", f"{prefix}{slot}h", f"{prefix}{slot}n",
                          str(net.network_address + slot)))
    plan = NetworkPlan(prefix, str(net), f"{prefix}br", str(net.network_address + 1), tuple(nodes))
    for name in (plan.bridge, *(n.veth_host for n in nodes), *(n.veth_ns for n in nodes)):
        assert len(name) <= _IFNAMSIZ, name  # a prefix of at most 8 and a slot under 100 keep them short
    return plan


def exec_prefix(plan: NetworkPlan, server: str) -> list[str]:
    """The argv prefix that runs a command in ``server``'s namespace. ``ip netns exec`` enters the
    namespace and execs the command in place: the pid of the process started is the command's own."""
    return ["ip", "netns", "exec", plan.node(server).namespace]


# -- I/O: the network ---------------------------------------------------------------------------------


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    if check and done.returncode != 0:
        raise NetnsError(f"`{shlex.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()[:300]}")
    return done


def _namespaces() -> set[str]:
    return {line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()}


def _link_exists(name: str, namespace: str | None = None) -> bool:
    where = ["-n", namespace] if namespace else []
    return _run(["ip", *where, "link", "show", "dev", name], check=False).returncode == 0


def _ensure_address(address: str, prefix_len: int, dev: str, namespace: str | None = None) -> None:
    where = ["-n", namespace] if namespace else []
    shown = _run(["ip", *where, "-o", "-4", "addr", "show", "dev", dev]).stdout
    if f" {address}/{prefix_len} " not in shown:
        _run(["ip", *where, "addr", "add", f"{address}/{prefix_len}", "dev", dev])


def ensure_network(plan: NetworkPlan) -> None:
    """Make the plan's bridge (with its address, up), and for each node its namespace (``lo`` up), veth
    pair (the host end a port of the bridge), address and the subnet's route. Idempotent: what exists is
    kept. Raises :class:`NetnsError` when an ``ip`` call fails (not root, no ``ip netns``)."""
    if not _link_exists(plan.bridge):
        _run(["ip", "link", "add", plan.bridge, "type", "bridge"])
    _ensure_address(plan.bridge_address, plan.prefix_len, plan.bridge)
    _run(["ip", "link", "set", plan.bridge, "up"])
    existing = _namespaces()
    for node in plan.nodes:
        if node.namespace not in existing:
            _run(["ip", "netns", "add", node.namespace])
        ns = ["ip", "-n", node.namespace]
        if not _link_exists(node.veth_host):
            if _link_exists(node.veth_ns, node.namespace):  # a host end lost: start the pair again
                _run([*ns, "link", "del", node.veth_ns])
            _run(["ip", "link", "add", node.veth_host, "type", "veth", "peer", "name", node.veth_ns,
                  "netns", node.namespace])
        _run(["ip", "link", "set", node.veth_host, "master", plan.bridge, "up"])
        _run([*ns, "link", "set", "lo", "up"])
        _ensure_address(node.address, plan.prefix_len, node.veth_ns, node.namespace)
        _run([*ns, "link", "set", node.veth_ns, "up"])
        _run([*ns, "route", "replace", plan.subnet, "dev", node.veth_ns, "src", node.address])


def namespace_pids(namespace: str) -> list[int]:
    """The pids of the processes running in ``namespace`` (none when it does not exist)."""
    done = _run(["ip", "netns", "pids", namespace], check=False)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def remove_network(plan: NetworkPlan) -> None:
    """Remove the plan's namespaces (with their veth pairs) and bridge, and nothing else; what is already
    gone is skipped. Raises :class:`NetnsError`, before removing anything, when processes still run in one
    of the namespaces (stop them first: a namespace outlives its name while a process holds it)."""
    existing = _namespaces()
    busy = {n.namespace: pids for n in plan.nodes if n.namespace in existing and (pids := namespace_pids(n.namespace))}
    if busy:
        raise NetnsError(f"processes still run in the stack's namespaces: {busy}; stop them first")
    for node in plan.nodes:
        if node.namespace in existing:
            _run(["ip", "netns", "del", node.namespace])
        # deleting the namespace takes its veth pair along (asynchronously): a host end left is deleted
        if _link_exists(node.veth_host) and _run(["ip", "link", "del", node.veth_host], check=False).returncode:
            _gone(node.veth_host)
    if _link_exists(plan.bridge):
        _run(["ip", "link", "del", plan.bridge])


def _gone(link: str, timeout_s: float = 5.0) -> None:
    """Wait until host interface ``link`` has disappeared; raise :class:`NetnsError` if it stays."""
    deadline = time.monotonic() + timeout_s
    while _link_exists(link):
        if time.monotonic() > deadline:
            raise NetnsError(f"interface {link} is still there {timeout_s:.0f} s after its removal")
        time.sleep(0.05)


def network_present(plan: NetworkPlan) -> list[str]:
    """What of the plan exists now: namespace names and host interface names (empty: nothing is left)."""
    existing = _namespaces()
    found = [n.namespace for n in plan.nodes if n.namespace in existing]
    return found + [name for name in (plan.bridge, *(n.veth_host for n in plan.nodes)) if _link_exists(name)]


# -- faults ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A link to cut: ``src`` -> ``dst`` (server names, or :data:`HOST_NODE`), both ways unless told."""

    src: str
    dst: str
    both_ways: bool = True


@dataclass(frozen=True)
class Rule:
    """One iptables rule of :data:`FAULT_CHAIN` in ``namespace``: its match and target arguments."""

    namespace: str
    spec: tuple[str, ...]


def _one_way(plan: NetworkPlan, src: str, dst: str, only_originated: bool) -> Rule:
    """The rule dropping packets from ``src`` to ``dst``: in ``dst``'s namespace on the way in, or (``dst``
    the host, whose firewall is left alone) in ``src``'s on the way out. ``only_originated``: only the
    packets of connections ``src`` opened."""
    ct = ("-m", "conntrack", "--ctdir", "ORIGINAL") if only_originated else ()
    s, d = plan.address(src), plan.address(dst)
    if dst != HOST_NODE:
        return Rule(plan.node(dst).namespace, ("-s", s, "-d", d, *ct, "-j", "DROP"))
    return Rule(plan.node(src).namespace, ("-s", s, "-d", d, *ct, "-j", "DROP"))


def fault_rules(plan: NetworkPlan, link: Link) -> list[Rule]:
    """The rules that cut ``link`` (pure). Both ways: every packet between the two ends is dropped, at each
    end's namespace. One way: the packets of the connections ``src`` opens to ``dst`` (new or
    established) are dropped; those ``dst`` opens to ``src`` pass. Raises :class:`ValueError` for a link
    of a node to itself or between the host and itself, :class:`KeyError` for an unknown server."""
    if link.src == link.dst:
        raise ValueError(f"a link needs two different ends, not {link.src!r} twice")
    if link.both_ways:
        return [_one_way(plan, link.src, link.dst, False), _one_way(plan, link.dst, link.src, False)]
    return [_one_way(plan, link.src, link.dst, True)]


def _iptables(namespace: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", "netns", "exec", namespace, "iptables", "-w", "5", *args], check=check)


def _ensure_chain(namespace: str) -> None:
    if _iptables(namespace, "-L", FAULT_CHAIN, "-n", check=False).returncode != 0:
        _iptables(namespace, "-N", FAULT_CHAIN)
    for hook in ("INPUT", "OUTPUT"):
        if _iptables(namespace, "-C", hook, "-j", FAULT_CHAIN, check=False).returncode != 0:
            _iptables(namespace, "-I", hook, "1", "-j", FAULT_CHAIN)


def _heal_argv(rule: Rule) -> list[str]:
    return ["ip", "netns", "exec", rule.namespace, "iptables", "-w", "5", "-D", FAULT_CHAIN, *rule.spec]


class Faults:
    """Cut and heal links between the namespaces of ``plan`` (which must exist: :func:`ensure_network`).
    Needs root. Every rule lives in :data:`FAULT_CHAIN` of a namespace, so :meth:`heal_all` clears them."""

    def __init__(self, plan: NetworkPlan) -> None:
        self.plan = plan

    def cut(self, src: str, dst: str, both_ways: bool = True) -> list[Rule]:
        """Cut ``src`` -> ``dst`` (see :func:`fault_rules`); a rule already there is not added twice.
        Returns the rules of the cut. Unbounded: prefer :meth:`partitioned`, which heals by itself."""
        rules = fault_rules(self.plan, Link(src, dst, both_ways))
        for rule in rules:
            _ensure_chain(rule.namespace)
            if _iptables(rule.namespace, "-C", FAULT_CHAIN, *rule.spec, check=False).returncode != 0:
                _iptables(rule.namespace, "-A", FAULT_CHAIN, *rule.spec)
        return rules

    def heal(self, src: str, dst: str, both_ways: bool = True) -> None:
        """Undo :meth:`cut` with the same arguments (a rule already gone is skipped)."""
        for rule in fault_rules(self.plan, Link(src, dst, both_ways)):
            while _iptables(rule.namespace, "-D", FAULT_CHAIN, *rule.spec, check=False).returncode == 0:
                pass

    def heal_all(self) -> None:
        """Remove every fault rule from every namespace of the plan (that exists)."""
        existing = _namespaces()
        for node in self.plan.nodes:
            if node.namespace in existing:
                _iptables(node.namespace, "-F", FAULT_CHAIN, check=False)

    def active(self) -> list[Rule]:
        """The fault rules in place now, in every namespace of the plan."""
        found = []
        existing = _namespaces()
        for node in self.plan.nodes:
            if node.namespace not in existing:
                continue
            listed = _iptables(node.namespace, "-S", FAULT_CHAIN, check=False).stdout.splitlines()
            found += [Rule(node.namespace, tuple(shlex.split(line)[2:]))
                      for line in listed if line.startswith(f"-A {FAULT_CHAIN} ")]
        return found

    @contextmanager
    def partitioned(self, links: Iterable[Link], seconds: float = MAX_FAULT_S) -> Iterator[list[Rule]]:
        """Cut ``links`` for the block, heal them on exit (also when it fails). Bounded: a watchdog process,
        started before the first cut and independent of this one, heals them after ``seconds`` whatever
        happens here; a block still running then fails with :class:`NetnsError` on exit. Raises
        :class:`ValueError` for ``seconds`` not in (0, :data:`MAX_FAULT_S`]. Yields the rules in place."""
        if not 0 < seconds <= MAX_FAULT_S:
            raise ValueError(f"a partition lasts more than 0 and at most {MAX_FAULT_S:.0f} s, not {seconds}")
        links = tuple(links)
        rules = [r for link in links for r in fault_rules(self.plan, link)]
        script = f"sleep {seconds:.3f}; " + "; ".join(f"{shlex.join(_heal_argv(r))} 2>/dev/null" for r in rules)
        watchdog = subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        t0 = time.monotonic()
        try:
            for link in links:
                self.cut(link.src, link.dst, link.both_ways)
            yield rules
        finally:
            for rule in rules:
                while _iptables(rule.namespace, "-D", FAULT_CHAIN, *rule.spec, check=False).returncode == 0:
                    pass
            expired = watchdog.poll() is not None
            with suppress(ProcessLookupError):
                os.killpg(watchdog.pid, signal.SIGKILL)  # the shell and its sleep
            watchdog.wait()
        if expired or time.monotonic() - t0 > seconds:
            raise NetnsError(f"the partition was held past its {seconds:.1f} s: the watchdog healed it then")
