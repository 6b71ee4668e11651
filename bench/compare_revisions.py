"""The worker before and after a change: ``bench_worker``'s worker from two revisions of this
repository, alternating on one stack, on one topic.

The baseline revision is checked out into a temporary git worktree; each run is
:func:`bench.profile_worker.end_to_end` (the worker child from the earliest offset until every row
is written and committed, on a table recreated before the run, with the direct put encoder) run from
that tree or from this one, in the order baseline, current, current, baseline, ... so that a stack
that slows down as it ages charges both alike. Figures per run: the child's CPU per event from after
its imports to its end, the HBase-side CPU per event over the run, events/s; then the medians with
their ranges and ``current / baseline`` ratios. The topic and tables are dropped at the end, the
worktree removed. The baseline's compiled parts (when it has them) are built in its worktree first,
as its own build would (``hatch_build.py``), so both sides run as installed. Results:
``bench/results/revisions.json``.

    python -m bench.compare_revisions --baseline REV [--events 1000000] [--runs 3] [--partitions 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.profile_worker import RESULTS, _drop, _names, _produce, _settings, _summary, end_to_end
from devstack import LocalStack
from devstack.settings import load_stack_settings
from pipeline.runtime.process.proctune import tune_process

ROOT = Path(__file__).resolve().parent.parent
_FIGURES = ("worker_us_per_event", "hbase_jvm_us_per_event", "events_per_s")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def _build_compiled(tree: Path) -> list[str]:
    """Build the compiled parts of the checkout ``tree`` in place, as its own build would (its
    ``hatch_build.py``; a revision before them has none), so that its worker runs in the form it
    would be installed in; returns the sources built. Raises when one fails to build."""
    if not (tree / "hatch_build.py").exists():
        return []
    code = ("import sys, pathlib, hatch_build as h; root = pathlib.Path.cwd()\n"
            "for src, mod in h.EXTENSIONS.items(): h.compile_extension(root, src, mod); print(src)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    return done.stdout.split()


def main(args: argparse.Namespace) -> dict[str, Any]:
    baseline = _git("rev-parse", args.baseline)
    current = _git("rev-parse", "HEAD")
    # changes to the results and the docs do not change what runs
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results", ":!docs"))
    stack = LocalStack.recorded(load_stack_settings(None))
    stack.up()
    topic, table = _names(uuid.uuid4().hex[:8])
    settings = _settings(topic, table, args.partitions)
    tune_process(settings.runtime)
    load = {"start": os.getloadavg()}
    started = time.time()
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory(prefix="hbase-ingest-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        _git("worktree", "add", "--detach", str(tree), baseline)
        try:
            baseline_compiled = _build_compiled(tree)
            sent = asyncio.run(_produce(settings, topic, args.events, args.partitions))
            print(f"produced {sent} events to {topic}", flush=True)
            for i in range(args.runs):
                for which in (("baseline", "current") if i % 2 == 0 else ("current", "baseline")):
                    run = end_to_end(stack, topic, table, args.partitions, "direct",
                                     tree if which == "baseline" else None)
                    runs[which].append(run)
                    print(which, json.dumps({k: run[k] for k in _FIGURES}), flush=True)
        finally:
            asyncio.run(_drop(settings, topic))
            _git("worktree", "remove", "--force", str(tree))
    load["end"] = os.getloadavg()
    medians = {w: {k: _summary([r[k] for r in rs]) for k in _FIGURES} for w, rs in runs.items()}
    return {
        "method": __doc__.split("\n\n    python")[0] if __doc__ else "",
        "baseline": baseline, "current": current, "current_has_uncommitted_changes": dirty,
        "events": sent, "runs_each": args.runs, "partitions": args.partitions, "cores": os.cpu_count(),
        "load_average_1_5_15": load, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "baseline_compiled_parts": baseline_compiled, "runs": runs, "medians": medians,
        "current_over_baseline": {k: round(medians["current"][k]["median"] / medians["baseline"][k]["median"], 3)
                                  for k in _FIGURES},
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--baseline", required=True, help="the revision to compare with (a commit, tag or branch)")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3, help="runs of each revision, alternating")
    p.add_argument("--partitions", type=int, default=8)
    res = main(p.parse_args())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "revisions.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res["current_over_baseline"]))
