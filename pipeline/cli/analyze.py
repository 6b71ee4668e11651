"""``hbase-ingest keys analyze``: where a rowkey design would put a sample of events.

Mounted on the ``keys`` command group by :func:`register_analyze`. The figures are defined in
:mod:`pipeline.core.keyspace`; docs/keyspace.md has worked examples.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from connectors.hbase import HBaseClient
from pipeline.cli.console import output_console
from pipeline.cli.errors import check_not_empty
from pipeline.core.keyspace import KeyspaceReport, analyze_keys, recommend_buckets
from pipeline.errors import ConfigError
from pipeline.rowkey import RowKey, compile_rowkey, format_key
from pipeline.runtime.admin.tables import (
    MAX_DEFAULT_REGIONS,
    SampleKeys,
    boundary_label,
    build_sample_keys,
    plan_splits,
)
from pipeline.settings import load_settings

__all__ = ["Analysis", "analyze", "check_plot_path", "hotspot_verdict", "read_events", "register_analyze"]

_console = output_console()

#: Regions used for a design without fan-out when neither --regions nor --table is given.
DEFAULT_UNSALTED_REGIONS = 16
#: Regions listed one per line; beyond this only the busiest are shown.
MAX_LISTED = 32


def read_events(path: Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """JSON objects, one per line (blank lines skipped). Raises ConfigError naming a bad line."""
    try:
        fh = path.open("rb")
    except FileNotFoundError as exc:
        raise ConfigError(f"sample file {path} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"sample file {path} is a directory, not a file") from exc
    except OSError as exc:
        raise ConfigError(f"sample file {path} cannot be read: {exc.strerror or exc}") from exc
    with fh:
        n = 0
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not JSON: {exc}") from exc
            if not isinstance(event, dict):
                kind = type(event).__name__
                raise ConfigError(f"{path}:{lineno}: expected a JSON object, got {kind}")
            yield event
            n += 1
            if limit is not None and n >= limit:
                return


@dataclass(frozen=True, slots=True)
class Analysis:
    """Everything ``keys analyze`` prints."""

    spec: str
    rowkey: RowKey
    sample: SampleKeys
    report: KeyspaceReport
    source: str
    servers: int
    recommended: int
    cap: int


def hotspot_verdict(report: KeyspaceReport) -> str:
    """``HOTSPOT`` when at least half of the recent writes go to one region or sort after every
    earlier key (on more than one region), ``uneven`` when the busiest region holds more than twice
    its fair share of the sample, else ``even``."""
    recent = report.recent
    if report.regions > 1 and recent is not None and (
            recent.busiest_share >= 0.5 or recent.beyond_share >= 0.5):
        return "HOTSPOT"
    if report.skew > 2.0:
        return "uneven"
    return "even"


def _bar(n: int, top: int, width: int = 24) -> str:
    return "#" * (round(width * n / top) if top else 0)


def print_analysis(a: Analysis, console: Console = _console) -> None:
    """The text report (see docs/keyspace.md for samples)."""
    r = a.report
    out = console.print
    fan = f"fan-out {a.rowkey.fanout_size}" if a.rowkey.fanout_size > 1 else "no fan-out"
    skipped = sum(a.sample.skipped.values())
    why = ", ".join(f"{k} {v}" for k, v in sorted(a.sample.skipped.items()))
    out(f"design        {escape(a.spec)}  ({fan})")
    dropped = f"; {skipped} events skipped ({why})" if skipped else ""
    out(f"sample        {r.total} keys{dropped}")
    out(f"regions       {r.regions}, {a.source}")
    table = Table(box=None, pad_edge=False)
    for column in ("region", "start key", "decoded", "rows", "share"):
        table.add_column(column, overflow="fold")
    table.add_column("", no_wrap=True, overflow="crop")
    top = max(r.counts) if r.counts else 0
    order = list(range(r.regions))
    if r.regions > MAX_LISTED:
        order = sorted(sorted(order, key=lambda i: -r.counts[i])[:MAX_LISTED // 2])
        out(f"(showing the {len(order)} busiest of {r.regions} regions)")
    for i in order:
        start = r.bounds(i)[0]
        share = r.counts[i] / r.total if r.total else 0.0
        table.add_row(str(i), escape(format_key(start)) if start else "(start)",
                      escape(boundary_label(a.rowkey, start) or ""), str(r.counts[i]),
                      f"{share:6.1%}", _bar(r.counts[i], top))
    out(table)
    if not r.total:
        out("no keys: nothing to analyze")
        return
    out(f"rows/region   min {min(r.counts)}, mean {r.mean:.1f}, max {max(r.counts)}; "
        f"skew (max/mean) {r.skew:.2f}; busiest region {r.busiest} holds {r.busiest_share:.1%}; "
        f"empty regions {r.empty_regions}")
    ln = r.lengths
    out(f"key length    min {ln.min}, p50 {ln.p50}, p95 {ln.p95}, max {ln.max} bytes; "
        f"{ln.over_advice / r.total:.1%} of keys over the guides' {ln.advice}-byte advice")
    rec = r.recent
    if rec is not None:
        out(f"recent writes the last {rec.fraction:.0%} of the sample by event time ({rec.window} "
            f"writes) reach {rec.regions_touched} of {r.regions} regions")
        out(f"              region {rec.max_key_region} (holds the largest key) takes "
            f"{rec.share:.1%}; the busiest, region {rec.busiest}, {rec.busiest_share:.1%}")
        out(f"              {rec.beyond_share:.1%} sort after every earlier key, "
            f"{rec.before_share:.1%} before")
        if r.regions > 1 and rec.busiest_share >= 0.5:
            out(f"[bold red]time-ordered writes: {rec.busiest_share:.1%} of the most recent writes "
                f"land in one region[/bold red] (region {rec.busiest} of {r.regions})")
        if rec.beyond_share >= 0.5 or rec.before_share >= 0.5:
            end = "last" if rec.beyond_share >= rec.before_share else "first"
            out(f"  the keys follow event time: whatever the split points, new writes all go to "
                f"the {end} region; pre-splitting only spreads the past. Lead the key with a salt "
                f"or bucket.")
    verdict = hotspot_verdict(r)
    colour = {"HOTSPOT": "red", "uneven": "yellow", "even": "green"}[verdict]
    out(f"verdict       [{colour}]{verdict}[/{colour}]")
    current = a.rowkey.fanout_size
    have = f"the design has {current}" if current > 1 else "the design has none"
    out(f"recommended   {a.recommended} salt/bucket values (power of two >= max({r.regions} "
        f"regions, {a.servers} region servers, 4), at most {a.cap}); {have}")


def check_plot_path(path: Path) -> None:
    """Raise ConfigError unless ``path`` can be a new or replaced file in an existing directory and
    matplotlib is installed (checked before the analysis runs)."""
    if path.is_dir():
        raise ConfigError(f"--plot {str(path)!r} is a directory; give a file name such as keys.png")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ConfigError(f"--plot {str(path)!r}: the directory {str(parent)!r} {what}")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--plot {str(path)!r}: the directory {str(parent)!r} is not writable")
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("--plot needs matplotlib: pip install 'hbase-ingest[plot]'")


def plot_analysis(a: Analysis, path: Path) -> None:
    """A PNG with two bar charts: rows per region over the whole sample, and the most recent writes
    per region. Needs matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # the optional extra is not installed
        raise ConfigError("--plot needs matplotlib: pip install 'hbase-ingest[plot]'") from exc
    r = a.report
    xs = list(range(r.regions))
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, min(16.0, 0.3 * r.regions + 4)), 6.5),
                             sharex=True)
    panels: list[tuple[Any, tuple[int, ...], str]] = [
        (axes[0], r.counts, f"all {r.total} sampled writes: skew {r.skew:.2f}, "
                            f"busiest {r.busiest_share:.0%}")]
    if r.recent is not None:
        rec = r.recent
        panels.append((axes[1], rec.counts,
                       f"most recent {rec.fraction:.0%} ({rec.window} writes): "
                       f"{rec.busiest_share:.0%} in the busiest region"))
    for ax, counts, title in panels:
        total = sum(counts)
        mean = total / len(counts) if counts else 0.0
        hot = max(counts) if counts else 0
        colours = ["#d62728" if c == hot and c > 1.5 * mean else "#1f77b4" for c in counts]
        ax.bar(xs, counts, color=colours)
        ax.axhline(mean, color="grey", linestyle="--", linewidth=1,
                   label=f"even spread ({mean:.0f})")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("rows")
        ax.set_ylim(0, max(1.0, hot * 1.25))
        ax.legend(loc="upper left", fontsize=8)
    axes[-1].set_xlabel("region")
    if r.regions <= 32:
        axes[-1].set_xticks(xs)
    fig.suptitle(f"{a.spec}  ({hotspot_verdict(r)})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def _live_boundaries(config: Path | None, table: str) -> tuple[list[bytes], int]:
    settings = load_settings(config)
    async with HBaseClient(settings.hbase) as hb:
        regions = await hb.regions(table)
    return [r.start_key for r in regions[1:]], len({(r.server, r.port) for r in regions})


def run_analysis(spec: str, events: Sequence[Mapping[str, Any]], *, regions: int | None = None,
                 live: tuple[list[bytes], int] | None = None, table: str | None = None,
                 time_field: str | None = None, recent: float = 0.1, servers: int | None = None,
                 cap: int = 64) -> Analysis:
    """Build the keys and analyze them over ``live`` boundaries (a table's region start keys and
    server count) or over the split points planned for ``regions`` (default: the design's fan-out
    size, or :data:`DEFAULT_UNSALTED_REGIONS`)."""
    rowkey = compile_rowkey(spec)
    sample = build_sample_keys(rowkey, events, rowkey.time_field if time_field is None else time_field)
    if not sample.keys:
        why = ", ".join(f"{k} {v}" for k, v in sorted(sample.skipped.items())) or "no events"
        raise ConfigError(
            f"none of the {len(events)} sample events can feed the key {spec!r} ({why})")
    if live is not None:
        boundaries, live_servers = live
        source = f"the live regions of table {table!r}"
        servers = servers or live_servers
    else:
        fan = rowkey.fanout_size
        n = regions or (min(fan, MAX_DEFAULT_REGIONS) if fan > 1 else DEFAULT_UNSALTED_REGIONS)
        boundaries, method = plan_splits(rowkey, n, sample.keys)
        source = {
            "none": "no split",
            "design": "split where the design distributes keys (salt, bucket or hash prefix)",
            "sample": "split at quantiles of the sample (no leading salt, hash or bucket)",
        }[method]
    report = analyze_keys(sample.keys, boundaries, sample.times, fraction=recent)
    servers = servers or 1
    return Analysis(spec, rowkey, sample, report, source, servers,
                    recommend_buckets(report.regions, servers, cap), cap)


def analyze(
    rowkey: Annotated[str, typer.Option(
        "--rowkey", "-r", help="Rowkey spec, e.g. '[salt(host, 8)][long(ts)][host]'.")],
    sample: Annotated[Path, typer.Option(
        "--sample", "-s", dir_okay=False, help="Events, one JSON object per line.")],
    regions: Annotated[int | None, typer.Option(
        "--regions", "-n", min=1, max=4096,
        help="Analyze over the split points the design gets for N regions (default: its fan-out "
             f"size, else {DEFAULT_UNSALTED_REGIONS}).")] = None,
    table: Annotated[str | None, typer.Option(
        "--table", "-t", help="Analyze over a live table's regions instead.")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="TOML profile (the HBase address for --table).")] = None,
    time_field: Annotated[str | None, typer.Option(
        "--time-field", help="Event-time field (dotted path) of the time-ordered replay; default: "
                             "the design's time field, else the file's order.")] = None,
    recent: Annotated[float, typer.Option(
        "--recent", min=0.001, max=1.0,
        help="Fraction of the sample that counts as the most recent writes.")] = 0.1,
    servers: Annotated[int | None, typer.Option(
        "--servers", min=1,
        help="Region servers to plan for (default: the table's, else 1).")] = None,
    max_buckets: Annotated[int, typer.Option(
        "--max-buckets", min=1, help="Cap on the recommended bucket count.")] = 64,
    limit: Annotated[int | None, typer.Option(
        "--limit", min=1, help="Read at most N events.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Also write a PNG bar chart (needs matplotlib).")] = None,
) -> None:
    """Show where a design's keys would land for a sample of events: rows per region, skew, key
    lengths, the share of the most recent writes that hit one region, and a bucket count."""
    if regions is not None and table is not None:
        raise typer.BadParameter("give --regions or --table, not both")
    check_not_empty(table, "--table")
    check_not_empty(time_field, "--time-field")
    if plot is not None:
        check_plot_path(plot)
    events = list(read_events(sample, limit))
    live = anyio.run(_live_boundaries, config, table) if table is not None else None
    result = run_analysis(rowkey, events, regions=regions, live=live, table=table,
                          time_field=time_field, recent=recent, servers=servers, cap=max_buckets)
    print_analysis(result)
    if plot is not None:
        plot_analysis(result, plot)
        _console.print(f"plot written to {plot}")


def register_analyze(keys_app: typer.Typer) -> None:
    """Mount ``analyze`` on the ``keys`` command group."""
    keys_app.command("analyze")(analyze)

