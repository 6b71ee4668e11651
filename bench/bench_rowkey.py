"""Keys built per second on one core, for two designs, against baselines measured in the same run.

Designs:
- salted: ``[salt(user_id, 16)][user_id][long(ts)][order_id]``
- log:    ``[hostname][log_event][reverse_ts(timestamp)]``

For each design we time, over the same pre-generated events:
- ``generated``: the compiled ``RowKey.build`` (the method, as the worker calls it);
- ``generated_fn``: the generated function itself (``RowKey.builder``), without the method call;
- ``interpretive``: the reference interpreter (``RowKey.build_reference``), which walks the
  segments per event as a straightforward implementation would;
- ``handwritten``: a hand-written function for that one design (the best a programmer would write
  by hand without type checks).

Figures go to ``bench/results/rowkey.json`` and stdout. Ratios are relative to the interpretive
and hand-written baselines. Run: ``.venv/bin/python bench/bench_rowkey.py``.
"""

from __future__ import annotations

import cProfile
import io
import json
import platform
import pstats
import random
import struct
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mmh3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.rowkey import compile_rowkey

N_EVENTS = 50_000
REPEATS = 7
TARGET = 1_000_000
RESULTS = Path(__file__).resolve().parent / "results" / "rowkey.json"

_pack_q = struct.Struct(">q").pack
_MAX = (1 << 63) - 1


def _salted_by_hand(e: Mapping[str, Any]) -> bytes:
    u: bytes = e["user_id"].encode()
    order: bytes = e["order_id"].encode()
    return bytes((mmh3.hash(u, 0, False) % 16,)) + u + _pack_q(e["ts"]) + order


def _log_by_hand(e: Mapping[str, Any]) -> bytes:
    return f"{e['hostname']}{e['log_event']}".encode() + _pack_q(_MAX - e["timestamp"])


def _events(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    salted = [
        {
            "user_id": f"user{rnd.randrange(10**6)}",
            "ts": 1_700_000_000_000 + rnd.randrange(10**9),
            "order_id": f"o{rnd.randrange(10**9)}",
        }
        for _ in range(N_EVENTS)
    ]
    log = [
        {
            "hostname": f"host{rnd.randrange(500)}",
            "log_event": rnd.choice(["login", "error", "gc"]),
            "timestamp": 1_700_000_000_000 + rnd.randrange(10**9),
        }
        for _ in range(N_EVENTS)
    ]
    return salted, log


def _rate(fn: Callable[[Mapping[str, Any]], bytes], events: list[dict[str, Any]]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for e in events:
            fn(e)
        best = min(best, time.perf_counter() - t0)
    return len(events) / best


def _profile(fn: Callable[[Mapping[str, Any]], bytes], events: list[dict[str, Any]]) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for e in events:
        fn(e)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(8)
    return out.getvalue()


def main() -> dict[str, Any]:
    salted_events, log_events = _events(7)
    designs = {
        "salted": (
            "[salt(user_id, 16)][user_id][long(ts)][order_id]",
            salted_events,
            _salted_by_hand,
        ),
        "log": ("[hostname][log_event][reverse_ts(timestamp)]", log_events, _log_by_hand),
    }
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "events": N_EVENTS,
        "repeats": REPEATS,
        "unit": "keys per second, one core, best of repeats",
        "designs": {},
    }
    for name, (spec, events, by_hand) in designs.items():
        rk = compile_rowkey(spec)
        for e in events[:1000]:
            assert rk.build(e) == rk.build_reference(e) == by_hand(e), (name, e)
        rates = {
            "generated": _rate(rk.build, events),
            "generated_fn": _rate(rk.builder, events),
            "interpretive": _rate(rk.build_reference, events),
            "handwritten": _rate(by_hand, events),
        }
        entry: dict[str, Any] = {
            "spec": spec,
            "keys_per_s": {k: round(v) for k, v in rates.items()},
            "speedup_vs_interpretive": round(rates["generated"] / rates["interpretive"], 2),
            "ratio_vs_handwritten": round(rates["generated"] / rates["handwritten"], 2),
            "meets_target": rates["generated"] >= TARGET,
        }
        if rates["generated"] < TARGET:
            entry["profile"] = _profile(rk.build, events)
        report["designs"][name] = entry
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    result = main()
    for name, entry in result["designs"].items():
        rates = entry["keys_per_s"]
        print(f"{name:7s} {entry['spec']}")
        for k, v in rates.items():
            print(f"        {k:13s} {v:>12,} keys/s")
        print(
            f"        generated vs interpretive x{entry['speedup_vs_interpretive']}, "
            f"vs handwritten x{entry['ratio_vs_handwritten']}, "
            f"target {TARGET:,}/s {'met' if entry['meets_target'] else 'NOT met'}"
        )
        if "profile" in entry:
            print(entry["profile"])
    print("written to bench/results/rowkey.json")
