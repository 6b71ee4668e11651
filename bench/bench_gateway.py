"""What the Thrift gateway costs HBase per row, and what its server settings change: hbase-ingest
through gateways in their own JVMs beside the one-JVM stack, against the BufferedMutator loader.

In the one-JVM stack the gateways share the HBase JVM, so ``bench_peer``'s "HBase JVM CPU per row"
adds the region server's work and the gateway's (decoding the Thrift call, building the client's
``Put`` objects, the HBase client's own RPC to the region server), while a native client such as
Flink's sink or the loader does its client side in its own process. Here each configuration gets a
gateway JVM of its own (``HBaseStack gateway`` with HBase's Thrift server options, a plain client of
the stack's ZooKeeper, heap :data:`GATEWAY_HEAP_MB`), so the two parts are measured apart:

- ``buffered``: the stack's setting (thread-pool server, binary protocol, buffered transport);
- ``framed``: ``-f``, the same server with framed transport;
- ``compact``: ``-c -f``, compact protocol, framed (the worker then encodes its puts with thriftpy2:
  :func:`connectors.hbase.putwire.direct_puts` writes the binary protocol only);
- ``hsha``: ``-hsha -f``, the half-sync/half-async server (framed, as it requires).

One topic of ``logs`` events is produced once and the design's rows prebuilt. Per round, in turn:
hbase-ingest (``bench_worker``'s settings and design, a fresh group and 16-region table) through each
configuration's gateway, then the loader writing the prebuilt rows natively. Every table's rows are
counted. The first round warms the gateways' JIT (fresh JVMs; the stack's gateway is warm in a
long-running stack) and is reported apart, not in the medians.

Per run: events/s from the first write to the last, the worker's CPU-us per event after its first
write, the stack JVM's CPU-us per row (the region server: the stack's own gateways are idle) and the
run's gateway JVM's CPU-us per row; per loader run the stack JVM's CPU-us per row. Medians with their
ranges, and each configuration's (region server + gateway) / the loader's region server. Results go
to bench/results/gateway.json (``--out`` elsewhere, ``--no-save`` nowhere).

    python -m bench.bench_gateway [--events 500000] [--rounds 3] [--configs buffered,framed,compact,hsha]
                                  [--batch-rows 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import platform
import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

from devstack import HBASE_VERSION
from devstack.launch import gateway_argv
from devstack.processes import port_in_use, tail
from devstack.provision import ensure_launcher

from .bench_peer import RESULTS, PeerBench, free_port, machine, positive_ints, save
from .cpu import cpu_seconds
from .peer_procs import load_average
from .peer_summary import figures, spread, spread_text

__all__ = ["CONFIGS", "GatewayConfig", "gateway_table", "summarize_gateway"]

GATEWAY_HEAP_MB = 512
START_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A gateway's Thrift server ``options`` and the client settings that speak to it."""

    options: tuple[str, ...]
    transport: str
    protocol: str

    def env(self, thrift1: int, thrift2: int, batch_rows: int | None = None) -> dict[str, str]:
        """The worker child's settings for a gateway on ``thrift1``/``thrift2`` (and batches of at most
        ``batch_rows`` rows: the rows per call), as environment."""
        env = {"HBASE_INGEST_HBASE__PORT": str(thrift1), "HBASE_INGEST_HBASE__THRIFT2_PORT": str(thrift2),
               "HBASE_INGEST_HBASE__TRANSPORT": self.transport, "HBASE_INGEST_HBASE__PROTOCOL": self.protocol}
        if batch_rows is not None:
            env["HBASE_INGEST_WRITER__MAX_BATCH_ROWS"] = str(batch_rows)
        return env


CONFIGS: dict[str, GatewayConfig] = {
    "buffered": GatewayConfig((), "buffered", "binary"),
    "framed": GatewayConfig(("-f",), "framed", "binary"),
    "compact": GatewayConfig(("-c", "-f"), "framed", "compact"),
    "hsha": GatewayConfig(("-hsha", "-f"), "framed", "binary"),
}

#: the figures per configuration, in the table's order
METRICS = {
    "events_per_s_first_to_last": "events/s, first write to last",
    "worker_cpu_us_per_event": "worker CPU-us per event after the first write",
    "region_server_cpu_us_per_row": "region server (stack JVM) CPU-us per row",
    "gateway_cpu_us_per_row": "gateway JVM CPU-us per row",
    "hbase_side_cpu_us_per_row": "region server + gateway CPU-us per row",
}


def run_figures(run: Mapping[str, Any]) -> dict[str, float]:
    """The :data:`METRICS` of one hbase-ingest run recorded by :func:`main`."""
    base = figures(run)
    rows = int(run["rows"])
    gateway = run["gateway_cpu_s"] * 1e6 / rows
    return {"events_per_s_first_to_last": base["events_per_s_first_to_last"],
            "worker_cpu_us_per_event": base["process_cpu_us_per_event_after_first_write"],
            "region_server_cpu_us_per_row": base["hbase_cpu_us_per_row"],
            "gateway_cpu_us_per_row": gateway,
            "hbase_side_cpu_us_per_row": base["hbase_cpu_us_per_row"] + gateway}


def summarize_gateway(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians (min, max) of :data:`METRICS` per configuration and of the loader's region-server CPU
    per row, over the runs not marked ``warmup``; and per configuration ``over_loader``: its median
    region server + gateway CPU per row over the loader's median. Raises ValueError without a
    measured loader run or configuration run."""
    measured = [r for r in runs if not r.get("warmup")]
    loader = [figures(r)["hbase_cpu_us_per_row"] for r in measured if r["system"] == "loader"]
    if not loader:
        raise ValueError("no measured loader run: the comparison needs one")
    per_config: dict[str, list[dict[str, float]]] = {}
    for r in measured:
        if r["system"] == "hbase-ingest":
            per_config.setdefault(r["config"], []).append(run_figures(r))
    if not per_config:
        raise ValueError("no measured hbase-ingest run")
    out: dict[str, Any] = {"loader": {"region_server_cpu_us_per_row": spread(loader)}}
    floor = statistics.median(loader)
    for name, figs in per_config.items():
        summary: dict[str, Any] = {m: spread([f[m] for f in figs]) for m in METRICS}
        summary["over_loader"] = summary["hbase_side_cpu_us_per_row"]["median"] / floor
        out[name] = summary
    return out


def gateway_table(summary: Mapping[str, Any], events: int, measured_rounds: int) -> str:
    """The summary as a Markdown table: a column per configuration (in the order they ran), median
    (min-max) per figure, then the loader's region-server CPU per row and each configuration's ratio
    to it."""
    configs = [c for c in summary if c != "loader"]

    def cell(s: Mapping[str, float]) -> str:
        return spread_text(s, 0 if s["median"] >= 1000 else 1)

    head = [f"{events:,} events, {measured_rounds} measured rounds", *configs]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for metric, text in METRICS.items():
        lines.append("| " + " | ".join([text, *(cell(summary[c][metric]) for c in configs)]) + " |")
    loader = summary["loader"]["region_server_cpu_us_per_row"]
    lines.append(f"| loader's region server CPU-us per row: {cell(loader)} | "
                 + " | ".join(f"{summary[c]['over_loader']:.2f} x" for c in configs) + " |")
    return "\n".join(lines)


class Gateway:
    """One gateway JVM with a configuration's options, on two free ports; a context manager that
    starts it (waiting until both ports accept) and stops it."""

    def __init__(self, bench: PeerBench, name: str, config: GatewayConfig) -> None:
        self.name, self.config = name, config
        self.thrift1, self.thrift2 = free_port(), free_port()
        self.log = bench.work / f"gateway-{name}.log"
        self.argv = gateway_argv(bench.stack.layout, GATEWAY_HEAP_MB, self.thrift1, self.thrift2,
                                 config.options, ensure_launcher(bench.stack.layout))
        self.proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    def __enter__(self) -> Gateway:
        self._out = open(self.log, "wb")  # closed in __exit__
        self.proc = subprocess.Popen(self.argv, stdout=self._out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (port_in_use(self.thrift1) and port_in_use(self.thrift2)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the {self.name} gateway did not start; its log ends:\n{tail(self.log)}")
            time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._out is not None:
            self._out.close()

    def cpu(self) -> float:
        assert self.proc is not None
        return cpu_seconds(self.proc.pid)


def main(args: argparse.Namespace) -> dict[str, Any]:
    bench = PeerBench(args)
    bench.check_stack()
    if len(bench.stack.hbase_pids()) != 1:
        raise SystemExit("this benchmark needs the one-JVM stack (`hbase-ingest stack up`), where the "
                         "stack JVM's CPU is the region server's")
    load_start = load_average()
    runs: list[dict[str, Any]] = []
    ok = False
    try:
        with contextlib.ExitStack() as running:
            started = [running.enter_context(Gateway(bench, name, CONFIGS[name])) for name in args.configs]
            produced = bench.produce()
            print(f"produced {produced['events']:,} events of {produced['mean_event_bytes']} bytes "
                  f"in {produced['produce_s']} s", flush=True)
            rows_file = bench.prebuild()
            number = 0
            for round_ in range(args.rounds):
                prefix = f"round {round_}" + (" (warm-up)" if round_ == 0 else "")
                for g, rows in itertools.product(started, args.batch_rows):
                    def step(g: Gateway = g, run: int = number, rows: int = rows) -> dict[str, Any]:
                        before = g.cpu()
                        out = bench.run_ingest(run, env=g.config.env(g.thrift1, g.thrift2, rows))
                        return {**out, "gateway_cpu_s": g.cpu() - before}
                    name = g.name if len(args.batch_rows) == 1 else f"{g.name}, {rows:,} rows"
                    bench.record(step, prefix, runs, config=name, batch_rows=rows, round=round_,
                                 warmup=round_ == 0)
                    number += 1
                bench.record(partial(bench.run_loader, number, rows_file), prefix, runs,
                             round=round_, warmup=round_ == 0)
                number += 1
            ok = True
    finally:
        bench.finish(ok)
    summary = summarize_gateway(runs)
    return {
        "events": produced["events"], "rounds": args.rounds, "warmup_rounds": 1, "partitions": args.partitions,
        "mean_event_bytes": produced["mean_event_bytes"], "regions": 16,
        "configs": {n: {"server_options": list(CONFIGS[n].options), "transport": CONFIGS[n].transport,
                        "protocol": CONFIGS[n].protocol} for n in args.configs},
        "batch_rows": args.batch_rows, "gateway_heap_mb": GATEWAY_HEAP_MB,
        "versions": {"hbase": HBASE_VERSION, "python": platform.python_version()},
        "machine": machine(load_start),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summary,
        "runs": runs,
        "table_markdown": gateway_table(summary, produced["events"], args.rounds - 1),
    }


def _configs(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"configurations among {', '.join(CONFIGS)}; unknown: {unknown}")
    return names


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=500_000)
    p.add_argument("--rounds", type=int, default=3, help="rounds, the first a warm-up (default 3)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--configs", type=_configs, default=list(CONFIGS), help="default: all")
    p.add_argument("--batch-rows", type=positive_ints, default=[2000],
                   help="the worker's max_batch_rows, the rows per call; a run per value and configuration "
                        "(default 2000, bench_worker's)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=RESULTS / "gateway.json")
    where.add_argument("--no-save", action="store_true")
    ns = p.parse_args()
    if ns.rounds < 2 or ns.events < 16:
        p.error("--rounds must be at least 2 (the first warms up) and --events at least 16")
    save(main(ns), ns)
