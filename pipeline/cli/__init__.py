"""The ``hbase-ingest`` command: the composition root (settings -> connectors -> runtime).

Sub-commands live in one module each; this module mounts them and turns the project's errors into
a one-line message on stderr and exit code 2 (no traceback for expected failures).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from pipeline.errors import HBaseIngestError

__all__ = ["app", "main"]

app = typer.Typer(
    name="hbase-ingest",
    help="Kafka -> HBase ingestion with declarative rowkey designs, per-region batching and fan-out reads.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _mount() -> None:
    from pipeline.cli import stack

    app.add_typer(stack.stack_app, name="stack", help="Start, inspect and stop the local Kafka + HBase stack.")
    mounts: list[tuple[str, str, str]] = [
        ("pipeline.cli.keys", "keys_app", "keys"),
        ("pipeline.cli.tables", "tables_app", "tables"),
    ]
    for module, attr, name in mounts:
        try:
            mod = __import__(module, fromlist=[attr])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        app.add_typer(getattr(mod, attr), name=name)
    for module, attr in (("pipeline.cli.run", "register"), ("pipeline.cli.scan", "register"),
                         ("pipeline.cli.produce", "register"), ("pipeline.cli.demo", "register"),
                         ("pipeline.cli.backfill", "register"), ("pipeline.cli.top", "register")):
        try:
            mod = __import__(module, fromlist=[attr])
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        register: Callable[[typer.Typer], Any] = getattr(mod, attr)
        register(app)


_mount()


def main() -> None:
    try:
        app()
    except HBaseIngestError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
