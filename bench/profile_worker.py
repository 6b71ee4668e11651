"""Where the worker's CPU goes: a per-event profile of the ingest hot path for ``bench_worker``'s design.

Every figure is CPU time (user + system) in microseconds per event, never wall time: the machine is
shared with the stack's JVMs and other work, and CPU time is what a core can spend. Method:

1. **Pure stages, in isolation** (this process, one thread, ``time.thread_time``, the worker's GC
   tuning; the sample is frozen so that the collector does not walk it, as a worker holds only a
   bounded in-flight window), each run ``--reps`` times over the same ``--sample`` events of the
   design (``generate("logs")``, the events ``bench_worker`` produces) and reported as the median
   with its range:
   ``decode`` (``routing.loads``: orjson plus the big-integer check), ``key`` (the rowkey build),
   ``cells_and_validate`` (the route's mutation minus its key build: timestamp check, column reads
   and encoders, size checks, the Mutation; one generated function, :mod:`pipeline.core.routes.putgen`),
   ``route_total`` (``Router.route_run`` over runs of 625 records, the worker's per-partition share
   of a 5,000-record fetch over 8 partitions: decode + object check + mutation per record, in the
   compiled loop when it is built), ``route_total_python`` (the same with the compiled loop off: the
   sum of the three above plus the loop), ``route_each`` (``Router.route`` called per record, for
   comparison: not summed), ``locate`` (region lookup in a 16-region map: part of ``batch``, not
   summed), ``batch`` (``RegionBatcher.add_many`` per run with ``bench_worker``'s limits, locating
   included, then a drain), ``offsets`` (``OffsetTracker.register_run`` per run; ``ack_many`` per
   batch; one ``committable``).
2. **Thrift serialization of the real batches** those stages seal, both ways, in this process:
   ``thriftpy2`` (TPut/TColumnValue objects built as the client built them, then thriftpy2's
   binary protocol writing the call to a memory buffer; the objects' share is given too) and
   ``direct`` (:func:`connectors.hbase.putwire.encode_put_multiple`, compiled when built) and
   ``direct_python`` (its pure-Python form, :func:`~connectors.hbase.putwire.encode_python`).
3. **The client's write path** on a live table: the sealed batches written with ``HBaseClient.write``,
   8 at a time as the worker's writers do, per encoder, alternating; the process's CPU over the
   writes (``time.process_time``, all threads: the thread hop, pool, serialization, socket sends,
   reply parsing) and the HBase JVM's CPU (``/proc``), per event.
4. **Kafka fetch alone**: one aiokafka consumer reading the whole topic with no processing
   (``bench_worker``'s Kafka ceiling; the decoded records, as the worker takes them), this process's CPU per
   event.
5. **End to end**: ``bench_worker``'s worker child (its settings, its design, ``Worker.run`` from the
   earliest offset until every row is written and committed) on this run's own topic and a table
   recreated before each run, alternating three forms: the two put encoders (``[hbase]
   put_encoder``) with the compiled parts in use, and the direct encoder with none
   (``pure_python``: ``HBASE_INGEST_PURE_PYTHON=1``, :mod:`pipeline.compiled`); the
   child's ``getrusage`` CPU from after its imports to its end (start-up and group join included,
   the interpreter's start-up and imports not) per event, and the HBase JVM's CPU per event over the
   child's run (which counts whatever else the shared stack served meanwhile).

The *remainder* (end-to-end minus the sum of the in-process stages, Kafka fetch and the client's
write path) is what no stage accounts for: the worker's own per-record bookkeeping (origins,
statistics, in-flight accounting), the event loop and its task switches, commits, timers, the
collector's passes over the in-flight window, and the interference between them. Topic and table
names are unique to each run and dropped at the end. Results: ``bench/results/profile.json``;
``against_previous_run`` sets each median beside the one of the file it replaces.

    python -m bench.profile_worker [--events 1000000] [--runs 3] [--sample 100000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import orjson

import bench.bench_worker as bw
from bench.cpu import CpuMeter, hbase_cpu_seconds
from connectors.hbase import HBaseClient, putwire
from connectors.hbase.putwire import encode_put_multiple, encode_python, thriftpy2_message, tputs
from connectors.hbase.thrift2 import load_idl
from devstack import LocalStack
from devstack.settings import load_stack_settings
from pipeline.core.examples import generate
from pipeline.core.ingest.batcher import Batch, RegionBatcher
from pipeline.core.ingest.offsets import OffsetTracker
from pipeline.core.ingest.regions import Region, RegionMap
from pipeline.core.model import Mutation, Origin, TopicPartition
from pipeline.core.routes import router as routing
from pipeline.core.routes.router import Router, loads
from pipeline.rowkey.splits import split_points
from pipeline.runtime.process.proctune import tune_process
from pipeline.settings import Settings

RESULTS = Path(__file__).resolve().parent / "results"
ENCODERS = ("thriftpy2", "direct")  # the order of the first alternation
#: the worker's forms end to end: the put encoders with the compiled parts in use, and the direct
#: encoder with every compiled part off (``HBASE_INGEST_PURE_PYTHON=1`` in the child's environment)
FORMS = (*ENCODERS, "pure_python")
_RUN = 625  # records of one partition in one fetch: max_poll_records 5000 over 8 partitions


def _us(cpu_s: float, events: int) -> float:
    return round(cpu_s / events * 1e6, 3)


def _summary(samples: Sequence[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(samples), 3), "min": round(min(samples), 3),
            "max": round(max(samples), 3), "samples": [round(s, 3) for s in samples]}


def _timed(fn: Callable[[], object], events: int, reps: int) -> dict[str, Any]:
    """``fn``'s thread CPU per event, ``reps`` times."""
    out = []
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        out.append(_us(time.thread_time() - t0, events))
    return _summary(out)


def _names(run_id: str) -> tuple[str, str]:
    return f"profile-worker-{run_id}", f"profile_worker_{run_id}"


def _settings(topic: str, table: str, partitions: int) -> Settings:
    """``bench_worker``'s settings and design on this run's own topic and table."""
    bw.TOPIC, bw.TABLE = topic, table
    return bw.bench_settings(partitions)


# -- 1 and 2: in-process stages ----------------------------------------------------------------------


class _Record:
    """What the router reads of a consumed record (aiokafka's records are plain attribute objects too)."""

    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(self, offset: int, value: bytes) -> None:
        self.offset, self.value = offset, value
        self.key: bytes | None = None
        self.timestamp = 0
        self.headers: tuple[tuple[str, bytes], ...] = ()


def pure_stages(settings: Settings, n: int, reps: int) -> tuple[dict[str, Any], list[Batch]]:
    router = Router(settings.routes, settings.writer.max_key_bytes, settings.writer.max_cell_bytes)
    route = router.routes[0]
    topic = route.spec.topic
    tp = TopicPartition(topic, 0)
    origins = [Origin(tp, i) for i in range(n)]
    values = [orjson.dumps(e) for _, e in generate("logs", n)]
    events = [loads(v) for v in values]
    records = [_Record(o.offset, v) for o, v in zip(origins, values, strict=True)]
    build, mutation = route.rowkey.build, route.mutation
    rows = [build(e) for e in events]
    muts: list[Mutation] = [m for v, o in zip(values, origins, strict=True) for m in router.route(topic, v, o)]
    splits = split_points(route.rowkey, 16, rows)
    starts = [b"", *splits]
    ends = [*splits, b""]
    rmap = RegionMap(Region(route.table, s, e, "rs:16020", f"r{i}", i)
                     for i, (s, e) in enumerate(zip(starts, ends, strict=True)))
    w = settings.writer
    # the sample is long-lived here, not in the worker (which holds a bounded in-flight window):
    # frozen, the collector does not walk it on every full pass the stages' allocations trigger
    gc.collect()
    gc.freeze()

    runs = [records[i:i + _RUN] for i in range(0, n, _RUN)]
    maps = {route.table: rmap}

    def batch() -> list[Batch]:
        batcher = RegionBatcher(w.max_batch_rows, w.max_batch_bytes, w.max_batch_age_ms, w.batch_by)
        out = []
        for i in range(0, n, _RUN):
            out.extend(batcher.add_many(muts[i:i + _RUN], maps, 0))
        out.extend(batcher.drain())
        return out

    batches = batch()

    offs = [o.offset for o in origins]

    def offsets() -> None:
        tracker = OffsetTracker()
        for i in range(0, n, _RUN):
            tracker.register_run(tp, offs[i:i + _RUN], 1)
        for b in batches:
            tracker.ack_many(b.origins())
        tracker.committable()

    stages = {
        "decode": _timed(lambda: [loads(v) for v in values], n, reps),
        "key": _timed(lambda: [build(e) for e in events], n, reps),
        "mutation": _timed(lambda: [mutation(e, o) for e, o in zip(events, origins, strict=True)], n, reps),
        "route_total": _timed(lambda: [router.route_run(tp, run, 0, len(run)) for run in runs], n, reps),
        "route_total_python": _timed(lambda: _pure_python_runs(router, tp, runs), n, reps),
        "route_each": _timed(lambda: [router.route(topic, v, o) for v, o in zip(values, origins, strict=True)],
                             n, reps),
        "locate": _timed(lambda: rmap.locate_many([m.row for m in muts]), n, reps),
        "batch": _timed(batch, n, reps),
        "offsets": _timed(offsets, n, reps),
    }
    cells = [m - k for m, k in zip(stages["mutation"]["samples"], stages["key"]["samples"], strict=True)]
    stages["cells_and_validate"] = _summary(cells)
    return stages, batches


def _pure_python_runs(router: Router, tp: TopicPartition, runs: list[list[_Record]]) -> None:
    """``route_run`` over ``runs`` with the compiled loop off: its pure-Python form."""
    compiled, routing._ROUTERUN = routing._ROUTERUN, None
    try:
        for run in runs:
            router.route_run(tp, run, 0, len(run))
    finally:
        routing._ROUTERUN = compiled


def serialization(batches: list[Batch], table: bytes, n: int, reps: int) -> dict[str, Any]:
    idl = load_idl()

    def thriftpy2() -> None:
        for b in batches:
            thriftpy2_message(idl, table, b.mutations)

    def direct() -> None:
        for b in batches:
            encode_put_multiple(table, b.mutations)

    def direct_python() -> None:
        for b in batches:
            encode_python(table, b.mutations)

    thriftpy2()  # warm them (caches, allocator) before the clock
    direct()
    direct_python()
    out: dict[str, Any] = {
        "thriftpy2": _timed(thriftpy2, n, reps), "direct": _timed(direct, n, reps),
        "direct_python": _timed(direct_python, n, reps),
        "thriftpy2_objects_only": _timed(lambda: [tputs(idl, b.mutations) for b in batches], n, reps)}
    out["ratio_direct_over_thriftpy2"] = round(out["direct"]["median"] / out["thriftpy2"]["median"], 3)
    return out


# -- 3 and 4: live stages ----------------------------------------------------------------------------


async def write_path(settings: Settings, stack: LocalStack, batches: list[Batch], n: int,
                     reps: int) -> dict[str, Any]:
    """``HBaseClient.write`` of the sealed batches, 8 at a time, per encoder, alternating."""
    table = settings.routes[0].table
    cpu: dict[str, list[float]] = {e: [] for e in ENCODERS}
    jvm: dict[str, list[float]] = {e: [] for e in ENCODERS}
    for _ in range(reps):
        for encoder in ENCODERS:
            async with HBaseClient(settings.hbase.model_copy(update={"put_encoder": encoder})) as hb:
                await hb.write(table, batches[0].mutations[:10])  # connections open before the clock
                queue = list(reversed(batches))

                async def writer(hb: HBaseClient = hb, queue: list[Batch] = queue) -> None:
                    while queue:
                        b = queue.pop()
                        await hb.write(table, b.mutations)

                j0, t0 = hbase_cpu_seconds(stack), time.process_time()
                async with anyio.create_task_group() as tg:
                    for _ in range(settings.writer.concurrency):
                        tg.start_soon(writer)
                cpu[encoder].append(_us(time.process_time() - t0, n))
                jvm[encoder].append(_us(hbase_cpu_seconds(stack) - j0, n))
    return {e: {"process": _summary(cpu[e]), "hbase_jvm": _summary(jvm[e])} for e in ENCODERS}


def _without_serialization(writes: dict[str, Any], ser: dict[str, Any]) -> dict[str, float]:
    """The client's write path minus its serialization: thread hand-off, pool, socket, reply."""
    return {e: round(writes[e]["process"]["median"] - ser[e]["median"], 3) for e in ENCODERS}


async def kafka_fetch(settings: Settings, total: int) -> dict[str, Any]:
    t0 = time.process_time()
    rate = await bw.ceiling_kafka(settings, total)
    return {"process": _us(time.process_time() - t0, total), "records_per_s": round(rate)}


# -- 5: end to end -------------------------------------------------------------------------------------


def end_to_end(stack: LocalStack, topic: str, table: str, partitions: int, encoder: str,
               tree: Path | None = None) -> dict[str, Any]:
    """One ``bench_worker`` worker child in the form ``encoder`` (one of :data:`FORMS`: a put encoder,
    or ``pure_python``: the direct encoder with no compiled part), on a freshly recreated table; run
    from the source tree ``tree`` (another checkout of this repository) when given, else from this one."""
    settings = _settings(topic, table, partitions)
    asyncio.run(bw._recreate_table(settings))
    meter = CpuMeter(stack)
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    if encoder == "pure_python":
        env["HBASE_INGEST_PURE_PYTHON"] = "1"
    put_encoder = "direct" if encoder == "pure_python" else encoder
    out = subprocess.run([sys.executable, "-m", "bench.profile_worker", "--child", "--topic", topic, "--table", table,
                          "--partitions", str(partitions), "--encoder", put_encoder],
                         capture_output=True, text=True, cwd=tree, env=env)
    if out.returncode:
        raise RuntimeError(f"the worker child ({encoder}) failed with exit {out.returncode}: {out.stderr[-3000:]}")
    cpu = meter.stop()
    child = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    child.pop("timeline_s_rssmb_inflight_consumed", None)
    events = int(child["events"])
    return {"encoder": encoder, "events": events, "rows": child["rows"], "worker_cpu_s": child["cpu_s"],
            "worker_run_cpu_s": child["run_cpu_s"], "worker_us_per_event": _us(child["run_cpu_s"], events),
            "hbase_jvm_us_per_event": _us(cpu["hbase_jvm"], events),
            "events_per_s": round(child["events_per_s"]), "wall_s": round(child["wall_s"], 1),
            "peak_rss_mb": round(child["peak_rss_mb"])}


def _child(topic: str, table: str, partitions: int, encoder: str) -> dict[str, Any]:
    """``bench_worker``'s worker child on ``topic``/``table`` with ``encoder``, plus ``run_cpu_s``: its
    CPU from after the imports to the end (its own ``cpu_s`` counts the interpreter's start-up and
    imports too, about a second, rounded to 0.1 s)."""
    import pipeline.runtime.ingest.worker  # noqa: F401  (bench_worker's child imports it late)

    os.environ["HBASE_INGEST_HBASE__PUT_ENCODER"] = encoder  # the worker's settings read it
    _settings(topic, table, partitions)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    out = asyncio.run(bw._child(partitions))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    out["run_cpu_s"] = round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 3)
    return out


async def _produce(settings: Settings, topic: str, n: int, partitions: int) -> int:
    from connectors.kafka import KafkaBroker
    from pipeline.runtime.produce import produce_events

    return await produce_events(KafkaBroker(settings.kafka), topic, generate("logs", n), partitions=partitions)


async def _drop(settings: Settings, topic: str) -> None:
    from connectors.kafka import delete_topics

    async with HBaseClient(settings.hbase) as hb:
        if settings.routes[0].table in await hb.tables():
            await hb.delete_table(settings.routes[0].table)
    await delete_topics(settings.kafka, [topic])


def against_previous(previous: dict[str, Any], stages: dict[str, Any], e2e: dict[str, Any]) -> dict[str, Any]:
    """Each stage's median and the worker's end-to-end median (direct encoder) of the previous results
    file beside this run's: ``[previous, now]``, with the previous run's start, to show what changed
    in the code between two runs (both runs' machine load is in their files)."""
    before = previous.get("stages_in_process", {})
    out: dict[str, Any] = {"previous_started_utc": previous.get("started_utc")}
    for name, now in stages.items():
        if name in before:
            out[name] = [before[name]["median"], now["median"]]
    prev_e2e = previous.get("end_to_end", {}).get("by_encoder", {}).get("direct")
    if prev_e2e:
        out["worker_end_to_end_direct"] = [prev_e2e["worker_us_per_event"]["median"],
                                           e2e["direct"]["worker_us_per_event"]["median"]]
    return out


def main(args: argparse.Namespace) -> dict[str, Any]:
    stack = LocalStack.recorded(load_stack_settings(None))  # the running shape: one JVM or a cluster
    stack.up()
    topic, table = _names(uuid.uuid4().hex[:8])
    settings = _settings(topic, table, args.partitions)
    tune_process(settings.runtime)  # the worker's GC tuning, as bench_worker's child applies it
    load = {"start": os.getloadavg()}
    started = time.time()
    try:
        sent = asyncio.run(_produce(settings, topic, args.events, args.partitions))
        print(f"produced {sent} events to {topic}", flush=True)
        n = min(args.sample, sent)
        stages, batches = pure_stages(settings, n, args.reps)
        print(json.dumps({k: v["median"] for k, v in stages.items()}), flush=True)
        ser = serialization(batches, table.encode(), n, args.reps)
        print(f"serialization: thriftpy2 {ser['thriftpy2']['median']} direct {ser['direct']['median']} us/event",
              flush=True)
        asyncio.run(bw._recreate_table(settings))
        writes = asyncio.run(write_path(settings, stack, batches, n, args.reps))
        print(json.dumps({e: v["process"]["median"] for e, v in writes.items()}), flush=True)
        fetch = asyncio.run(kafka_fetch(settings, sent))
        print(f"kafka fetch: {fetch['process']} us/event", flush=True)
        runs = []
        for i in range(args.runs):
            for form in (FORMS if i % 2 == 0 else FORMS[::-1]):
                runs.append(end_to_end(stack, topic, table, args.partitions, form))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        asyncio.run(_drop(settings, topic))
    load["end"] = os.getloadavg()
    e2e = {e: {k: _summary([r[k] for r in runs if r["encoder"] == e])
               for k in ("worker_us_per_event", "hbase_jvm_us_per_event", "events_per_s")} for e in FORMS}
    in_process = sum(stages[k]["median"] for k in ("route_total", "batch", "offsets"))
    remainder = {}
    for e in ENCODERS:
        accounted = in_process + writes[e]["process"]["median"] + fetch["process"]
        remainder[e] = round(e2e[e]["worker_us_per_event"]["median"] - accounted, 3)
    return {
        "method": __doc__.split("\n\n    python")[0] if __doc__ else "",
        "unit": "CPU microseconds per event (user + system), medians with ranges",
        "events": sent, "sample_events": n, "reps": args.reps, "runs_per_encoder": args.runs,
        "partitions": args.partitions, "cores": os.cpu_count(), "load_average_1_5_15": load,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "compiled_parts_in_use": {"routing": routing._ROUTERUN is not None, "put_encoder": putwire.COMPILED},
        "stages_in_process": stages, "serialization": ser, "client_write_path": writes,
        "client_write_path_minus_serialization": _without_serialization(writes, ser), "kafka_fetch": fetch,
        "end_to_end": {"runs": runs, "by_encoder": e2e},
        "remainder_not_in_any_stage": remainder,
        "before_after": {  # before: thriftpy2's objects; after: connectors.hbase.putwire
            "serialization": [ser["thriftpy2"]["median"], ser["direct"]["median"]],
            "client_write_path": [writes["thriftpy2"]["process"]["median"], writes["direct"]["process"]["median"]],
            "worker_end_to_end": [e2e["thriftpy2"]["worker_us_per_event"]["median"],
                                  e2e["direct"]["worker_us_per_event"]["median"]]},
        "compiled_against_pure_python": {  # the compiled parts' own share: [pure Python, compiled]
            "route_total": [stages["route_total_python"]["median"], stages["route_total"]["median"]],
            "serialization_direct": [ser["direct_python"]["median"], ser["direct"]["median"]],
            "worker_end_to_end": [e2e["pure_python"]["worker_us_per_event"]["median"],
                                  e2e["direct"]["worker_us_per_event"]["median"]]},
        "ratio_end_to_end_direct_over_thriftpy2": round(
            e2e["direct"]["worker_us_per_event"]["median"] / e2e["thriftpy2"]["worker_us_per_event"]["median"], 3),
        "against_previous_run": against_previous(args.previous, stages, e2e),
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--sample", type=int, default=100_000, help="events of the in-process stages")
    p.add_argument("--reps", type=int, default=5, help="repetitions of each in-process stage")
    p.add_argument("--runs", type=int, default=3, help="end-to-end runs per form, alternating")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--child", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--table")
    p.add_argument("--encoder", choices=ENCODERS, default="direct")
    ns = p.parse_args()
    if ns.child:
        print(json.dumps(_child(ns.topic, ns.table, ns.partitions, ns.encoder)))
    else:
        previous = RESULTS / "profile.json"
        ns.previous = json.loads(previous.read_text()) if previous.exists() else {}
        res = main(ns)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "profile.json").write_text(json.dumps(res, indent=2) + "\n")
