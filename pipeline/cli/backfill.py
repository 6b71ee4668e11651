"""``hbase-ingest backfill``: replay a bounded slice of a topic.

See :mod:`pipeline.runtime.backfill.slice` for the slice, :mod:`pipeline.runtime.backfill.state` for
resuming and :mod:`pipeline.runtime.backfill.run` for the rate cap."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import anyio
import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker
from connectors.registry import open_registry
from pipeline.cli.errors import (
    LOG_LEVELS,
    check_log_level,
    check_not_empty,
    check_rate,
    check_state_dir,
    check_topic,
)
from pipeline.cli.logsetup import LOG_FORMAT_HELP, STDERR, check_log_format, configure_logging, sentences, tell
from pipeline.cli.metrics_address import METRICS_HOST_HELP, METRICS_PORT_HELP, with_metrics_address
from pipeline.cli.run import FAIL_FAST_HELP, start_metrics, with_fail_fast
from pipeline.cli.signals import EXIT_INTERRUPTED, stop_on_signals
from pipeline.errors import ConfigError
from pipeline.runtime.backfill.redrive import redrive_settings
from pipeline.runtime.backfill.run import (
    Backfill,
    BackfillSummary,
    SliceArgs,
    default_group,
    parse_offsets,
    parse_time,
)
from pipeline.runtime.metrics import serve_metrics
from pipeline.runtime.process.proctune import tune_process
from pipeline.settings import Settings, load_settings

__all__ = ["register", "run_backfill"]

T = TypeVar("T")


class _ProgressView:
    """One bar for the slice (events/s, ETA) and one per partition, by committed offsets."""

    def __init__(self, backfill: Backfill, progress: Progress) -> None:
        self.backfill = backfill
        self.progress = progress
        self.overall: TaskID | None = None
        self.per_partition: dict[int, TaskID] = {}

    def update(self) -> None:
        snap = self.backfill.progress()
        if not snap.partitions:
            return
        progress = self.progress
        rate = f"{snap.events_per_s:,.0f} ev/s"
        if self.overall is None:
            self.overall = progress.add_task(self.backfill.args.topic, total=snap.total or 1, rate=rate)
            for p in snap.partitions:
                self.per_partition[p.partition] = progress.add_task(
                    f"  partition {p.partition}", total=p.total or 1, rate=""
                )
        progress.update(self.overall, completed=snap.done if snap.total else 1, rate=rate)
        for p in snap.partitions:
            progress.update(self.per_partition[p.partition], completed=p.done if p.total else 1)

    async def run(self) -> None:
        while True:
            self.update()
            await anyio.sleep(0.25)


async def run_backfill(
    settings: Settings,
    args: SliceArgs,
    *,
    group: str | None = None,
    rate: float | None = None,
    restart: bool = False,
    state_dir: Path | None = None,
    metrics: bool = False,
    show_progress: bool = True,
) -> BackfillSummary | None:
    """Run one backfill until it finishes or SIGINT/SIGTERM arrives (then drain, commit, return).
    A second signal cancels at once and returns None (the next run resumes from the last commit)."""
    summary: BackfillSummary | None = None
    async with HBaseClient(settings.hbase) as hbase, open_registry(settings) as registry:
        backfill = Backfill(settings, hbase, KafkaBroker(settings.kafka), args, group=group, rate=rate,
                            state_dir=state_dir, restart=restart, registry=registry)
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signals, backfill, tg.cancel_scope,
                          "draining and committing; run the same command again to resume")
            slice_ = await backfill.prepare()
            if not backfill.already_complete:
                tell(
                    f"backfill {args.topic!r} in group {backfill.group!r}: {slice_.total:,} events "
                    f"in {len(slice_.start)} partitions"
                    + (" (resuming)" if backfill.resumed else "")
                    + (f", at most {rate:,.0f} events/s" if rate else ""),
                    "backfill_started", topic=args.topic, group=backfill.group, events=slice_.total,
                    partitions=len(slice_.start), resuming=backfill.resumed, max_rate=rate,
                )
            for p, (first, end) in sorted(backfill.deleted.items()):
                tell(
                    f"warning: partition {p}: offsets {first:,} to {end - 1:,} ({end - first:,} records) left the "
                    "topic (retention or DeleteRecords) before this backfill read them; they cannot be replayed",
                    "offsets_left_the_topic", warning=True, partition=p, first=first, last=end - 1,
                    records=end - first,
                )
            if metrics and backfill.worker is not None:
                port = await start_metrics(tg, serve_metrics, settings, backfill.worker)
                tell(f"metrics on http://{settings.metrics.host}:{port}/metrics", "metrics_listening",
                     host=settings.metrics.host, port=port)
            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=STDERR,
                disable=not show_progress or backfill.already_complete or not sentences(),
            )
            view = _ProgressView(backfill, progress)
            with progress:
                tg.start_soon(view.run)
                summary = await backfill.run()
                view.update()
            tg.cancel_scope.cancel()
        return summary


def backfill(
    config: Annotated[Path, typer.Option("--config", "-c", help="TOML profile with tables and routes")],
    topic: Annotated[str, typer.Option("--topic", "-t", help="the topic to replay")],
    from_time: Annotated[
        str | None,
        typer.Option(
            "--from-time",
            help="ISO-8601 time (UTC when no zone) or epoch ms: start at the first offset whose Kafka record "
            "timestamp (the producer's CreateTime, not an event field) is >= it",
        ),
    ] = None,
    from_offset: Annotated[str | None, typer.Option("--from-offset", help="P:O,... start offsets (inclusive)")] = None,
    to_time: Annotated[
        str | None,
        typer.Option(
            "--to-time",
            help="ISO-8601 time or epoch ms, on Kafka record timestamps (exclusive); default: the log end "
            "offsets when the backfill is first started",
        ),
    ] = None,
    to_offset: Annotated[str | None, typer.Option("--to-offset", help="P:O,... end offsets (exclusive)")] = None,
    rate: Annotated[float | None, typer.Option("--rate", min=0.001, help="at most this many events per second")] = None,
    route: Annotated[
        str | None,
        typer.Option(
            "--route",
            help="re-drive the dead letters of this route: --topic is then [kafka].dead_letter_topic, and each dead "
            "letter the route refused (or that was refused as a whole, from the route's topic) is routed again "
            "into this route alone, as the record it was; the others are skipped",
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            help="consumer group (default: <group_id>.backfill.<topic>.<hash of the slice arguments>)",
        ),
    ] = None,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart",
            help="forget stored progress: resolve the slice again, replay from its start",
        ),
    ] = False,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            help="where resolved slices are kept (default: $XDG_STATE_HOME/hbase-ingest/backfill)",
        ),
    ] = None,
    metrics: Annotated[
        bool | None,
        typer.Option("--metrics/--no-metrics", help="serve Prometheus metrics (default: [metrics].enabled)"),
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", min=0, max=65535, help=METRICS_PORT_HELP)
    ] = None,
    metrics_host: Annotated[str | None, typer.Option("--metrics-host", help=METRICS_HOST_HELP)] = None,
    show_progress: Annotated[bool, typer.Option("--progress/--no-progress", help="show a progress bar")] = True,
    log_level: Annotated[str, typer.Option(help=", ".join(LOG_LEVELS))] = "WARNING",
    log_format: Annotated[str | None, typer.Option("--log-format", help=LOG_FORMAT_HELP)] = None,
    fail_fast: Annotated[bool | None, typer.Option("--fail-fast/--wait", help=FAIL_FAST_HELP)] = None,
) -> None:
    """Replay a bounded slice of a topic into HBase, resumably, in a consumer group of its own."""
    check_topic(topic)
    check_rate(rate)
    check_not_empty(group, "--group")
    check_state_dir(state_dir)
    level, fmt = check_log_level(log_level), check_log_format(log_format)
    args = SliceArgs(  # a ConfigError names the options that do not go together
        topic,
        from_time_ms=_option(parse_time, from_time, "--from-time"),
        from_offsets=_option(parse_offsets, from_offset, "--from-offset"),
        to_time_ms=_option(parse_time, to_time, "--to-time"),
        to_offsets=_option(parse_offsets, to_offset, "--to-offset"),
    )
    settings = with_fail_fast(with_metrics_address(load_settings(config), metrics_host, metrics_port), fail_fast)
    if route is not None:
        settings = redrive_settings(settings, route, topic)
        group = group or f"{default_group(settings, args)}.{route}"
    configure_logging(level, fmt or settings.logging.format)
    tune_process(settings.runtime)
    use_metrics = metrics if metrics is not None else settings.metrics.enabled
    summary = anyio.run(
        lambda: run_backfill(
            settings,
            args,
            group=group,
            rate=rate,
            restart=restart,
            state_dir=state_dir,
            metrics=use_metrics,
            show_progress=show_progress,
        )
    )
    _report(summary)


def _report(summary: BackfillSummary | None) -> None:
    """Tell how the backfill ended; exit with EXIT_INTERRUPTED when it stopped before its end."""
    if summary is None:
        tell("stopped without draining; run the same command again to resume from the last commit",
             "stopped_without_draining", warning=True)
        sys.exit(EXIT_INTERRUPTED)
    if summary.already_complete:
        tell(
            f"backfill of {summary.slice.total:,} events in group {summary.group!r} is already "
            "complete (pass --restart to replay it again)",
            "backfill_already_complete", events=summary.slice.total, group=summary.group,
        )
        return
    rate_s = summary.events / summary.duration_s if summary.duration_s > 0 else 0.0
    tell(
        f"{'done' if summary.complete else 'stopped'}: {summary.events:,} events, "
        f"{summary.rows_written:,} rows, {summary.dead_lettered:,} dead letters, "
        f"{summary.retries} retries in {summary.duration_s:.1f} s ({rate_s:,.0f} events/s)",
        "backfill_summary", complete=summary.complete, events=summary.events, rows=summary.rows_written,
        dead_lettered=summary.dead_lettered, retries=summary.retries, duration_s=round(summary.duration_s, 1),
        events_per_s=round(rate_s),
    )
    if summary.skipped:
        tell(
            f"warning: {summary.skipped:,} offsets of the slice were never delivered by Kafka (deleted by "
            "retention before they were read, compacted away, or transaction markers); they are not in HBase",
            "offsets_never_delivered", warning=True, offsets=summary.skipped,
        )
    if not summary.complete:
        left = summary.slice.total - sum(
            min(max(0, summary.committed.get(p, s) - s), summary.slice.end[p] - s)
            for p, s in summary.slice.start.items()
        )
        tell(f"{left:,} events left; run the same command again to resume", "backfill_incomplete", events_left=left)
        sys.exit(EXIT_INTERRUPTED)


def _option(parse: Callable[[str], T], text: str | None, option: str) -> T | None:
    """``parse(text)`` for a given option (an empty string is an error, not "not given")."""
    if text is None:
        return None
    if not text.strip():
        raise ConfigError(f"{option} must not be empty")
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from exc


def register(app: typer.Typer) -> None:
    app.command("backfill")(backfill)
