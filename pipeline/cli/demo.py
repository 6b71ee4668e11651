"""``hbase-ingest demo``: the README's main command, on embedded defaults (``config/demo.toml``).

Starts the local stack, (re)creates the demo tables pre-split from their rowkey designs, produces
example events for every design in the guides, runs the worker until every event is written and
committed, prints a throughput summary, reads a few rows back with their keys decoded, and asks
the fan-out reader for the newest events across every host (a by-time walk of ``logs_by_host``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.markup import escape
from rich.table import Table

from connectors.hbase import HBaseClient
from connectors.kafka import KafkaBroker, delete_topics, end_offsets
from pipeline.cli.console import output_console
from pipeline.cli.errors import check_devstack
from pipeline.cli.logsetup import configure_logging
from pipeline.core.examples import EXAMPLES, generate
from pipeline.core.model import TopicPartition
from pipeline.errors import HBaseIngestError
from pipeline.rowkey import format_key
from pipeline.runtime.admin.tables import create_tables
from pipeline.runtime.ingest.worker import Worker
from pipeline.runtime.process.proctune import tune_process
from pipeline.runtime.produce import produce_events
from pipeline.runtime.read.reader import Reader
from pipeline.runtime.read.rows import compile_row_decoder
from pipeline.settings import Settings

__all__ = ["DEMO_CONFIG", "register"]


def _demo_config() -> Path:
    """``config/demo.toml`` of the checkout, else the copy an installed wheel carries
    (``pipeline/cli/config``, mapped from ``config/`` by pyproject.toml)."""
    here = Path(__file__).resolve().parent
    checkout = here.parents[1] / "config" / "demo.toml"
    return checkout if checkout.is_file() else here / "config" / "demo.toml"


DEMO_CONFIG = _demo_config()
_BY_TIME_ROUTE = "logs_by_host"  # its key leads with the host: a by-time query walks it host by host
_console = output_console()


async def _demo(settings: Settings, count: int, partitions: int) -> None:
    topics = sorted({r.topic for r in settings.routes})
    await delete_topics(settings.kafka, topics)
    async with HBaseClient(settings.hbase) as hbase:
        # designs without a leading salt/bucket are pre-split at the quantiles of a sample of events
        sample = [e for name in EXAMPLES for _, e in generate(name, 2000, seed=99)]
        created = await create_tables(hbase, settings, recreate=True, sample_events=sample)
        for t in created:
            _console.print(escape(f"table {t.table}: {t.plan.regions} region(s), split by {t.plan.method}, "
                                  f"rowkey {t.plan.rowkey}"))

        t0 = time.monotonic()
        produced = 0
        for name, (topic, _) in EXAMPLES.items():
            if topic in topics:
                produced += await produce_events(KafkaBroker(settings.kafka), topic, generate(name, count),
                                                 partitions=partitions)
        _console.print(f"produced {produced} events to {', '.join(topics)} in {time.monotonic() - t0:.1f} s")

        stop_at: dict[TopicPartition, int] = {}
        for topic in topics:
            for p, end in (await end_offsets(settings.kafka, topic)).items():
                stop_at[TopicPartition(topic, p)] = end
        group = f"{settings.kafka.group_id}-{int(time.time())}"
        worker = Worker(settings, hbase, KafkaBroker(settings.kafka), group_id=group, stop_at=stop_at)
        summary = await worker.run()

        table = Table("metric", "value", title="throughput")
        via = ("HBase's RPC, straight to the region servers (client = native)" if settings.hbase.client == "native"
               else "the Thrift gateway (client = thrift)")
        table.add_row("written over", via)
        table.add_row("events consumed", f"{summary.consumed}")
        table.add_row("rows written", f"{summary.rows_written} in {summary.batches_written} batches")
        table.add_row("dead-lettered", f"{summary.dead_lettered}")
        table.add_row("retries", f"{summary.retries}")
        table.add_row("wall time (worker, incl. start-up and group join)", f"{summary.elapsed_s:.2f} s")
        table.add_row("streaming time (first record to last commit)", f"{summary.streaming_s:.2f} s")
        stream = summary.streaming_s or summary.elapsed_s
        table.add_row("events/s while streaming", f"{summary.consumed / stream:,.0f}")
        table.add_row("rows/s while streaming", f"{summary.rows_written / stream:,.0f}")
        for name, rows in sorted(worker.stats.rows_by_table.items()):
            table.add_row(f"  {name}", f"{rows} rows")
        _console.print(table)

        for route in worker.router.routes:  # the worker's compiled routes: no second compilation
            # the reader's row decoder: cells by the column mapping, tally counters summed
            decode_run = compile_row_decoder(route.spec, _key_fields(route.rowkey.decode))
            for row in decode_run(await hbase.scan_cells(route.table, limit=2), ""):
                cols = {c: _short(v) for c, v in row.columns.items()}
                _console.print(f"[bold]{route.table}[/bold] " + escape(
                    f"{format_key(row.key)}\n    key fields: {row.fields}\n    columns: {cols}"))

        # the fan-out reader on the host-led log table: the newest events across every host
        by_host = next((r for r in settings.routes if r.name == _BY_TIME_ROUTE), None)
        if by_host is not None:
            async with Reader(hbase) as reader:
                scan = reader.scan(by_host, newest_first=True, limit=3, by_time=True)
                newest = await scan.collect()
            st = scan.statistics()
            _console.print(escape(
                f"newest {len(newest)} events across every host, by time (scan --route {by_host.name} "
                f"--by-time --newest-first --limit 3): {sum(r.entities for r in st.ranges)} entities walked, "
                f"{st.scanners_opened} scanner calls, {st.elapsed_s * 1000:.0f} ms"))
            for row in newest:
                _console.print(escape(f"    {row.fields}"))


def _key_fields(decode: Callable[[bytes], dict[str, Any]]) -> Callable[[bytes], dict[str, Any]]:
    """``decode``, showing why a key does not decode instead of failing the demo."""
    def fields(key: bytes) -> dict[str, Any]:
        try:
            return decode(key)
        except HBaseIngestError as exc:
            return {"not decodable": str(exc)}
    return fields


def _short(value: Any) -> Any:
    return value[:40] + "..." if isinstance(value, str) and len(value) > 40 else value


def demo(count: int = typer.Option(5000, "--count", "-n", min=1, help="events per example design"),
         partitions: int = typer.Option(8, min=1, help="partitions of each demo topic"),
         config: Path = typer.Option(DEMO_CONFIG, "--config", "-c")) -> None:
    """Run the whole pipeline on embedded defaults against the local stack."""
    check_devstack("hbase-ingest demo")
    from devstack import LocalStack  # the local stack, a test bed: imported when the demo runs
    from devstack.settings import load_profile

    settings = load_profile(config)
    configure_logging("WARNING", settings.logging.format)
    tune_process(settings.runtime)
    stack = LocalStack(settings.stack)
    report = stack.up()
    _console.print(f"stack {'reused' if report.reused else 'started'} ({report.timings_s['total']:.1f} s); "
                   f"state folder: {stack.layout.state}")
    anyio.run(lambda: _demo(settings, count, partitions))


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
