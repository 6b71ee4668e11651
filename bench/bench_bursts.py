"""Why a worker below saturation pays more CPU per event than a saturated one: the same routing work,
back to back against in bursts.

A saturated worker routes record after record with its code and data hot in the CPU's caches. Below
saturation it routes one fetch's records, then sleeps until the next fetch; meanwhile the other
processes of the machine (Kafka, HBase, the producer) run on the same cores and evict what the
worker's interpreter had in cache, so each burst starts cold. This measures that effect alone, with
no I/O: ``Router.route_run`` (``bench_worker``'s design and ``logs`` events, runs of 190 records as
the worker's per-partition share of a fetch over 8 partitions) in this process, one thread,
``time.thread_time`` CPU per record:

- ``busy``: bursts back to back, for ``--seconds``;
- ``burst_<ms>``: one burst of ``--burst`` records, then a sleep of ``ms`` (a fetch interval), for
  ``--seconds``.

Run it on the running local stack, idle: its JVMs are the neighbours a worker has.

Forms alternate, ``--runs`` times each; medians with ranges. Results: ``bench/results/bursts.json``.

    python -m bench.bench_bursts [--seconds 6] [--runs 3] [--burst 1500] [--sleeps 100,250,500]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

import orjson

from bench.profile_worker import RESULTS, _Record, _settings, _summary
from pipeline.core.examples import generate
from pipeline.core.model import TopicPartition
from pipeline.core.routes.router import Router

RUN = 190  # records per partition run: a 1,500-record fetch over 8 partitions


def _router() -> tuple[Router, TopicPartition, list[_Record]]:
    settings = _settings("bursts", "bursts", 8)
    router = Router(settings.routes, settings.writer.max_key_bytes, settings.writer.max_cell_bytes)
    tp = TopicPartition(router.routes[0].spec.topic, 0)
    records = [_Record(i, orjson.dumps(e)) for i, (_, e) in enumerate(generate("logs", 20_000, seed=3))]
    gc.collect()
    gc.freeze()
    return router, tp, records


def measure(router: Router, tp: TopicPartition, records: list[_Record], burst: int, sleep_ms: int | None,
            seconds: float) -> float:
    """CPU-us per record routed in bursts of ``burst`` (None: no sleep between bursts)."""
    start, cpu0, done, at = time.perf_counter(), time.thread_time(), 0, 0
    while time.perf_counter() - start < seconds:
        left = burst
        while left:
            n = min(RUN, left, len(records) - at)
            run = records[at:at + n]
            router.route_run(tp, run, 0, n)
            left -= n
            done += n
            at = (at + n) % len(records)
        if sleep_ms is not None:
            time.sleep(sleep_ms / 1000)
    return (time.thread_time() - cpu0) / done * 1e6


def main(args: argparse.Namespace) -> dict[str, Any]:
    router, tp, records = _router()
    sleeps = [int(s) for s in args.sleeps.split(",")]
    forms: dict[str, int | None] = {"busy": None} | {f"burst_{s}ms": s for s in sleeps}
    samples: dict[str, list[float]] = {name: [] for name in forms}
    measure(router, tp, records, args.burst, None, 1.0)  # warm-up
    for i in range(args.runs):
        for name in (list(forms) if i % 2 == 0 else list(forms)[::-1]):
            samples[name].append(round(measure(router, tp, records, args.burst, forms[name], args.seconds), 3))
            print(json.dumps({name: samples[name][-1]}), flush=True)
    busy = _summary(samples["busy"])["median"]
    result = {"unit": "CPU-us per record routed (route_run)", "burst_records": args.burst, "run_records": RUN,
              "seconds_per_sample": args.seconds, "runs": args.runs,
              "forms": {name: _summary(v) for name, v in samples.items()},
              "ratio_to_busy": {name: round(_summary(v)["median"] / busy, 2) for name, v in samples.items()}}
    (RESULTS / "bursts.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burst", type=int, default=1500)
    parser.add_argument("--sleeps", default="100,250,500")
    print(json.dumps(main(parser.parse_args())["ratio_to_busy"]))
