"""Shared fixtures of the CLI tests: a small profile, and the process-wide side effects of the
long-running commands (GC tuning, CPU affinity, logging set-up) turned off."""

from __future__ import annotations

from pathlib import Path

import pytest

PROFILE = """\
[kafka]
group_id = "cli-test"

[[tables]]
name = "cli_logs"
families = { l = { versions = 1 } }

[[routes]]
name = "cli_logs"
topic = "cli-logs"
table = "cli_logs"
rowkey = "[rpad(hostname, '_', 8)][rpad(log_event, '_', 12)][reverse_ts(timestamp)]"
timestamp_field = "timestamp"
columns = { "l:v" = "value" }
"""


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "profile.toml"
    path.write_text(PROFILE)
    return path


@pytest.fixture(autouse=True)
def log_levels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the log levels the commands configure instead of configuring the test process."""
    levels: list[str] = []
    for module in ("pipeline.cli.run", "pipeline.cli.backfill", "pipeline.cli.scan"):
        monkeypatch.setattr(f"{module}.tune_process", lambda runtime: None)
    for module in ("pipeline.cli.run", "pipeline.cli.backfill"):
        monkeypatch.setattr(f"{module}.configure_logging", lambda level, fmt="text": levels.append(level))
    return levels
