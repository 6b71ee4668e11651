"""``hbase-ingest top``: a live terminal view of a worker's (or backfill's) ``/metrics`` endpoint:
throughput, lag per partition, and the write distribution over each table's regions (one bar per
region, over the skew window), so a hotspot shows at a glance.

Parsing (:func:`parse_snapshot`) and drawing (:func:`render`) are pure; rates come from two
snapshots.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Annotated

import typer
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pipeline.cli.console import output_console, unfolded
from pipeline.errors import ConfigError

__all__ = ["RegionBar", "Snapshot", "parse_snapshot", "register", "render", "scrape"]

_P = "hbase_ingest_"
_BAR_WIDTH = 40
_KEY_WIDTH = 24  # a start key longer than this ends in "…" on a terminal


@dataclass(frozen=True)
class RegionBar:
    start_key: str
    region: str
    rows: float


@dataclass
class Snapshot:
    """The figures ``top`` shows, from one scrape taken at ``at_s`` (monotonic seconds)."""

    at_s: float
    consumed: float = 0.0
    rows: float = 0.0
    dead: dict[str, float] = field(default_factory=dict)
    retries: float = 0.0
    in_flight_bytes: float = 0.0
    ready: float = 0.0
    committed: dict[tuple[str, str], float] = field(default_factory=dict)
    log_end: dict[tuple[str, str], float] = field(default_factory=dict)
    lag: dict[tuple[str, str], float] = field(default_factory=dict)
    remaining: dict[tuple[str, str], float] = field(default_factory=dict)
    regions: dict[str, list[RegionBar]] = field(default_factory=dict)
    skew: dict[str, float] = field(default_factory=dict)
    flush_count: float = 0.0
    flush_sum: float = 0.0


def parse_snapshot(text: str, at_s: float) -> Snapshot:
    """Read the exposition text of :mod:`pipeline.runtime.metrics.registry`; unknown series are ignored."""
    snap = Snapshot(at_s)
    regions: dict[str, list[RegionBar]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name, labels, value = s.name, s.labels, float(s.value)
            tp = (labels.get("topic", ""), labels.get("partition", ""))
            if name == _P + "events_consumed_total":
                snap.consumed += value
            elif name == _P + "rows_written_total":
                snap.rows += value
            elif name == _P + "dead_lettered_total":
                snap.dead[labels.get("reason", "")] = value
            elif name == _P + "retries_total":
                snap.retries += value
            elif name == _P + "in_flight_bytes":
                snap.in_flight_bytes = value
            elif name == _P + "ready":
                snap.ready = value
            elif name == _P + "committed_offset":
                snap.committed[tp] = value
            elif name == _P + "log_end_offset":
                snap.log_end[tp] = value
            elif name == _P + "consumer_lag":
                snap.lag[tp] = value
            elif name == _P + "backfill_remaining":
                snap.remaining[tp] = value
            elif name == _P + "region_window_rows":
                regions[labels["table"]].append(RegionBar(labels.get("start_key", ""), labels["region"], value))
            elif name == _P + "region_skew":
                snap.skew[labels["table"]] = value
            elif name == _P + "flush_seconds_count":
                snap.flush_count += value
            elif name == _P + "flush_seconds_sum":
                snap.flush_sum += value
    snap.regions = {t: sorted(bars, key=lambda b: b.start_key) for t, bars in regions.items()}
    return snap


def _rate(prev: Snapshot | None, cur: Snapshot, attr: str) -> float | None:
    if prev is None or cur.at_s <= prev.at_s:
        return None
    delta = float(getattr(cur, attr)) - float(getattr(prev, attr))
    return max(0.0, delta) / (cur.at_s - prev.at_s)


def _fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}/s"


def render(prev: Snapshot | None, cur: Snapshot, url: str = "", key_width: int | None = _KEY_WIDTH) -> RenderableType:
    """One frame: a header of totals and rates, the lag table, and a bar per region per table
    (start keys cut to ``key_width`` characters; ``None``: shown whole)."""
    head = Table.grid(padding=(0, 3))
    head.add_row(
        Text(f"events {cur.consumed:,.0f} ({_fmt_rate(_rate(prev, cur, 'consumed'))})", style="bold"),
        Text(f"rows {cur.rows:,.0f} ({_fmt_rate(_rate(prev, cur, 'rows'))})", style="bold"),
        Text(f"dead letters {sum(cur.dead.values()):,.0f}"),
        Text(f"retries {cur.retries:,.0f}"),
        Text(f"in flight {cur.in_flight_bytes / 1024:,.0f} KiB"),
        Text("ready" if cur.ready else "not ready", style="green" if cur.ready else "red"),
    )
    if cur.flush_count:
        head.add_row(Text(f"mean flush {1000 * cur.flush_sum / cur.flush_count:.1f} ms"), "", "", "", "", "")
    parts: list[RenderableType] = [Text(f"hbase-ingest top  {url}", style="dim"), head]

    # a backfill stops at its slice end: what matters is "backfill left"; the lag to the log end
    # (records produced since the slice was fixed, or past its end) is shown, not flagged
    backfill = bool(cur.remaining)
    lag = Table(title="lag", title_justify="left", show_edge=False)
    for col in ("topic", "partition", "committed", "log end", "lag to log end" if backfill else "lag"):
        lag.add_column(col, justify="right" if col != "topic" else "left")
    if backfill:
        lag.add_column("backfill left", justify="right")
    keys = sorted(set(cur.committed) | set(cur.lag), key=lambda k: (k[0], int(k[1]) if k[1].isdigit() else 0))
    for key in keys:
        lag_v = cur.lag.get(key)
        row: list[RenderableType] = [
            key[0],
            key[1],
            f"{cur.committed.get(key, 0):,.0f}",
            f"{cur.log_end.get(key, 0):,.0f}",
            Text("-" if lag_v is None else f"{lag_v:,.0f}",
                 style="dim" if backfill else "red" if lag_v else "green"),
        ]
        if cur.remaining:
            row.append(f"{cur.remaining.get(key, 0):,.0f}")
        lag.add_row(*row)
    if keys:
        lag.add_row("total", "", "", "", f"{sum(cur.lag.values()):,.0f}", *([""] if cur.remaining else []))
    parts.append(lag)

    for table, bars in sorted(cur.regions.items()):
        total = sum(b.rows for b in bars)
        top = max((b.rows for b in bars), default=0.0)
        mean = total / len(bars) if bars else 0.0
        skew = cur.skew.get(table, 0.0)
        grid = Table(
            title=f"{table}: rows per region (window)  skew {skew:.2f}",
            title_justify="left",
            show_edge=False,
            show_header=False,
        )
        grid.add_column("start key", max_width=key_width, overflow="ellipsis", no_wrap=True)
        grid.add_column("bar", no_wrap=True)
        grid.add_column("rows", justify="right")
        grid.add_column("share", justify="right")
        for b in bars:
            width = round(_BAR_WIDTH * b.rows / top) if top else 0
            hot = mean > 0 and b.rows > 2 * mean
            grid.add_row(
                b.start_key or "(first)",
                Text("█" * width + "·" * (_BAR_WIDTH - width), style="red" if hot else "cyan"),
                f"{b.rows:,.0f}",
                f"{100 * b.rows / total:.0f}%" if total else "-",
            )
        parts.append(grid)
    return Group(*parts)


def scrape(url: str, timeout_s: float = 5.0) -> str:
    """The exposition text at ``url``. Raises ``OSError`` (``URLError``) when unreachable."""
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        body: bytes = resp.read()
    return body.decode("utf-8")


def _metrics_url(url: str) -> str:
    """``url`` with ``http://`` and ``/metrics`` added when missing; ConfigError naming what is
    wrong when it is not an http(s) URL with a host and a valid port."""
    text = url.strip()
    if not text:
        raise ConfigError("--url must not be empty")
    parsed = urllib.parse.urlsplit(text if "://" in text else f"http://{text}")
    if parsed.scheme not in ("http", "https"):
        raise ConfigError(f"--url {url!r} is not an http(s) URL")
    if any(c.isspace() for c in text):
        raise ConfigError(f"--url {url!r} is not a URL: it contains whitespace")
    if not parsed.hostname:
        raise ConfigError(f"--url {url!r} has no host (expected e.g. http://127.0.0.1:9108/metrics)")
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if port in (-1, 0):
        given = parsed.netloc.rpartition(":")[2]
        raise ConfigError(f"--url {url!r}: the port {given!r} is not a port number (1-65535)")
    if parsed.path in ("", "/"):
        parsed = parsed._replace(path="/metrics")
    return urllib.parse.urlunsplit(parsed)


def top(
    url: Annotated[
        str, typer.Option("--url", "-u", help="a worker's or backfill's /metrics URL")
    ] = "http://127.0.0.1:9108/metrics",
    interval: Annotated[float, typer.Option("--interval", "-i", min=0.1, help="seconds between scrapes")] = 1.0,
    once: Annotated[
        bool,
        typer.Option("--once", help="print one frame (two scrapes, --interval apart) and exit"),
    ] = False,
) -> None:
    """Live view of throughput, lag and the write distribution across regions."""
    target = _metrics_url(url)
    console = output_console()
    key_width = None if unfolded(console) else _KEY_WIDTH

    def take() -> Snapshot:
        try:
            text = scrape(target)
        except (urllib.error.URLError, OSError, ValueError) as exc:  # InvalidURL is a ValueError
            raise ConfigError(f"--url: cannot scrape {target}: {exc}") from exc
        try:
            return parse_snapshot(text, time.monotonic())
        except ValueError as exc:
            raise ConfigError(f"--url: {target} does not serve Prometheus metrics: {exc}") from exc

    prev = take()
    if once:
        time.sleep(interval)
        console.print(render(prev, take(), target, key_width))
        return
    with Live(render(None, prev, target, key_width), console=console, refresh_per_second=4, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                cur = take()
                live.update(render(prev, cur, target, key_width))
                prev = cur
        except KeyboardInterrupt:
            pass


def register(app: typer.Typer) -> None:
    app.command("top")(top)
