"""Scan worker processes: a worker that dies while starting surfaces as ``BrokenWorkerProcess``
(anyio's own kill of the dead process raises ``ProcessLookupError``, seen when a test killed
workers as they were spawned)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_process
import pytest

from connectors.hbase import scanprocs
from connectors.hbase.scanprocs import Gateway, scan_page_in_process, warm_worker

ROOT = Path(__file__).resolve().parents[2]


def _identity_page() -> Any:
    return lambda rows, label: rows


async def test_a_worker_dying_while_it_starts_is_a_broken_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    async def dies(*args: Any, **kwargs: Any) -> Any:
        raise ProcessLookupError

    monkeypatch.setattr(anyio.to_process, "run_sync", dies)
    gw = Gateway("127.0.0.1", 9, 10, 1000, "buffered", "binary")
    limiter = anyio.CapacityLimiter(1)
    with pytest.raises(anyio.BrokenWorkerProcess, match="died while starting"):
        await scan_page_in_process(gw, b"t", "t", start=b"", stop=b"", limit=1, reverse=False, columns=None,
                                   transform=(_identity_page, ()), label="all", limiter=limiter)
    with pytest.raises(anyio.BrokenWorkerProcess, match="died while starting"):
        await warm_worker(gw, limiter)


built: list[int] = []


def numbered(n: int) -> Any:
    built.append(n)
    return lambda rows, label: n


def test_a_worker_keeps_its_16_most_recent_transforms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanprocs, "_transforms", {})
    built.clear()
    for n in range(20):
        assert scanprocs._transform((numbered, (n,)))([], "") == n
    assert scanprocs._transform((numbered, (19,)))([], "") == 19  # kept: not built again
    assert built == list(range(20)) and len(scanprocs._transforms) == 16
    scanprocs._transform((numbered, (3,)))  # the oldest ones (0 to 3) went: built again, 4 goes
    assert built == [*range(20), 3]
    scanprocs._transform((numbered, (5,)))  # a use moves a transform to the back: 5 stays
    scanprocs._transform((numbered, (20,)))  # 6 goes
    scanprocs._transform((numbered, (5,)))
    scanprocs._transform((numbered, (6,)))
    assert built == [*range(20), 3, 20, 6]


def _run_script(tmp_path: Any, body: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` as a script whose parent process reports ``BrokenWorkerProcess`` (exit 3)."""
    script = tmp_path / "script.py"
    script.write_text(
        "import anyio\n"
        "from connectors.hbase.scanprocs import Gateway, warm_worker\n"
        "async def main():\n"
        "    await warm_worker(Gateway('127.0.0.1', 9, 9, 2000, 'buffered', 'binary'), anyio.CapacityLimiter(1))\n"
        f"{body}"
        "try:\n"
        "    anyio.run(main)\n"
        "except anyio.BrokenWorkerProcess as exc:\n"
        "    if __name__ != '__main__':\n"
        "        raise\n"
        "    print('BROKEN', exc)\n"
        "    raise SystemExit(3)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 3, done.stderr[-2000:]
    return done


def test_a_script_without_a_main_guard_gets_an_error_saying_so(tmp_path: Any) -> None:
    # the worker re-runs the script as __mp_main__, so the script's own warm_worker call runs again
    # inside the worker: refused there at once, and reported by the parent in one sentence
    out = _run_script(tmp_path, "").stdout
    assert ("failed to start: re-running the program's main module started a scan in worker processes again. "
            "A program that scans in worker processes must do its work under 'if __name__ == \"__main__\":'") in out
    assert out.count("failed to start") == 1 and out.count("__main__") == 1


def test_a_main_module_that_fails_in_the_worker_is_named(tmp_path: Any) -> None:
    out = _run_script(tmp_path, "if __name__ == '__mp_main__':\n    raise ValueError('no config here')\n").stdout
    assert "re-running the program's main module raised ValueError: no config here. A program that" in out
