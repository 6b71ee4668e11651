"""``hbase-ingest demo``: the README's main command, on embedded defaults."""

from __future__ import annotations

import time

import typer
from rich.console import Console

from connectors.stack import LocalStack
from pipeline.settings import load_settings

__all__ = ["register"]

_console = Console()


def demo() -> None:
    """Start the local stack and prove it with Kafka and HBase round trips."""
    settings = load_settings()
    stack = LocalStack(settings.stack)
    report = stack.up()
    _console.print(f"stack {'reused' if report.reused else 'started'}; state folder: {stack.layout.state}")
    t0 = time.monotonic()
    stack.check_ready()
    _console.print(f"smoke round trip (Kafka produce/consume, HBase put/get/delete) in {time.monotonic() - t0:.2f} s")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
