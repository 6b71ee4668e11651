"""``hbase-ingest tables create | describe``: pre-split tables from the routes' rowkey designs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from connectors.hbase import HBaseClient
from pipeline.cli.analyze import read_events
from pipeline.cli.console import output_console
from pipeline.cli.errors import check_not_empty
from pipeline.core.routes.router import compile_route
from pipeline.errors import ConfigError
from pipeline.names import table_name_problem
from pipeline.rowkey import RowKey, format_key
from pipeline.runtime.admin.tables import CreatedTable, TableDescription, create_tables, describe_table
from pipeline.settings import FamilySpec, Settings, load_settings

__all__ = ["tables_app"]

tables_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Create pre-split tables and describe their regions.")
_console = output_console()

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", help="TOML profile with [[tables]] and [[routes]].")]
_METHOD = {
    "none": "not split",
    "design": "split on the design's salt/bucket/hash prefix",
    "sample": "split at sample quantiles",
}


def _splits(keys: tuple[bytes, ...], shown: int = 8) -> str:
    text = [format_key(k) for k in keys]
    if len(text) > shown:
        text = [*text[:3], f"... ({len(keys)} keys) ...", *text[-3:]]
    return "  ".join(text)


def _family(name: str, f: FamilySpec) -> str:
    extras = [f"versions {f.versions}"]
    if f.ttl_s:
        extras.append(f"ttl {f.ttl_s}s")
    if f.compression:
        extras.append(f.compression)
    if f.in_memory:
        extras.append("in-memory")
    return f"{name}({', '.join(extras)})"


def print_created(results: list[CreatedTable], console: Console = _console) -> None:
    for r in results:
        p = r.plan
        head = f"{r.action:<10} {p.table} (route {p.route!r})"
        if r.action == "exists":
            console.print(f"{head}: left alone with its {r.live_regions} region(s); --recreate "
                          f"drops it and creates {p.regions}", markup=False)
            continue
        console.print(f"{head}: {p.regions} region(s), {_METHOD[p.method]}", markup=False)
        if p.split_keys:
            console.print(f"{'':<10} split keys {_splits(p.split_keys)}", markup=False)
        fams = ", ".join(_family(name, f) for name, f in p.families.items())
        console.print(f"{'':<10} families {fams}", markup=False)


@tables_app.command()
def create(
    config: ConfigOpt = None,
    route: Annotated[str | None, typer.Option(
        "--route", help="Only this route's table.")] = None,
    regions: Annotated[int | None, typer.Option(
        "--regions", "-n", min=1, max=4096,
        help="Regions per table (default: the [[tables]] entry's regions, else the design's "
             "fan-out capped at 256, else 1).")] = None,
    recreate: Annotated[bool, typer.Option(
        "--recreate", help="Drop existing tables (and their data) first.")] = False,
    sample: Annotated[Path | None, typer.Option(
        "--sample", "-s", dir_okay=False,
        help="Events (JSON lines) to split unsalted designs at quantiles.")] = None,
) -> None:
    """Create each route's table with its column families, pre-split from its rowkey design.
    Existing tables are left alone unless --recreate. Routes sharing a table: the first one's design
    decides the split keys."""
    check_not_empty(route, "--route")
    settings = load_settings(config)
    events = list(read_events(sample)) if sample is not None else None

    async def run() -> list[CreatedTable]:
        async with HBaseClient(settings.hbase) as hb:
            return await create_tables(hb, settings, route, regions, recreate, events)

    print_created(anyio.run(run))


def _route_for(settings: Settings, table: str) -> tuple[str | None, RowKey | None]:
    for route in settings.routes:
        if route.table == table:
            return route.name, compile_route(route).rowkey
    return None, None


def print_description(d: TableDescription, console: Console = _console) -> None:
    fams = ", ".join(f"{k}(versions {v})" for k, v in d.families.items())
    route = f"route {d.route!r}" if d.route else "no route in the config: keys shown raw"
    console.print(f"table {d.table}: {len(d.regions)} regions on {len(d.servers)} server(s); "
                  f"families {fams}; {route}")
    table = Table(box=None)
    for column in ("#", "start key", "end key", "decoded start", "server", "rows", "share"):
        table.add_column(column, overflow="fold")
    total = d.rows or 0
    for i, r in enumerate(d.regions):
        rows = "-" if r.rows is None else f"{r.rows}{'+' if r.capped else ''}"
        share = f"{r.rows / total:.1%}" if r.rows is not None and total else "-"
        table.add_row(str(i), escape(format_key(r.start_key)) or "(start)",
                      escape(format_key(r.end_key)) or "(end)", escape(r.start_label or ""),
                      r.server, rows, share)
    console.print(table)
    dist = d.distribution()
    if dist is not None and dist.total:
        capped = any(r.capped for r in d.regions)
        more = "+ (capped per region)" if capped else ""
        console.print(f"rows {dist.total}{more}; skew (max/mean) {dist.skew:.2f}; busiest region "
                      f"{dist.busiest} holds {dist.busiest_share:.1%}; "
                      f"empty regions {dist.empty_regions}")


@tables_app.command()
def describe(
    name: Annotated[str, typer.Argument(help="Table name (without the configured table_prefix).")],
    config: ConfigOpt = None,
    count: Annotated[bool, typer.Option(
        "--count/--no-count", help="Count rows per region (key-only scans).")] = True,
    max_count: Annotated[int, typer.Option(
        "--max-count", min=1, help="Stop counting a region after this many rows.")] = 100_000,
) -> None:
    """Show a table's regions: boundaries (decoded with the design of the route writing the table),
    servers and approximate row counts."""
    check_not_empty(name, "NAME")
    settings = load_settings(config)
    problem = table_name_problem(settings.hbase.table_prefix + name)
    if problem:
        raise ConfigError(f"NAME {name!r}: {problem}")
    route, rowkey = _route_for(settings, name)

    async def run() -> TableDescription:
        async with HBaseClient(settings.hbase) as hb:
            return await describe_table(hb, name, rowkey, count=count, max_count=max_count,
                                        route=route)

    print_description(anyio.run(run))
