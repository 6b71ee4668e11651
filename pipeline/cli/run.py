"""``hbase-ingest run`` (the long-lived worker) and ``hbase-ingest produce`` (example events)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import typer

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker
from connectors.registry import RegistryClient, open_registry
from pipeline.cli.errors import (
    LOG_LEVELS,
    check_devstack,
    check_log_level,
    check_not_empty,
    check_rate,
    check_topic,
    error_leaves,
)
from pipeline.cli.logsetup import LOG_FORMAT_HELP, STDERR, check_log_format, configure_logging, tell
from pipeline.cli.metrics_address import METRICS_HOST_HELP, METRICS_PORT_HELP, with_metrics_address
from pipeline.cli.signals import EXIT_INTERRUPTED, stop_on_signals
from pipeline.core.avro_examples import AVRO_EXAMPLES, avro_writer
from pipeline.core.examples import EXAMPLES, generate
from pipeline.core.records.wire import frame
from pipeline.errors import ConfigError
from pipeline.runtime.ingest.worker import Worker, WorkerSummary
from pipeline.runtime.metrics import serve_metrics
from pipeline.runtime.process.proctune import tune_process
from pipeline.runtime.produce import produce_events
from pipeline.settings import Settings, load_settings

__all__ = ["FAIL_FAST_HELP", "register", "run_worker", "start_metrics", "with_fail_fast"]


def _first_signal(worker: Worker) -> Callable[[], str]:
    """What the first signal does to ``worker``, told when it comes."""
    def action() -> str:
        if worker.starting:
            return "stopping: the worker was still starting, nothing consumed"
        return "draining, committing, leaving the group (again: stop now)"
    return action


async def run_worker(settings: Settings, *, group: str | None = None,
                     metrics: bool | None = None) -> WorkerSummary | None:
    """Run a worker until SIGTERM/SIGINT; then flush, commit and leave the group. A second signal
    stops at once: what HBase acknowledged is committed, the rest is read again next run; returns
    None then. A signal while the worker starts (waits for Kafka, HBase, the registry or a topic;
    connects; joins the group) stops it at once, with nothing consumed: a summary of nothing."""
    summary: WorkerSummary | None = None
    async with HBaseClient(settings.hbase) as hbase, open_registry(settings) as registry:
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), group_id=group, registry=registry)
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signals, worker, tg.cancel_scope, _first_signal(worker))
            if metrics if metrics is not None else settings.metrics.enabled:
                await start_metrics(tg, serve_metrics, settings, worker)
            summary = await worker.run()
            tg.cancel_scope.cancel()
        return summary


async def start_metrics(tg: anyio.abc.TaskGroup, serve: Callable[..., Coroutine[Any, Any, None]], settings: Settings,
                        worker: Worker) -> int:
    """Start ``serve`` (the metrics server) in ``tg``; returns the bound port. A port that cannot be
    bound (in use, not permitted, unknown host) is a :class:`ConfigError` naming the address."""
    m = settings.metrics
    try:
        port: int = await tg.start(serve, m, worker)
    except Exception as exc:
        oserrors = list(error_leaves(exc))
        if not all(isinstance(e, OSError) for e in oserrors):
            raise
        raise ConfigError(f"cannot serve metrics on {m.host}:{m.port}: {oserrors[0]}") from exc
    return port


FAIL_FAST_HELP = ("when Kafka, HBase or the registry is unreachable at start-up, or a topic read does not exist: "
                  "stop at once (--fail-fast), or wait and retry with backoff (--wait); default: [runtime] "
                  "fail_fast, else wait")


def with_fail_fast(settings: Settings, fail_fast: bool | None) -> Settings:
    """``settings`` with ``[runtime] fail_fast`` set from the option (None keeps the setting)."""
    if fail_fast is None:
        return settings
    return settings.model_copy(update={"runtime": settings.runtime.model_copy(update={"fail_fast": fail_fast})})


def run(config: Path = typer.Option(..., "--config", "-c", help="TOML profile with tables and routes"),
        group: str | None = typer.Option(None, help="consumer group (default: [kafka].group_id)"),
        metrics: bool | None = typer.Option(None, "--metrics/--no-metrics", help="serve Prometheus metrics"),
        metrics_host: str | None = typer.Option(None, "--metrics-host", help=METRICS_HOST_HELP),
        metrics_port: int | None = typer.Option(None, "--metrics-port", min=0, max=65535,
                                                help=METRICS_PORT_HELP),
        log_level: str = typer.Option("INFO", help=", ".join(LOG_LEVELS)),
        log_format: str | None = typer.Option(None, "--log-format", help=LOG_FORMAT_HELP),
        fail_fast: bool | None = typer.Option(None, "--fail-fast/--wait", help=FAIL_FAST_HELP)) -> None:
    """Run the ingest worker in its consumer group until SIGTERM/SIGINT."""
    check_not_empty(group, "--group")
    level, fmt = check_log_level(log_level), check_log_format(log_format)
    settings = with_fail_fast(with_metrics_address(load_settings(config), metrics_host, metrics_port), fail_fast)
    configure_logging(level, fmt or settings.logging.format)
    tune_process(settings.runtime)
    summary = anyio.run(lambda: run_worker(settings, group=group, metrics=metrics))
    if summary is None:
        tell("stopped without draining: what HBase acknowledged is committed, the rest is read again by the "
             "next run", "stopped_without_draining", warning=True)
        sys.exit(EXIT_INTERRUPTED)
    tell(f"consumed {summary.consumed} events, wrote {summary.rows_written} rows in "
         f"{summary.batches_written} batches, dead-lettered {summary.dead_lettered}, "
         f"retries {summary.retries}, {summary.elapsed_s:.1f} s", "run_summary",
         consumed=summary.consumed, rows=summary.rows_written, batches=summary.batches_written,
         dead_lettered=summary.dead_lettered, retries=summary.retries, elapsed_s=round(summary.elapsed_s, 1))
    if summary.latency_p50_ms is not None:
        p99 = f"{summary.latency_p99_ms} ms" if summary.latency_p99_ms is not None else "over 60 s"
        tell(f"latency from each record's timestamp to written: p50 <= {summary.latency_p50_ms} ms, p99 <= {p99}",
             "run_latency", p50_ms=summary.latency_p50_ms, p99_ms=summary.latency_p99_ms)
    skipped = sum(summary.skipped.values())
    if skipped:
        tell(f"warning: {skipped} offsets were never delivered by Kafka (deleted by retention before "
             "they were read, compacted away, or transaction markers)", "offsets_never_delivered",
             warning=True, offsets=skipped)


def produce(example: str = typer.Option(..., "--example", "-e", help=f"one of: {', '.join(EXAMPLES)}"),
            count: int = typer.Option(1000, "--count", "-n", min=1),
            rate: float | None = typer.Option(
                None, "--rate", help="events per second, more than 0 (default: as fast as possible)"),
            partitions: int = typer.Option(8, min=1, help="partitions when the topic is created"),
            topic: str | None = typer.Option(None, help="override the example's topic"),
            seed: int = typer.Option(7),
            config: Path | None = typer.Option(None, "--config", "-c", help="for [kafka] settings"),
            out: Path | None = typer.Option(
                None, "--out", help="write the events to this file as JSON lines instead of Kafka "
                                    "(a sample for `tables create --sample`)"),
            value_format: str = typer.Option(
                "json", "--format", help="json, or avro: the Confluent wire format, the example's schema registered "
                                         "under <topic>-value in [registry] url (default: the local stack's)")) -> None:
    """Generate realistic example events for the profiles in config/."""
    if example not in EXAMPLES:
        raise typer.BadParameter(f"unknown example {example!r}; known: {', '.join(EXAMPLES)}", param_hint="--example")
    events = generate(example, count, seed=seed)
    if out is not None:
        if out.is_dir() or not out.parent.is_dir():
            raise ConfigError(f"--out {str(out)!r}: " + ("is a directory" if out.is_dir() else
                                                         f"the folder {str(out.parent)!r} does not exist"))
        with out.open("wb") as f:
            f.writelines(orjson.dumps(event) + b"\n" for _, event in events)
        STDERR.print(f"wrote {count} {example} events to {str(out)!r}")
        return
    if value_format not in ("json", "avro"):
        raise typer.BadParameter(f"unknown format {value_format!r}; known: json, avro", param_hint="--format")
    check_rate(rate)
    check_topic(topic)
    settings = load_settings(config)
    url = settings.registry.url
    if value_format == "avro" and url is None:
        url = _local_registry_url(config)
    target = EXAMPLES[example][0] if topic is None else topic
    kafka = KafkaBroker(settings.kafka)

    async def send() -> tuple[int, str]:
        if value_format == "json":
            return await produce_events(kafka, target, events, partitions=partitions, rate=rate), ""
        registry = RegistryClient(settings.registry.model_copy(update={"url": url}))
        try:
            ident = await registry.register(f"{target}-value", orjson.dumps(AVRO_EXAMPLES[example]).decode())
        finally:
            await registry.aclose()
        body = avro_writer(AVRO_EXAMPLES[example])
        sent = await produce_events(kafka, target, events, partitions=partitions, rate=rate,
                                    encode=lambda value: frame(ident, body(value)))
        return sent, f" as Avro (schema id {ident} in {url})"
    sent, how = anyio.run(send)
    STDERR.print(f"produced {sent} {example} events to {target!r}{how}")


def _local_registry_url(config: Path | None) -> str:
    """The schema registry of the local stack (``stack up --registry``; ``[stack] registry_port``)."""
    check_devstack("produce --format avro without [registry] url")
    from devstack.settings import load_stack_settings  # the local stack, a test bed: imported when asked for

    return f"http://127.0.0.1:{load_stack_settings(config).registry_port}/apis/ccompat/v7"


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("produce")(produce)
