"""Scale-out: events/s with 1, 2 and 3 worker processes against a local cluster of two region
servers and two Thrift gateways, with the CPU seconds of every process.

    hbase-ingest stack up --region-servers 2 --gateways 2
    python -m bench.bench_scale_out [--events 600000] [--partitions 12] [--workers 1,2,3] [--rounds 2]
                                    [--rtt-ms 0,1,5]

(``make bench-scale`` stops the default stack and runs both with a state folder of their own.) The
events are produced once, into a topic of ``--partitions`` partitions (12 divide evenly among 1, 2
and 3 members). ``--warmup`` runs with one worker (3 by default) warm the cluster's JVMs up and
are not counted: on a freshly started cluster the servers' CPU per event fell 3.8x over the first
six runs. Then, per
run, in the order 1, 2, 3 workers and back (3, 2, 1) so that neither end of the range always meets
a fresher stack:

- a fresh 16-region table (``bench_worker``'s design, columns and writer settings), its regions
  balanced over both region servers by HBase, and a fresh consumer group;
- a TOML profile naming both gateways, each declared to sit with one region server (region locality);
- N ``hbase-ingest run`` processes started at once, in that group;
- the run ends when the group's committed offsets reach the topic's end. The CPU seconds of every
  worker and every server process are read then; the workers get SIGTERM and must exit 0, and the
  table must hold exactly one row per event (counted region by region) or the benchmark fails.

Figures per run: events/s from the workers' start to the last commit, and all the events over the
time from the first commit seen to the last (the first commit's events included, so it reads high);
CPU seconds of each worker, region server, gateway, the master, ZooKeeper and Kafka; and the bound
they imply on this machine: if every process were CPU-bound and the cores were the only limit, the
run could not be shorter than (all CPU seconds) / cores. ``of_bound`` is the achieved events/s over
that bound's events/s.

With ``--rtt-ms 0,1,5`` every run goes through latency proxies (Toxiproxy, :mod:`devstack.latency`)
in front of each gateway's Thrift1 and Thrift2 ports and of Kafka (its DISTANT listener, which the
broker advertises at the proxy's port), and every worker count runs at each round trip
(the order reversed every other round). The 0 ms case goes through the proxies too, so that only the
delay differs; the proxy's CPU seconds count in the bound. Each round trip's median time of a small
Thrift1 call through the proxy is measured first and reported (``thrift_call_ms``), and each count's
events/s is given as a ratio to its 0 ms figure (``of_0_ms``).

Results go to bench/results/scale_out.json (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import happybase

from bench.bench_worker import bench_settings
from bench.cpu import cpu_seconds
from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, create_topics, delete_topics, end_offsets
from devstack import LocalStack
from devstack.latency import Toxiproxy
from devstack.layout import kafka_listener_rendered
from devstack.settings import load_stack_settings
from pipeline.core.examples import generate
from pipeline.core.model import TopicPartition
from pipeline.runtime.admin.tables import create_tables, describe_table
from pipeline.runtime.produce import produce_events
from pipeline.settings import Settings, load_settings

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "bench-scale-events"
DLQ = "bench-scale-dlq"
TABLE = "bench_scale"
#: how long one run may take before the benchmark gives up on it
RUN_TIMEOUT_S = 600.0
#: the first loopback port of the latency proxies (``--rtt-ms``), one per gateway port
PROXY_PORT = 18500


class RunFailed(RuntimeError):
    """A worker exited early or non-zero, a run timed out, or the table's row count is wrong."""


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def to_toml(data: dict[str, Any]) -> str:
    """A TOML profile for ``data`` (a settings dump): sections for the dict-valued keys, ``[[...]]``
    blocks for the lists of dicts (tables, routes); nested dicts inline."""
    out: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.append(f"[{key}]")
            out.extend(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            for item in value:
                out.append(f"[[{key}]]")
                out.extend(f"{k} = {_toml_value(v)}" for k, v in item.items() if v is not None)
        else:
            out.append(f"{key} = {_toml_value(value)}")
        out.append("")
    return "\n".join(out)


def scale_settings(stack: LocalStack, partitions: int, servers: list[str | None],
                   distance: Distance | None = None) -> Settings:
    """``bench_worker``'s settings on this benchmark's topic and table, with the stack's gateways,
    gateway j declared to sit with region server ``servers[j]`` (``host:port``, None: no locality).
    With ``distance``, the gateways and Kafka as reached through its latency proxies."""
    via = distance.ports if distance is not None else {}
    data = bench_settings(partitions).model_dump(mode="json", exclude_unset=True)
    data["kafka"]["dead_letter_topic"] = DLQ
    data["tables"][0]["name"] = TABLE
    data["routes"][0].update(topic=TOPIC, table=TABLE)
    gateways = []
    for g, server in zip(stack.gateways, servers, strict=True):
        gateways.append({"host": g.host, "port": via.get(g.thrift_port, g.thrift_port),
                         "thrift2_port": via.get(g.thrift2_port, g.thrift2_port)}
                        | ({"server": server} if server else {}))
    data["hbase"] = {"pool_size": data["hbase"].get("pool_size", 8), "gateways": gateways}
    if distance is not None:
        data["kafka"]["bootstrap_servers"] = distance.bootstrap
    return load_settings(None, **data)


class Distance:
    """Latency proxies (:mod:`devstack.latency`) in front of every gateway's Thrift1 and Thrift2 ports and of
    Kafka's DISTANT listener: the workers connect through them, so that every call to a gateway or to the
    broker pays the round trip set."""

    def __init__(self, stack: LocalStack, first_port: int = PROXY_PORT) -> None:
        if not kafka_listener_rendered(stack.layout, "DISTANT"):
            raise SystemExit("--rtt-ms needs Kafka's DISTANT listener, which this Kafka was started without: "
                             "`hbase-ingest stack down`, then `stack up` again with the same shape")
        self.proxy = Toxiproxy(stack.layout)
        self.proxy.start()
        upstream = [p for g in stack.gateways for p in (g.thrift_port, g.thrift2_port)]
        self.proxies = [self.proxy.proxy(f"gateway-{port}", first_port + i, port) for i, port in enumerate(upstream)]
        distant = stack.settings.distant_port
        self.proxies.append(self.proxy.proxy("kafka", distant + 1, distant))
        #: gateway port -> the port of the proxy in front of it
        self.ports = {p.upstream_port: p.listen_port for p in self.proxies[:-1]}
        self.bootstrap = stack.distant_bootstrap
        self.gateway = (stack.gateways[0].host, self.proxies[0].listen_port)

    def set_rtt(self, rtt_ms: int) -> None:
        for p in self.proxies:
            self.proxy.set_rtt(p, rtt_ms)

    def call_ms(self, calls: int = 41) -> float:
        """The median time of a small Thrift1 call (``getTableNames``) through the first gateway's proxy."""
        conn = happybase.Connection(*self.gateway, timeout=10_000)
        try:
            took = []
            for _ in range(calls):
                t0 = time.perf_counter()
                conn.tables()
                took.append((time.perf_counter() - t0) * 1000)
        finally:
            conn.close()
        return round(statistics.median(took), 2)

    def stop(self) -> None:
        self.proxy.stop()


async def _fresh_table(settings: Settings) -> list[str]:
    """Recreate the table; the servers (``host:port``) holding its regions, by region server port."""
    async with HBaseClient(settings.hbase) as hb:
        await create_tables(hb, settings, recreate=True)
        regions = await hb.regions(TABLE)
    return sorted({f"{r.server}:{r.port}" for r in regions}, key=lambda s: int(s.rpartition(":")[2]))


async def _committed(settings: Settings, group: str, tps: list[TopicPartition]) -> int:
    offsets = await KafkaBroker(settings.kafka).group_offsets(group, tps)
    return sum(v or 0 for v in offsets.values())


async def _count(settings: Settings) -> tuple[int, dict[str, int]]:
    """Rows in the table, and rows per region server."""
    async with HBaseClient(settings.hbase) as hb:
        desc = await describe_table(hb, TABLE)
    per_server: dict[str, int] = {}
    for r in desc.regions:
        per_server[r.server] = per_server.get(r.server, 0) + (r.rows or 0)
    return sum(per_server.values()), per_server


def _server_pids(stack: LocalStack) -> dict[str, int]:
    pids = {name: p.pid() for name, p in stack.procs.items()}
    missing = [name for name, pid in pids.items() if pid is None]
    if missing:
        raise RunFailed(f"stack processes not running: {', '.join(missing)} (see `hbase-ingest stack status`)")
    return {name: pid for name, pid in pids.items() if pid is not None}


def _start_workers(config: Path, group: str, n: int,
                   work: Path) -> tuple[list[subprocess.Popen[bytes]], list[IO[bytes]]]:
    """``n`` ``hbase-ingest run`` processes in ``group``, each logging to a file of its own in ``work``."""
    logs: list[IO[bytes]] = [open(work / f"worker-{n}-{i}.log", "wb") for i in range(n)]  # noqa: SIM115
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline", "run", "-c", str(config), "--group", group,
                               "--no-metrics"], stdout=log, stderr=subprocess.STDOUT) for log in logs]
    return procs, logs


async def one_run(stack: LocalStack, args: argparse.Namespace, n_workers: int, total: int,
                  tps: list[TopicPartition], work: Path, distance: Distance | None = None,
                  rtt_ms: int = 0) -> dict[str, Any]:
    """One run of ``n_workers`` workers; with ``distance``, through its proxies at ``rtt_ms``."""
    plain = scale_settings(stack, args.partitions, [None] * len(stack.gateways))
    servers = await _fresh_table(plain)
    by_port = {int(s.rpartition(":")[2]): s for s in servers}
    rs_ports = stack.topology().region_server_ports
    if distance is not None:
        distance.set_rtt(rtt_ms)
    settings = scale_settings(stack, args.partitions, [by_port.get(p) for p in rs_ports[:len(stack.gateways)]],
                              distance)
    group = f"bench-scale-{n_workers}-{time.time_ns()}"
    config = work / f"scale-{n_workers}.toml"
    config.write_text(to_toml(settings.model_dump(mode="json", exclude_unset=True, exclude_none=True)))
    server_pids = _server_pids(stack)
    if distance is not None and (proxy_pid := distance.proxy.process.pid()) is not None:
        server_pids["toxiproxy"] = proxy_pid  # its copying is CPU of this machine too: counted in the bound
    cpu0 = {name: cpu_seconds(pid) for name, pid in server_pids.items()}
    t0 = time.perf_counter()
    procs, logs = _start_workers(config, group, n_workers, work)
    first: float | None = None
    try:
        while True:
            done = await _committed(settings, group, tps)
            now = time.perf_counter()
            if done and first is None:
                first = now
            if done >= total:
                break
            if (dead := [i for i, p in enumerate(procs) if p.poll() is not None]):
                raise RunFailed(f"worker {dead[0]} exited ({procs[dead[0]].returncode}) before the end; "
                                f"its log: {logs[dead[0]].name}")
            if now - t0 > RUN_TIMEOUT_S:
                raise RunFailed(f"{n_workers} workers: {done:,} of {total:,} committed after {RUN_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.1)
        end = time.perf_counter()
        worker_cpu = [cpu_seconds(p.pid) for p in procs]
        server_cpu = {name: round(cpu_seconds(pid) - cpu0[name], 1) for name, pid in server_pids.items()}
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
        for log in logs:
            log.close()
    if any(codes):
        raise RunFailed(f"workers exited {codes} after SIGTERM (expected all 0); logs in {work}")
    rows, per_server = await _count(settings)
    if rows != total:
        raise RunFailed(f"{n_workers} workers: the table holds {rows:,} rows, expected {total:,}")
    wall = end - t0
    all_cpu = sum(worker_cpu) + sum(server_cpu.values())
    cores = os.cpu_count() or 1
    bound = total / (all_cpu / cores)
    return {
        "workers": n_workers, **({"rtt_ms": rtt_ms} if distance is not None else {}), "events": total,
        "rows_checked": rows, "rows_per_region_server": per_server,
        "wall_s": round(wall, 1), "first_commit_s": round((first or end) - t0, 1),
        "events_per_s": round(total / wall), "events_per_s_first_to_last_commit": round(total / (end - (first or t0))),
        "cpu_s_workers": [round(c, 1) for c in worker_cpu], "cpu_s_servers": server_cpu,
        "cpu_s_all": round(all_cpu, 1), "cores": cores,
        "bound_events_per_s": round(bound), "of_bound": round(total / wall / bound, 2),
        "worker_cpu_us_per_event": round(sum(worker_cpu) / total * 1e6, 1),
        "servers_cpu_us_per_event": round(sum(server_cpu.values()) / total * 1e6, 1),
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
    }


def _summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for rtt, n in sorted({(r.get("rtt_ms"), r["workers"]) for r in runs}, key=lambda k: (k[0] or 0, k[1])):
        mine = [r for r in runs if r["workers"] == n and r.get("rtt_ms") == rtt]

        def med(key: str, digits: int = 1, rs: list[dict[str, Any]] = mine) -> float:
            return round(float(statistics.median(r[key] for r in rs)), digits)

        out.append({"workers": n, **({"rtt_ms": rtt} if rtt is not None else {}), "runs": len(mine),
                    "events_per_s": med("events_per_s", 0),
                    "events_per_s_range": [min(r["events_per_s"] for r in mine), max(r["events_per_s"] for r in mine)],
                    "events_per_s_first_to_last_commit": med("events_per_s_first_to_last_commit", 0),
                    "worker_cpu_us_per_event": med("worker_cpu_us_per_event"),
                    "servers_cpu_us_per_event": med("servers_cpu_us_per_event"),
                    "of_bound": med("of_bound", 2)})
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack.recorded(load_stack_settings(None))  # HBASE_INGEST_STACK__* as the CLI reads them
    topo = stack.topology()
    if topo.mode != "cluster" or len(topo.region_server_ports) < 2 or len(stack.gateways) < 2:
        raise SystemExit("bench_scale_out needs the local cluster: `hbase-ingest stack down` then "
                         "`hbase-ingest stack up --region-servers 2 --gateways 2` (the stack here is "
                         f"{topo.mode} with {len(topo.region_server_ports)} region server(s) and "
                         f"{len(stack.gateways)} gateway(s))")
    stack.check_ready()
    base = scale_settings(stack, args.partitions, [None] * len(stack.gateways))
    kafka = base.kafka
    await delete_topics(kafka, [TOPIC])
    await create_topics(kafka, {TOPIC: args.partitions, DLQ: 1})
    t0 = time.perf_counter()
    total = await produce_events(KafkaBroker(kafka), TOPIC, generate("logs", args.events), partitions=args.partitions)
    print(f"produced {total:,} events into {args.partitions} partitions in {time.perf_counter() - t0:.1f} s",
          flush=True)
    tps = [TopicPartition(TOPIC, p) for p in sorted(await end_offsets(kafka, TOPIC))]
    order = [int(x) for x in args.workers.split(",")]
    rtts = [int(x) for x in args.rtt_ms.split(",")] if args.rtt_ms else [None]
    # every other round runs the whole plan backwards, so that neither end always meets a fresher stack
    plan = [(rtt, n) for r in range(args.rounds)
            for rtt in (rtts if r % 2 == 0 else rtts[::-1]) for n in (order if r % 2 == 0 else order[::-1])]
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    distance = Distance(stack) if args.rtt_ms else None
    warmup, runs, call_ms = [], [], {}
    try:
        if distance is not None:
            for rtt in sorted({r or 0 for r in rtts}):
                distance.set_rtt(rtt)
                call_ms[rtt] = distance.call_ms()
                print(f"{rtt} ms of round trip set: a Thrift1 call through the proxy takes {call_ms[rtt]} ms "
                      "(median)", flush=True)
        for _ in range(args.warmup):
            # a freshly started cluster's JVMs compile their hot paths during the first loads: the servers
            # spent 52.7 CPU-us per event on the first run of a fresh cluster and 14.0 on the sixth
            warmup.append(await one_run(stack, args, 1, total, tps, work, distance))
            print(f"warm-up, 1 worker (not counted): {warmup[-1]['events_per_s']:,} events/s, servers "
                  f"{warmup[-1]['servers_cpu_us_per_event']} CPU-us per event", flush=True)
        for at_rtt, n in plan:
            run = await one_run(stack, args, n, total, tps, work, distance, at_rtt or 0)
            runs.append(run)
            at = f" at {at_rtt} ms" if at_rtt is not None else ""
            print(f"{n} worker(s){at}: {run['events_per_s']:,} events/s ({run['events_per_s_first_to_last_commit']:,} "
                  f"first to last commit), worker CPU {run['cpu_s_workers']} s, servers {run['cpu_s_servers']} s, "
                  f"bound {run['bound_events_per_s']:,}/s ({run['of_bound']:.2f} of it)", flush=True)
    finally:
        if distance is not None:
            distance.stop()
    summary = _summary(runs)
    for s in summary:
        at = f" at {s['rtt_ms']} ms" if "rtt_ms" in s else ""
        print(f"median, {s['workers']} worker(s){at}: {s['events_per_s']:,.0f} events/s "
              f"(range {s['events_per_s_range']}), {s['of_bound']:.2f} of the CPU bound", flush=True)
    if distance is not None:
        for s in summary:
            zero = next((b for b in summary if b["workers"] == s["workers"] and b["rtt_ms"] == 0), None)
            if zero is not None and s["rtt_ms"]:
                s["of_0_ms"] = round(s["events_per_s"] / zero["events_per_s"], 2)
                print(f"{s['workers']} worker(s) at {s['rtt_ms']} ms: {s['of_0_ms']:.2f} x the events/s at 0 ms",
                      flush=True)
    return {"settings": {"concurrency": base.writer.concurrency, "max_batch_rows": base.writer.max_batch_rows,
                         "max_batch_age_ms": base.writer.max_batch_age_ms, "pool_size": base.hbase.pool_size},
            **({"rtt_ms": rtts, "thrift_call_ms": call_ms} if distance is not None else {}),
            "events": total, "partitions": args.partitions, "region_servers": len(topo.region_server_ports),
            "gateways": len(stack.gateways), "hdfs": topo.namenode is not None,
            "cores": os.cpu_count(), "date_utc": time.strftime("%Y-%m-%d %H:%M"),
            "summary": summary, "runs": runs, "warmup": warmup}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=600_000)
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--workers", default="1,2,3", help="worker counts, comma-separated, in the first round's order")
    p.add_argument("--rounds", type=int, default=2, help="rounds; every other one runs the counts in reverse")
    p.add_argument("--warmup", type=int, default=3,
                   help="uncounted 1-worker runs first, to warm the cluster's JVMs up")
    p.add_argument("--rtt-ms", default="",
                   help="round trips (whole ms, comma-separated, e.g. 0,1,5) between the workers and the gateways, "
                        "through latency proxies (Toxiproxy); every count of --workers runs at each")
    p.add_argument("--out", type=Path, default=RESULTS / "scale_out.json")
    ns = p.parse_args()
    result = asyncio.run(main(ns))
    ns.out.parent.mkdir(exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {ns.out}")
