"""``hbase-ingest run`` (the long-lived worker) and ``hbase-ingest produce`` (example events)."""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import typer
from rich.console import Console

from connectors.hbase import HBaseClient
from pipeline.cli.logsetup import configure_logging
from pipeline.core.examples import EXAMPLES, generate
from pipeline.runtime.proctune import tune_process
from pipeline.runtime.produce import produce_events
from pipeline.runtime.worker import Worker, WorkerSummary
from pipeline.settings import Settings, load_settings

__all__ = ["register", "run_worker"]

_console = Console(stderr=True)


async def run_worker(settings: Settings, *, group: str | None = None, metrics: bool | None = None) -> WorkerSummary:
    """Run a worker until SIGTERM/SIGINT; then flush, commit and leave the group."""
    async with HBaseClient(settings.hbase) as hbase:
        worker = Worker(settings, hbase, group_id=group)
        async with anyio.create_task_group() as tg:
            async def on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for sig in signals:
                        _console.print(f"received {signal.Signals(sig).name}: draining, committing, leaving the group")
                        worker.request_stop()
                        return

            tg.start_soon(on_signal)
            if metrics if metrics is not None else settings.metrics.enabled:
                try:
                    from pipeline.runtime.metrics import serve_metrics
                except ModuleNotFoundError:
                    _console.print("metrics are not available in this build")
                else:
                    await tg.start(serve_metrics, settings.metrics, worker)
            summary = await worker.run()
            tg.cancel_scope.cancel()
        return summary


def run(config: Path = typer.Option(..., "--config", "-c", help="TOML profile with tables and routes"),
        group: str | None = typer.Option(None, help="consumer group (default: [kafka].group_id)"),
        metrics: bool | None = typer.Option(None, "--metrics/--no-metrics", help="serve Prometheus metrics"),
        log_level: str = typer.Option("INFO", help="DEBUG, INFO, WARNING")) -> None:
    """Run the ingest worker in its consumer group until SIGTERM/SIGINT."""
    configure_logging(log_level)
    settings = load_settings(config)
    tune_process(settings.runtime)
    summary = anyio.run(lambda: run_worker(settings, group=group, metrics=metrics))
    _console.print(f"consumed {summary.consumed} events, wrote {summary.rows_written} rows in "
                   f"{summary.batches_written} batches, dead-lettered {summary.dead_lettered}, "
                   f"retries {summary.retries}, {summary.elapsed_s:.1f} s")


def produce(example: str = typer.Option(..., "--example", "-e", help=f"one of: {', '.join(EXAMPLES)}"),
            count: int = typer.Option(1000, "--count", "-n", min=1),
            rate: float | None = typer.Option(None, "--rate", help="events per second (default: as fast as possible)"),
            partitions: int = typer.Option(8, help="partitions when the topic is created"),
            topic: str | None = typer.Option(None, help="override the example's topic"),
            seed: int = typer.Option(7),
            config: Path | None = typer.Option(None, "--config", "-c", help="for [kafka] settings")) -> None:
    """Generate realistic example events for the profiles in config/."""
    if example not in EXAMPLES:
        raise typer.BadParameter(f"unknown example {example!r}; known: {', '.join(EXAMPLES)}", param_hint="--example")
    settings = load_settings(config)
    target = topic or EXAMPLES[example][0]
    events = generate(example, count, seed=seed)
    sent = anyio.run(lambda: produce_events(settings.kafka, target, events, partitions=partitions, rate=rate))
    _console.print(f"produced {sent} {example} events to {target!r}")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("produce")(produce)
