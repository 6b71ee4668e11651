"""The ``hbase-ingest`` command: the composition root (settings -> connectors -> runtime).

Sub-commands live in one module each; this module mounts them and turns the project's errors
(also when raised inside a task group) into a one-line message on stderr and exit code 2 (no
traceback for expected failures; see :mod:`pipeline.cli.errors`).

Help texts are plain text (``rich_markup_mode=None``): rowkey specs and TOML sections in them keep
their square brackets.
"""

from __future__ import annotations

from collections.abc import Callable
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
    help="Kafka -> HBase ingestion with declarative rowkey designs, per-region batching and fan-out reads.",
    cls=_ReportingGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
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
    app()
