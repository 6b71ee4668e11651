"""``python -m bench`` (``make bench``): every benchmark in turn, each writing bench/results/*.json.

Benchmarks compare against baselines measured in the same run (ratios), so their figures mean
something on any machine; absolute numbers depend on the cores shared with the local servers.
"""

from __future__ import annotations

import subprocess
import sys

BENCHES = [
    ["bench.bench_rowkey"],
    ["bench.bench_merge"],
    ["bench.bench_worker"],
    ["bench.bench_cdc"],
    ["bench.bench_columns"],
    ["bench.bench_reader"],
    ["bench.bench_backfill_rate"],
    ["bench.bench_peer"],
    ["bench.bench_gateway"],
]


def main() -> int:
    failed = 0
    for bench in BENCHES:
        print(f"== {bench[0]}", flush=True)
        failed += subprocess.run([sys.executable, "-m", *bench], check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
