"""``python -m pipeline`` runs the command, and only as the main module: a scan worker process
re-runs the parent's main module as ``__mp_main__`` (anyio, like multiprocessing's spawn) and
must not start the command there."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

import pipeline
import pipeline.cli

MAIN = Path(pipeline.__file__).with_name("__main__.py")


def test_the_module_runs_the_command_as_main_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(pipeline.cli, "main", lambda: calls.append("main"))
    runpy.run_path(str(MAIN), run_name="__mp_main__")  # what a scan worker process does
    assert calls == []
    runpy.run_path(str(MAIN), run_name="__main__")
    assert calls == ["main"]
