"""``hbase-ingest stack up | status | down``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from connectors.stack import LocalStack
from pipeline.settings import load_settings

__all__ = ["stack_app"]

stack_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None)
_console = Console()

ConfigOpt = typer.Option(None, "--config", "-c", help="TOML profile ([stack] section: ports, heaps, dirs).")


def _stack(config: Path | None) -> LocalStack:
    return LocalStack(load_settings(config).stack)


@stack_app.command()
def up(config: Path | None = ConfigOpt) -> None:
    """Provision (first run downloads jars into the user cache) and start Kafka + HBase + Thrift; wait
    until real round trips succeed. Returns at once when the stack already runs."""
    stack = _stack(config)
    report = stack.up()
    t = report.timings_s
    if report.reused:
        _console.print(f"stack already running (reused; checked in {t['total']:.2f} s); state: {stack.layout.state}")
        return
    src = "downloaded into" if report.downloaded else "reused from"
    _console.print(f"jars {src} {stack.layout.cache} ({t['provision']:.1f} s)")
    _console.print(f"stack ready in {t['total']:.1f} s (servers {t['start']:.1f} s); state: {stack.layout.state}")


@stack_app.command()
def status(config: Path | None = ConfigOpt) -> None:
    """Show the state folder, the processes and their memory, and whether they answer."""
    stack = _stack(config)
    st = stack.status()
    _console.print(f"state folder: {st.state_dir}\njar cache:    {st.cache_dir}")
    _console.print(f"versions:     Kafka {st.kafka_version}, HBase {st.hbase_version}")
    table = Table("process", "pid", "RSS MB", "log")
    for p in st.processes:
        table.add_row(p.name, str(p.pid or "-"), f"{p.rss_mb:.0f}" if p.rss_mb else "-", str(p.log))
    _console.print(table)
    _console.print("ports: " + ", ".join(f"{k} {v}" for k, v in st.ports.items()))
    if st.running:
        try:
            stack.check_ready(timeout_s=5.0)
            _console.print("[green]ready[/green]: Kafka and HBase round trips succeeded")
        except Exception as exc:
            _console.print(f"[yellow]running but not answering[/yellow]: {exc!r}")
            raise typer.Exit(1) from exc
    else:
        _console.print("[yellow]not running[/yellow]")
        raise typer.Exit(1)


@stack_app.command()
def down(config: Path | None = ConfigOpt,
         wipe: bool = typer.Option(False, "--wipe", help="also delete data and logs")) -> None:
    """Stop the processes the stack started (by pid); --wipe also deletes the state folder."""
    stack = _stack(config)
    stopped = stack.down(wipe=wipe)
    _console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}" + (" (state wiped)" if wipe else ""))
