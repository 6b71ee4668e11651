"""The tail after a partition heals: how long writes to a region stay stalled once the region server
that holds it is reachable again, and which settings shorten it.

    hbase-ingest stack up --region-servers 2 --gateways 2 --netns        (root: network namespaces)
    python -m bench.partition_tail [--cut-s 60] [--client thrift|native] [--cases 30000/10000,5000/10000]
                                   [--writers 4] [--tcp-retries2 N] [--rounds 1]

Per case, a fresh one-region table; its region server is cut off, both ways, from every gateway
(``--client thrift``) or from the host the client runs on (``native``) for ``--cut-s`` seconds, while
ZooKeeper and the master still reach it, so no region moves: writes to it can only wait. ``--writers``
tasks share one :class:`connectors.hbase.HBaseClient` (the worker's write path, with the case's
``[hbase] timeout_ms``), each with one row in flight at a time as one of the writer's concurrent batches,
retried on failure with the writer's backoff (``[writer] retry_initial_ms`` and the case's
``retry_max_ms``, full jitter), then the next row 100 ms later. ``--tcp-retries2`` sets the kernel's
``net.ipv4.tcp_retries2`` in the namespaces of the cut-off peers for the case (15, the default, after it).

Reported per case: ``tail_s``, from the heal to the first acknowledgement after it; ``all_resumed_s``, to
the moment every writer had one (a worker's commits wait for the slowest batch); the errors the calls saw;
and ``lost``, the acknowledged rows missing from the table afterwards (must be 0).

Results go to bench/results/partition_tail.json (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from connectors.hbase import HBaseClient
from devstack import LocalStack
from devstack.netns import HOST_NODE, Faults, Link
from devstack.settings import load_stack_settings
from pipeline.core.backoff import Backoff
from pipeline.core.model import Mutation, MutationKind, Origin, TopicPartition
from pipeline.settings import FamilySpec, HBaseSettings, WriterSettings

TABLE = "partition_tail"
ORIGIN = Origin(TopicPartition("partition-tail", 0), 0)


def _hbase(stack: LocalStack, client: str, timeout_ms: int) -> HBaseSettings:
    topo = stack.topology()
    data: dict[str, Any] = {"timeout_ms": timeout_ms, "client": client,
                            "gateways": [{"host": g.host, "port": g.thrift_port, "thrift2_port": g.thrift2_port}
                                         for g in stack.gateways]}
    if client == "native":
        data["zookeeper_quorum"] = [f"{topo.zookeeper_host}:{topo.zookeeper_port}"]
    return HBaseSettings.model_validate(data)


async def _region_server(stack: LocalStack, hb: HBaseClient) -> str:
    (region,) = await hb.regions(TABLE)
    for p in stack.topology().by_role("regionserver"):
        if p.ports["regionserver"] == region.port and p.host == region.server:
            return p.name
    raise SystemExit(f"no region server of the stack holds {TABLE}: {region}")


def _tcp_retries2(namespaces: list[str], value: int | None) -> None:
    """Set the kernel's ``net.ipv4.tcp_retries2`` (per network namespace) in ``namespaces``; None: 15,
    the kernel's default: how many retransmissions of unacknowledged data before a connection is dropped."""
    for ns in namespaces:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_retries2={value or 15}"],
                       check=True)


async def one_case(stack: LocalStack, client: str, timeout_ms: int, retry_max_ms: int, cut_s: float,
                   writers: int, tcp_retries2: int | None = None) -> dict[str, Any]:
    admin = _hbase(stack, "thrift", 30_000)
    async with HBaseClient(admin) as hb:
        if await hb.table_exists(TABLE):
            await hb.delete_table(TABLE)
        await hb.create_table(TABLE, {"f": FamilySpec()})
        victim = await _region_server(stack, hb)
    plan = stack.topology().network
    if plan is None:
        raise SystemExit("the stack does not run in network namespaces: stack up --netns")
    peers = [g.name for g in stack.topology().by_role("gateway")] if client == "thrift" else [HOST_NODE]
    links = [Link(victim, p) for p in peers]
    spaces = [plan.node(p).namespace for p in peers if p != HOST_NODE]
    acked: list[tuple[float, bytes]] = []
    errors: collections.Counter[str] = collections.Counter()
    stop = threading.Event()
    times: dict[str, float] = {}

    backoff = Backoff(WriterSettings().retry_initial_ms, retry_max_ms)
    first_after: dict[int, float] = {}

    async def writer(w: int, hb: HBaseClient) -> None:
        """One in-flight batch of the worker at a time, as ``BatchWriter`` retries it: the same backoff."""
        i = 0
        while not stop.is_set():
            key = b"w%d-%07d" % (w, i)
            i += 1
            attempt, started = 0, time.monotonic()
            while not stop.is_set():
                try:
                    await hb.write(TABLE, [Mutation(TABLE, key, MutationKind.PUT, {b"f:a": key}, None, ORIGIN)])
                except Exception as exc:  # counted and reported, retried as the worker does
                    errors[f"{type(exc).__name__}: {str(exc)[:100]}"] += 1
                    delay = backoff.next_delay_ms(attempt, random.random(), (time.monotonic() - started) * 1000)
                    attempt += 1
                    await asyncio.sleep((delay or 0) / 1000)
                    continue
                now = time.time()
                acked.append((now, key))
                if "healed" in times and now > times["healed"]:
                    first_after.setdefault(w, now)
                break
            await asyncio.sleep(0.1)

    async def write() -> None:
        async with HBaseClient(_hbase(stack, client, timeout_ms)) as hb:
            await asyncio.gather(*(writer(w, hb) for w in range(writers)))

    def fault() -> None:
        time.sleep(3)
        with Faults(plan).partitioned(links, seconds=cut_s + 30):
            times["cut"] = time.time()
            time.sleep(cut_s)
        times["healed"] = time.time()
        limit = time.time() + 240
        while time.time() < limit and len(first_after) < writers:
            time.sleep(0.2)
        time.sleep(3)
        stop.set()

    faulter = threading.Thread(target=fault, daemon=True)
    _tcp_retries2(spaces, tcp_retries2)
    try:
        faulter.start()
        await write()
        faulter.join()
    finally:
        _tcp_retries2(spaces, None)
    after = [t for t, _ in acked if t > times["healed"]]
    before = [t for t, _ in acked if t < times["cut"]]
    async with HBaseClient(admin) as hb:
        present = {r[0] for r in await hb.rows(TABLE, [k for _, k in acked])} if acked else set()
    lost = sum(1 for _, k in acked if k not in present)
    return {"client": client, "timeout_ms": timeout_ms, "retry_max_ms": retry_max_ms, "writers": writers,
            "tcp_retries2": tcp_retries2 or 15,
            "cut_s": cut_s, "victim": victim,
            "cut_from": peers, "acked": len(acked), "lost": lost,
            "last_ack_before_cut_s": round(times["cut"] - max(before), 2) if before else None,
            "tail_s": round(min(after) - times["healed"], 2) if after else None,
            "all_resumed_s": (round(max(first_after.values()) - times["healed"], 2)
                              if len(first_after) == writers else None),
            "errors": dict(errors.most_common(6))}


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    stack = LocalStack.recorded(load_stack_settings(None))
    out = []
    for _ in range(args.rounds):
        for client in args.client.split(","):
            for timeout_ms, retry_max_ms in ((int(t), int(r)) for t, r in
                                             (c.split("/") for c in args.cases.split(","))):
                case = await one_case(stack, client, timeout_ms, retry_max_ms, args.cut_s, args.writers,
                                      args.tcp_retries2)
                print(json.dumps(case), flush=True)
                out.append(case)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cut-s", type=float, default=60.0)
    p.add_argument("--client", default="thrift")
    p.add_argument("--cases", default="30000/10000,10000/10000,5000/10000",
                   help="[hbase] timeout_ms / [writer] retry_max_ms per case, comma-separated")
    p.add_argument("--writers", type=int, default=4, help="batches in flight at once, as the writer's concurrency")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--tcp-retries2", type=int, default=None,
                   help="the kernel's net.ipv4.tcp_retries2 in the namespaces of the cut-off peers (default 15)")
    p.add_argument("--out", type=Path, default=Path("bench/results/partition_tail.json"))
    a = p.parse_args()
    results = asyncio.run(main(a))
    a.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "cases": results}, indent=1) + "\n")
    sys.exit(0 if all(c["lost"] == 0 and c["all_resumed_s"] is not None for c in results) else 1)
