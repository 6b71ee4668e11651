"""The fault suite with real processes (issue 24, item 7): a region server killed and all of HBase
stopped for a minute (these two with the workers writing over HBase's RPC, ``client = "native"``;
:mod:`.test_fault_combined` kills a region server under Thrift), regions split and moved (over each
transport), the Kafka broker killed, workers killed while HBase is down, and three workers killed at
random over 200,000 events (these through the Thrift gateway). Workers run as ``python -m pipeline run``
subprocesses against a cluster of this module's own (two region servers, one gateway, its own Kafka:
:mod:`.fault_support`). Each test ends with every event's row checked byte for byte, one version per
cell, and writes its recovery times (failover and resume seconds) to the terminal and to the test's
properties (junit XML)."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.to_thread import run_sync

from connectors.hbase import HBaseClient
from devstack import LocalStack
from devstack.readiness import hbase_round_trip
from pipeline.settings import HBaseClientKind, Settings

from .fault_support import (
    WorkerProcess,
    assert_every_row,
    busiest_region_server,
    cluster_settings,
    committed_offsets,
    hbase_settings,
    http_get,
    index_rows,
    index_settings,
    kill_9,
    own_stack,
    produce_to_partitions,
    region_admin,
    stop_hbase,
    with_cluster,
)
from .worker_support import order_event, order_settings, setup, write_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROWS = "hbase_ingest_rows_written_total"
CONSUMED = "hbase_ingest_events_consumed_total"
Report = Callable[..., None]
MakeWorker = Callable[[Path, str], WorkerProcess]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    yield from own_stack(cluster_settings(tmp_path_factory.mktemp("faults") / "state"))


@pytest.fixture
def whole(cluster: LocalStack) -> LocalStack:
    """The cluster with every process running (a test before may have left one stopped or killed)."""
    cluster.up()
    return cluster


@pytest.fixture
async def hbase(whole: LocalStack) -> Any:
    async with HBaseClient(hbase_settings(whole)) as client:
        yield client


@pytest.fixture
def workers(whole: LocalStack, tmp_path: Path) -> Iterator[MakeWorker]:
    """Makes workers (not started); every one still running at the end of the test is killed."""
    made: list[WorkerProcess] = []

    def make(config: Path, name: str) -> WorkerProcess:
        w = WorkerProcess(config, tmp_path / f"{name}.log", whole)
        made.append(w)
        return w

    yield make
    for w in made:
        w.kill()


@pytest.fixture
def report(record_property: Callable[[str, object], None], capsys: pytest.CaptureFixture[str],
           request: pytest.FixtureRequest) -> Report:
    """Record a test's figures: a junit property each, and one line on the terminal."""
    def write(**figures: float) -> None:
        for k, v in figures.items():
            record_property(k, round(v, 2))
        with capsys.disabled():
            text = ", ".join(f"{k}={v:.1f}" for k, v in figures.items())
            sys.stdout.write(f"\n[fault figures] {request.node.name}: {text}\n")

    return write


async def _poll(check: Callable[[], Awaitable[bool]], limit_s: float, what: str, pause_s: float = 0.5) -> float:
    """Wait until ``check`` holds; returns the seconds it took. Fails naming ``what`` after ``limit_s``."""
    t0 = time.monotonic()
    while not await check():
        assert time.monotonic() - t0 < limit_s, f"{what}: not within {limit_s:.0f} s"
        await anyio.sleep(pause_s)
    return time.monotonic() - t0


async def _metric(w: WorkerProcess, name: str, label: str = "") -> float:
    return await run_sync(w.metric, name, label)


def _per_partition(total: int, partitions: int) -> dict[int, int]:
    """Events 0..total-1 sent to partition i % partitions: the end offset of each partition."""
    return {p: len(range(p, total, partitions)) for p in range(partitions)}


async def _all_committed(settings: Settings, topic: str, total: int, partitions: int) -> bool:
    try:
        return await committed_offsets(settings, topic, partitions) == _per_partition(total, partitions)
    except Exception:  # Kafka restarting: not yet
        return False


async def _committed_events(settings: Settings, topic: str, partitions: int) -> int:
    """Events committed so far over every partition (0 while Kafka restarts)."""
    try:
        return sum(c for c in (await committed_offsets(settings, topic, partitions)).values() if c)
    except Exception:  # Kafka restarting: not yet
        return 0


async def _wait_all_committed(settings: Settings, topic: str, total: int, partitions: int, limit_s: float) -> float:
    async def done() -> bool:
        return await _all_committed(settings, topic, total, partitions)

    return await _poll(done, limit_s, f"all {total} events committed", pause_s=1.0)


async def _rose(w: WorkerProcess, name: str, labels: list[str], limit_s: float = 120) -> float:
    """Seconds until every series ``name`` with one of ``labels`` (one sum each) rises above its value now."""
    base = [await _metric(w, name, label) for label in labels]

    async def rose() -> bool:
        return all([await _metric(w, name, label) > b for label, b in zip(labels, base, strict=True)])

    return await _poll(rose, limit_s, f"{name} {labels} rising above {base}", pause_s=0.2)


async def _restart_hbase(whole: LocalStack, writing: Callable[[], Awaitable[bool]]) -> tuple[float, float]:
    """Run ``up`` and sample meanwhile; returns the seconds from ``up`` to the gateway's first round trip,
    and from then until ``writing`` holds (0 when it held first)."""
    gw = whole.gateways[0]
    t0 = time.monotonic()
    t_gw: float | None = None
    t_write: float | None = None

    def round_trip() -> bool:
        try:
            hbase_round_trip(gw.host, gw.thrift_port, gw.thrift2_port, 2.0)
        except Exception:
            return False
        return True

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_sync, whole.up)
        while t_gw is None or t_write is None:
            assert time.monotonic() - t0 < 300, "HBase not back, or no write, within 300 s"
            if t_write is None and await writing():
                t_write = time.monotonic()
            if t_gw is None and await run_sync(round_trip):
                t_gw = time.monotonic()
            await anyio.sleep(0.2)
    assert t_gw is not None and t_write is not None
    return t_gw - t0, max(0.0, t_write - t_gw)


async def _stop_all(*ws: WorkerProcess) -> None:
    """SIGTERM each worker once it serves (a run just started may not handle signals yet); each must
    drain and exit 0."""
    for w in ws:
        async def serving(w: WorkerProcess = w) -> bool:
            return (await run_sync(http_get, w.metrics_port, "/healthz"))[0] == 200

        await _poll(serving, 60, f"{w.log.stem} serving /healthz")
    codes = [await run_sync(w.stop) for w in ws]
    assert codes == [0] * len(ws), [w.output()[-3000:] for w in ws]


def _settings(whole: LocalStack, unique: str, client: HBaseClientKind = "thrift",
              **writer: Any) -> Settings:
    """The order design on the cluster; ``client="native"``: the workers write over HBase's RPC."""
    return with_cluster(order_settings(unique, **writer), whole, client)


def _started(workers: MakeWorker, tmp_path: Path, settings: Settings, *names: str) -> list[WorkerProcess]:
    """Workers named ``names`` on one profile written for ``settings``, started."""
    config = write_config(tmp_path / "w.toml", settings)
    crew = [workers(config, name) for name in names]
    for w in crew:
        w.start()
    return crew


async def _writing(*crew: WorkerProcess, ready: bool = False) -> float:
    """Wait (at most 120 s) until the workers wrote 3,000 rows between them, and with ``ready`` until
    the first one's /readyz answers 200; returns the seconds it took."""
    async def started() -> bool:
        rows = sum([await _metric(w, ROWS) for w in crew])
        return rows >= 3000 and (not ready or (await run_sync(crew[0].readyz))[0] == 200)

    return await _poll(started, 120, "the workers writing" + (" and ready" if ready else ""))


async def test_a_killed_region_server_s_regions_are_reassigned_and_nothing_is_lost(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report) -> None:
    settings = _settings(whole, unique, "native", max_batch_rows=100, concurrency=2)
    partitions, total = 4, 24_000
    topic = await setup(settings, hbase, partitions=partitions)
    tables = [r.table for r in settings.routes]
    events = [order_event(i) for i in range(total)]
    (w,) = _started(workers, tmp_path, settings, "worker")
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_to_partitions, settings, topic, events, 0, partitions, 1500.0)
        await _writing(w)
        # the region server holding most of the tables' regions (both, if one holds them all)
        victim, on_victim = await run_sync(busiest_region_server, whole, tables)
        t_kill = time.monotonic()
        await run_sync(kill_9, whole, victim)
        # the victim's tables write again once its regions are reassigned
        await _rose(w, ROWS, [f'table="{t}"' for t in on_victim], 180)
        failover_s = time.monotonic() - t_kill
        await _wait_all_committed(settings, topic, total, partitions, 240)
        finish_s = time.monotonic() - t_kill
    await _stop_all(w)
    checked = await run_sync(assert_every_row, whole, settings, events)
    assert checked == 3 * total
    assert w.alive is False and len(w.runs) == 1  # the worker never died
    report(failover_s=failover_s, finish_after_kill_s=finish_s, tables_on_victim=float(len(on_victim)))


@pytest.mark.parametrize("client", ["native", "thrift"])
async def test_regions_split_and_moved_while_writing_lose_nothing_and_the_map_follows(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report, client: HBaseClientKind) -> None:
    settings = _settings(whole, unique, client, max_batch_rows=100, concurrency=2)
    partitions, total = 4, 60_000
    topic = await setup(settings, hbase, partitions=partitions)
    seller, buyer, index = (r.table for r in settings.routes)
    events = [order_event(i) for i in range(total)]
    (w,) = _started(workers, tmp_path, settings, "worker")
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_to_partitions, settings, topic, events, 0, partitions, 1500.0)
        await _writing(w)
        # counted before the split: the worker may follow while the moves are still under way
        lines = {t: f"event='region_map_refreshed' table='{t}' regions=2" for t in (seller, buyer, index)}
        before = {t: w.output().count(line) for t, line in lines.items()}
        t0 = time.monotonic()
        # each table split in two (the index table ahead of the writes: both daughters get rows), then
        # every region moved to the other region server
        ops = await run_sync(lambda: region_admin(
            whole, f"split:{index}:ORD00030000", f"split:{seller}:s003", f"split:{buyer}:b0006",
            f"move:{index}", f"move:{seller}", f"move:{buyer}"))
        admin_s = time.monotonic() - t0
        assert [o["regions"] for o in ops] == [2] * 6

        async def followed() -> bool:
            out = w.output()
            return all(out.count(line) > before[t] for t, line in lines.items())

        # the worker's maps follow (on a stale-region error, or the periodic refresh every 30 s)
        follow_s = await _poll(followed, 90, "the worker's region maps showing two regions per table")
        await _wait_all_committed(settings, topic, total, partitions, 240)
    await _stop_all(w)
    assert await run_sync(assert_every_row, whole, settings, events) == 3 * total
    report(split_and_move_s=admin_s, map_followed_after_s=follow_s)


async def test_hbase_stopped_for_a_minute_then_started(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report) -> None:
    settings = _settings(whole, unique, "native", max_batch_rows=200, concurrency=2,
                         max_in_flight_bytes=4 * 1024 * 1024, retry_max_ms=2000)
    partitions, total, rate = 4, 60_000, 500.0
    topic = await setup(settings, hbase, partitions=partitions)
    events = [order_event(i) for i in range(total)]
    (w,) = _started(workers, tmp_path, settings, "worker")
    rss: list[float] = []
    ready_codes: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_to_partitions, settings, topic, events, 0, partitions, rate)  # 120 s of events
        await _writing(w, ready=True)
        rss_before = w.rss_mb()
        t_stop = time.monotonic()
        await run_sync(stop_hbase, whole)
        t_down = time.monotonic()
        while time.monotonic() - t_down < 60:
            rss.append(w.rss_mb())
            ready_codes.append((await run_sync(w.readyz))[0])
            await anyio.sleep(1)
        code, body = await run_sync(w.readyz)
        assert code == 503 and "hbase" in body, body  # still not ready at the end of the outage
        written_down = await _metric(w, ROWS)

        async def writing() -> bool:
            return await _metric(w, ROWS) > written_down

        back_s, resume_s = await _restart_hbase(whole, writing)

        async def ready() -> bool:
            return (await run_sync(w.readyz))[0] == 200

        ready_s = await _poll(ready, 60, "/readyz answering 200 after HBase returned")
        await _wait_all_committed(settings, topic, total, partitions, 300)
    await _stop_all(w)
    assert await run_sync(assert_every_row, whole, settings, events) == 3 * total
    assert ready_codes[-1] == 503 and 200 not in ready_codes[10:], ready_codes  # not ready while HBase is away
    growth = max(rss) - rss_before
    assert growth < 150, f"worker RSS grew by {growth:.0f} MB while HBase was away ({rss_before:.0f} MB before)"
    assert resume_s <= 10, f"ingestion resumed {resume_s:.1f} s after the gateway returned"
    report(stop_s=t_down - t_stop, gateway_back_s=back_s, resume_s=resume_s,
           ready_after_s=ready_s, rss_before_mb=rss_before, rss_max_mb=max(rss))


async def test_kafka_broker_killed_mid_stream_and_started_again(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report) -> None:
    settings = _settings(whole, unique, max_batch_rows=50, concurrency=1)
    partitions, first, total = 4, 20_000, 30_000
    topic = await setup(settings, hbase, partitions=partitions)
    events = [order_event(i) for i in range(total)]
    await produce_to_partitions(settings, topic, events[:first], 0, partitions)
    (w,) = _started(workers, tmp_path, settings, "worker")
    await _writing(w)
    assert not await _all_committed(settings, topic, first, partitions), "the worker was done before the kill"
    await run_sync(kill_9, whole, "kafka")
    t_kill = time.monotonic()
    await anyio.sleep(5)
    await run_sync(whole.up)
    t_up = time.monotonic()
    consumed = await _metric(w, CONSUMED)
    async with anyio.create_task_group() as tg:
        tg.start_soon(produce_to_partitions, settings, topic, events[first:], first, partitions)
        resume_s = await _rose(w, CONSUMED, [""], 120) if await _metric(w, CONSUMED) <= consumed else 0.0
    await _wait_all_committed(settings, topic, total, partitions, 240)
    await _stop_all(w)
    assert await run_sync(assert_every_row, whole, settings, events) == 3 * total
    assert len(w.runs) == 1
    report(broker_restart_s=t_up - t_kill, resume_s=resume_s)


async def test_workers_killed_and_restarted_while_hbase_is_down_wait_then_finish(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report) -> None:
    settings = _settings(whole, unique, max_batch_rows=100, concurrency=2, retry_max_ms=2000)
    partitions, total = 4, 20_000
    topic = await setup(settings, hbase, partitions=partitions)
    events = [order_event(i) for i in range(total)]
    await produce_to_partitions(settings, topic, events, 0, partitions)
    a, b = _started(workers, tmp_path, settings, "worker-a", "worker-b")
    await _writing(a, b)
    await run_sync(stop_hbase, whole)
    t_down = time.monotonic()
    assert not await _all_committed(settings, topic, total, partitions), "HBase stopped after the last commit"
    for w in (a, b):
        w.kill()
    # started while HBase is down: each waits (one log line per interval, /readyz not ready), and one is
    # killed again while it waits
    marks = {w: len(w.output()) for w in (a, b)}
    a.start()
    b.start()

    async def waiting() -> bool:
        return all("waiting_for_dependency" in w.output()[marks[w]:] for w in (a, b))

    await _poll(waiting, 90, "both restarted workers logging waiting_for_dependency")
    for w in (a, b):
        code, body = await run_sync(w.readyz)
        assert code == 503 and "worker: waiting for HBase" in body, (code, body)
    b.kill()
    b.start()
    await anyio.sleep(5)
    assert a.alive and b.alive, (a.output()[-3000:], b.output()[-3000:])
    outage_s = time.monotonic() - t_down

    async def writing() -> bool:
        return await _metric(a, ROWS) + await _metric(b, ROWS) > 0

    back_s, resume_s = await _restart_hbase(whole, writing)
    t_up = time.monotonic()
    await _wait_all_committed(settings, topic, total, partitions, 240)
    finish_s = time.monotonic() - t_up

    async def both_ready() -> bool:
        # a worker still in its start-up backoff (up to 10 s between tries) becomes ready at its next
        # try; the other may have written everything by then
        codes = [(await run_sync(w.readyz))[0] for w in (a, b)]
        return codes == [200, 200]

    ready_s = await _poll(both_ready, 30, "both workers ready after HBase returned")
    await _stop_all(a, b)
    assert await run_sync(assert_every_row, whole, settings, events) == 3 * total
    report(outage_s=outage_s, gateway_back_s=back_s, resume_s=resume_s, finish_after_up_s=finish_s,
           ready_after_finish_s=ready_s)


async def test_three_workers_killed_at_random_over_200k_events_lose_nothing(
        whole: LocalStack, hbase: HBaseClient, workers: MakeWorker, tmp_path: Path, unique: str,
        report: Report) -> None:
    # small batches, one at a time: slow enough that the kills (each with a check of the whole index table)
    # land over the whole run
    settings = with_cluster(index_settings(unique, max_batch_rows=100, concurrency=1), whole)
    partitions, total = 6, 200_000
    topic = await setup(settings, hbase, partitions=partitions)
    table = settings.routes[0].table
    events = [order_event(i) for i in range(total)]
    await produce_to_partitions(settings, topic, events, 0, partitions)
    crew = _started(workers, tmp_path, settings, *(f"worker-{n}" for n in range(3)))
    rng = random.Random(200_000)
    # each run's events_consumed_total, read just before it ended: a killed run may consume (and commit)
    # more between that read and the SIGKILL, so the sum is a lower bound, reported and not asserted
    consumed: list[float] = []
    # a kill each time the committed events pass the next of these marks, after a random pause: the kills
    # land over the whole run however fast the workers are (a kill's rebalance slows them down anyway)
    marks = [int(total * f) for f in (0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.85, 0.92)]
    kills, t0 = 0, time.monotonic()
    while not await _all_committed(settings, topic, total, partitions):
        assert time.monotonic() - t0 < 420, "200,000 events not committed within 420 s"
        await anyio.sleep(rng.uniform(0.2, 0.8))
        if kills >= len(marks) or await _committed_events(settings, topic, partitions) < marks[kills]:
            continue
        victim = rng.choice(crew)
        consumed.append(await _metric(victim, CONSUMED))
        victim.kill()
        kills += 1
        # commits never pass unwritten data: every event below each committed offset is in HBase
        committed = await committed_offsets(settings, topic, partitions)
        rows = await run_sync(lambda: index_rows(whole, table))
        missing = [i for p, c in committed.items() for i in range(p, c * partitions, partitions)
                   if f"ORD{i:08d}".encode() not in rows]
        assert not missing, f"{len(missing)} events committed but not in HBase, e.g. {missing[:5]}"
        await anyio.sleep(rng.uniform(0.5, 2.0))
        victim.start()
    elapsed = time.monotonic() - t0
    for w in crew:
        consumed.append(await _metric(w, CONSUMED))
    await _stop_all(*crew)
    assert kills >= 3, f"only {kills} kills before the events were done: the test did not test rebalances"
    # each event in HBase once, byte for byte, one version per cell (a replay rewrites the same cell)
    assert await run_sync(assert_every_row, whole, settings, events) == total
    report(kills=float(kills), elapsed_s=elapsed, consumed_at_least=sum(consumed))
