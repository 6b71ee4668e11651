"""``hbase-ingest scan``: read a route's rows back through the fan-out reader.

::

    hbase-ingest scan --config FILE --route NAME [--where field=value ...] [--from T] [--to T]
                      [--newest-first] [--by-time] [--limit N] [--format table|jsonl] [--explain]
                      [--page-size N] [--processes N] [--timeout S]

``--from``/``--to`` take epoch milliseconds or ISO-8601 (a time without a zone is UTC) and select
``[from, to)`` on the design's time field. A ``--where`` value is an integer when the key stores the
field in a numeric segment (``long``, ``dec``, ``reverse_ts``, ...), text otherwise (text whose
digits matter, such as ``007``, stays text). ``--explain`` prints the plan and scans nothing.
``jsonl`` streams one object per row; ``table`` renders at the end, folded to the terminal's width,
or one line per row when stdout is not a terminal (a pipe or a file; ``COLUMNS`` still sets a
width). Statistics go to stderr.
Errors (:class:`~pipeline.errors.HBaseIngestError`) propagate to the command root.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import anyio
import orjson
import typer
from rich.console import Console
from rich.table import Table

from connectors.hbase import HBaseClient
from pipeline.cli.console import output_console as shared_output_console
from pipeline.cli.errors import check_time_range
from pipeline.cli.logsetup import quiet_reaped_workers
from pipeline.core.routes.router import compile_route
from pipeline.errors import ConfigError
from pipeline.rowkey import RowKey, format_key
from pipeline.rowkey.codecs import JAVA_LONG_MAX
from pipeline.runtime.process.proctune import tune_process
from pipeline.runtime.read.args import MAX_PROCESSES
from pipeline.runtime.read.plan import explain_lines
from pipeline.runtime.read.reader import PAGE_SIZE, PROCESS_PAGE_SIZE, Reader, ReadRow
from pipeline.settings import RouteSpec, load_settings

__all__ = ["output_console", "parse_time", "parse_where", "print_rows", "register"]


def parse_time(text: str, option: str) -> int:
    """Epoch milliseconds from ``text``: an integer, or ISO-8601 (naive times are UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"{option} {text!r}: expected epoch milliseconds or ISO-8601 such as "
                          "2024-05-01T12:00:00Z") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _numeric_fields(rowkey: RowKey) -> set[str]:
    return {f for seg in rowkey.segments if seg.numeric for f in seg.fields}


def parse_where(items: list[str], rowkey: RowKey) -> dict[str, Any]:
    """``field=value`` pairs -> a ``where`` mapping typed by the key's segments (see the module)."""
    numeric = _numeric_fields(rowkey)
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--where {item!r}: expected field=value")
        if name in given:
            raise ConfigError(f"--where: field {name!r} is given twice ({given[name]!r} and {item!r}); "
                              "give each key field at most once")
        given[name] = item
        if name not in rowkey.fields:
            raise ConfigError(f"--where {item!r}: {name!r} is not a key field; the key has "
                              f"{', '.join(rowkey.fields)}")
        if name in numeric:
            try:
                out[name] = int(value)
            except ValueError as exc:
                raise ConfigError(f"--where {item!r}: {name!r} is numeric in the key") from exc
        else:
            out[name] = value
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return format_key(value)
    if isinstance(value, Decimal):  # a decimal column: its exact number, scale kept (12.50)
        return orjson.Fragment(format(value, "f"))
    raise TypeError


def _jsonl(row: ReadRow) -> bytes:
    body = {"key": format_key(row.key), "fields": row.fields, "columns": row.columns,
            "range": row.range_label}
    return orjson.dumps(body, default=_plain, option=orjson.OPT_NON_STR_KEYS)


def _cell(value: Any) -> str:
    if isinstance(value, bytes):
        return format_key(value)
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=_plain).decode()


def output_console() -> Console:
    """The console of ``--format table`` and ``--explain``: the terminal's width when stdout is a
    terminal or ``COLUMNS`` is set, otherwise wide enough that a row stays on one line (rich would
    fold every table to 80 columns in a pipe or a file); see :mod:`pipeline.cli.console`."""
    return shared_output_console(soft_wrap=True)


def print_rows(out: Console, rows: Sequence[ReadRow], fields: list[str]) -> None:
    """``rows`` as one table: the key, the key's ``fields``, every column any row has (sorted), the
    range label; a cell the row lacks is empty. Cells fold when the console is too narrow."""
    table = Table(show_lines=False)
    cols = sorted({c for r in rows for c in r.columns})
    for name in ["key", *fields, *cols, "range"]:
        table.add_column(name, overflow="fold")
    for r in rows:
        table.add_row(format_key(r.key), *(_cell(r.fields.get(n, "")) for n in fields),
                      *(_cell(r.columns.get(c, "")) for c in cols), r.range_label)
    out.print(table)


async def _run(config: Path, route_name: str, where_items: list[str], t_from: str | None,
               t_to: str | None, newest_first: bool, limit: int | None, fmt: str, explain: bool,
               timeout_s: float | None, page_size: int | None, processes: int, by_time: bool,
               skip_scan: bool) -> None:
    settings = load_settings(config)
    tune_process(settings.runtime)  # a full scan allocates ~10 objects per row
    if processes:
        quiet_reaped_workers()
    route: RouteSpec = settings.route(route_name)
    rowkey = compile_route(route).rowkey
    where = parse_where(where_items, rowkey)
    time_range: tuple[int, int] | None = None
    if t_from is not None or t_to is not None:
        lo = parse_time(t_from, "--from") if t_from is not None else 0
        hi = parse_time(t_to, "--to") if t_to is not None else JAVA_LONG_MAX
        time_range = check_time_range(lo, hi)
    out = output_console()
    err = Console(stderr=True)
    async with HBaseClient(settings.hbase) as hb, Reader(hb, page_size=page_size, timeout_s=timeout_s,
                                                         processes=processes) as reader:
        if explain:
            plan = await reader.plan(route, where=where, time_range=time_range,
                                     newest_first=newest_first, limit=limit, by_time=by_time,
                                     skip_scan=skip_scan)
            for line in explain_lines(plan):
                out.print(line, markup=False, highlight=False)
            return
        query = reader.scan(route, where=where, time_range=time_range, newest_first=newest_first,
                            limit=limit, by_time=by_time, skip_scan=skip_scan)
        async with query:
            if fmt == "jsonl":
                write = sys.stdout.buffer.write
                async for batch in query.batches():
                    write(b"".join(_jsonl(row) + b"\n" for row in batch))
                sys.stdout.flush()
            else:
                print_rows(out, [row async for row in query], list(rowkey.fields))
        s = query.stats
        err.print(f"{s.rows_returned} row(s); {s.ranges_planned} range(s)"
                  f"{' per region' if s.per_region else ''}; "
                  f"{s.scanners_opened} scanner(s) opened; "
                  f"{s.rows_scanned} row(s) scanned; "
                  + (f"{sum(r.entities for r in s.ranges)} entities walked; "
                     if query.plan is not None and query.plan.bounds is not None else "")
                  + f"{s.elapsed_s * 1000:.1f} ms",
                  markup=False, highlight=False)
        for note in query.plan.notes if query.plan is not None else ():
            err.print(f"note: {note}", markup=False, highlight=False)


def scan(
    config: Annotated[Path, typer.Option("--config", "-c", help="TOML settings file.")],
    route: Annotated[str, typer.Option("--route", help="Route name (table, rowkey, columns).")],
    where: Annotated[list[str] | None, typer.Option(
        "--where", help="field=value on a key field (repeatable).")] = None,
    t_from: Annotated[str | None, typer.Option(
        "--from", help="Start time, inclusive (epoch ms or ISO-8601).")] = None,
    t_to: Annotated[str | None, typer.Option(
        "--to", help="End time, exclusive (epoch ms or ISO-8601).")] = None,
    newest_first: Annotated[bool, typer.Option("--newest-first", help="Newest first.")] = False,
    by_time: Annotated[bool, typer.Option(
        "--by-time", help="Order by time across every entity (needs --limit): the newest (with "
                          "--newest-first) or oldest N rows, even when the key leads with an entity "
                          "such as a host.")] = False,
    skip_scan: Annotated[bool, typer.Option(
        "--skip-scan", help="With --from/--to on a key that leads with an entity (such as a host): "
                            "read each entity's rows in the time range only, skipping the rest of "
                            "each entity, instead of every row filtered by time. Pays when entities "
                            "hold many rows each and the range few of them.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="At most N rows.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or jsonl.")] = "table",
    explain: Annotated[bool, typer.Option("--explain", help="Print the plan only.")] = False,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", min=0.001, help="Per-query timeout in seconds.")] = None,
    page_size: Annotated[int | None, typer.Option(
        "--page-size", min=1,
        help=f"Rows per page (default {PAGE_SIZE}; {PROCESS_PAGE_SIZE} with --processes).")] = None,
    processes: Annotated[int, typer.Option(
        "--processes", min=0, max=MAX_PROCESSES,
        help="Fetch and decode pages in N worker processes (big scans on a machine with cores to "
             "spare); 0 = worker threads.")] = 0,
) -> None:
    """Read a route's rows: parallel scans over every salt bucket, merged in key order."""
    if fmt not in ("table", "jsonl"):
        raise ConfigError(f"--format {fmt!r}: expected table or jsonl")
    anyio.run(_run, config, route, where or [], t_from, t_to, newest_first, limit, fmt, explain,
              timeout, page_size, processes, by_time, skip_scan)


def register(app: typer.Typer) -> None:
    """Add the ``scan`` command to ``app``."""
    app.command("scan")(scan)
