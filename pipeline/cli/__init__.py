"""The ``hbase-ingest`` command: the composition root (settings -> connectors -> runtime).

Sub-commands live in one module each; this module mounts them and turns the project's errors
(also when raised inside a task group) into a one-line message on stderr and exit code 2 (no
traceback for expected failures; see :mod:`pipeline.cli.errors`).

Help texts are plain text (``rich_markup_mode=None``): rowkey specs and TOML sections in them keep
their square brackets.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from pipeline.cli.errors import reported_errors

__all__ = ["app", "main"]


class _ReportingGroup(TyperGroup):
    """The root command: reports bad input from any sub-command as ``error: ...``, exit status 2."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer may vendor its own click)
        with reported_errors():
            return super().invoke(ctx)


app = typer.Typer(
    name="hbase-ingest",
    help="Kafka -> HBase ingestion with declarative rowkey designs, per-server batching and fan-out reads.",
    cls=_ReportingGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _mount() -> None:
    from pipeline.cli import backfill, demo, keys, run, scan, stack, tables, top

    app.add_typer(stack.stack_app, name="stack", help="Start, inspect and stop the local Kafka + HBase stack.")
    app.add_typer(keys.keys_app, name="keys")
    app.add_typer(tables.tables_app, name="tables")
    for module in (run, scan, demo, backfill, top):
        module.register(app)


_mount()


def main() -> None:
    app()
