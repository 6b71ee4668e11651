"""CPU of the reader's merge on one core, against a per-row heap merge measured in the same run.

16 sources (salt buckets) of 1,000,000 rows in all, in pages of 1,000, merged by the key without its
one-byte salt, two ways:

- ``batch``: what the reader does (:func:`pipeline.runtime.read.merge.merge_batches` driving a
  :class:`~pipeline.core.merge.PageMerge`, then :func:`~pipeline.core.merge.merge_pieces`);
- ``heap``: the textbook per-row k-way merge (:func:`pipeline.core.merge.heap_merge`, ``heapq``
  with one push and pop per row) over the same pages.

Two key layouts, because the merge's cost depends on how the buckets' keys interleave:

- ``interleaved``: the salt is a hash of the whole key (``[salt(order_id, 16)][order_id]``), so
  consecutive rows in the merged order come from different buckets almost every time;
- ``entities``: the salt is a hash of a leading field with 1,000 values
  (``[salt(host, 16)][host][_][reverse_ts(ts)]``, the reader benchmark's design), so a bucket holds
  whole hosts and the merged order takes long runs from one bucket.

Both merges' outputs are checked equal. Figures (best of 3, process CPU seconds) go to
``bench/results/merge.json``. Run: ``.venv/bin/python -m bench.bench_merge``. No servers needed.
"""

from __future__ import annotations

import asyncio
import json
import operator
import platform
import random
import time
from itertools import chain
from pathlib import Path
from typing import Any

from pipeline.core.merge import heap_merge
from pipeline.runtime.read.merge import Row, merge_batches, merge_pieces

RESULTS = Path(__file__).resolve().parent / "results" / "merge.json"
ROWS, SOURCES, PAGE, REPS = 1_000_000, 16, 1000, 3
SORT_KEY = operator.itemgetter(slice(1, None))


def sources(layout: str, seed: int = 7) -> list[list[list[Row]]]:
    """Pages of each source, each source sorted by its key."""
    rnd = random.Random(seed)
    buckets: list[list[Row]] = [[] for _ in range(SOURCES)]
    cells = {b"d:v": b"x" * 20}
    for j in range(ROWS):
        if layout == "interleaved":
            logical = rnd.randbytes(12)
            salt = logical[-1] % SOURCES
        else:
            host = j % 1000
            logical = b"h%04d_" % host + (2**63 - j).to_bytes(8, "big")
            salt = (host * 2654435761 >> 7) % SOURCES
        buckets[salt].append((bytes((salt,)) + logical, cells))
    for b in buckets:
        b.sort()
    return [[b[i:i + PAGE] for i in range(0, len(b), PAGE)] for b in buckets]


async def batch_merge(pages: list[list[list[Row]]]) -> list[bytes]:
    cursor = [0] * len(pages)

    async def receive(i: int) -> list[Row] | None:
        if cursor[i] >= len(pages[i]):
            return None
        cursor[i] += 1
        return pages[i][cursor[i] - 1]

    out: list[bytes] = []
    async for pieces in merge_batches(len(pages), receive, SORT_KEY, False):
        merged = merge_pieces([rows for _, rows in pieces], lambda row: SORT_KEY(row[0]))
        out.extend(row[0] for row in merged)
    return out


def heap(pages: list[list[list[Row]]]) -> list[bytes]:
    streams = [chain.from_iterable(p) for p in pages]
    return [row[0] for row in heap_merge(streams, key=lambda row: SORT_KEY(row[0]))]


def timed(fn: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(REPS):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best, result


def main() -> dict[str, Any]:
    out: dict[str, Any] = {"rows": ROWS, "sources": SOURCES, "page": PAGE, "python": platform.python_version(),
                           "unit": "process CPU seconds, best of 3"}
    for layout in ("interleaved", "entities"):
        pages = sources(layout)
        b_s, b_keys = timed(lambda pages=pages: asyncio.run(batch_merge(pages)))
        h_s, h_keys = timed(lambda pages=pages: heap(pages))
        assert b_keys == h_keys and len(b_keys) == ROWS, layout
        out[layout] = {"batch_s": round(b_s, 3), "heap_s": round(h_s, 3), "batch_over_heap": round(b_s / h_s, 3),
                       "batch_us_per_row": round(b_s / ROWS * 1e6, 3)}
        print(layout, out[layout], flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")
    return out


if __name__ == "__main__":
    main()
