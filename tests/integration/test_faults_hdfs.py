"""Faults of the cluster's own servers on HDFS, as in production: an HDFS-backed local cluster of this
module's own (two region servers, one gateway, a NameNode and two DataNodes, so ``dfs.replication`` is
2) on ports clear of the shared stack and the other cluster tests. Each test runs one worker
subprocess (:class:`.fault_support.WorkerProcess`) on the guides' transaction design while events
arrive at a steady rate, lands one fault mid-write, waits until every offset is committed, stops the
worker (exit 0) and checks every row byte for byte. The faults:

- the HBase master killed (SIGKILL) and started again 10 s later (over each transport);
- ZooKeeper killed (SIGKILL) and started again at once;
- a DataNode killed (SIGKILL) and started again 20 s later;
- a region server frozen (SIGSTOP) for 30 s, past its ZooKeeper session: HBase declares it dead and
  reassigns its regions; on SIGCONT it learns it is dead and aborts, and ``up`` starts it again (native);
- a region server cut off by a network partition for 60 s (every packet to and from its ports and its
  connections dropped on loopback, :func:`.fault_support.partitioned`): the gateway and the master
  hear nothing from it, writes to its regions wait, and resume when the partition heals (native: the
  worker's own connections to the region server are cut too).

(native): the worker writes over HBase's RPC (``client = "native"``), straight to the region servers;
the others go through the Thrift gateway, so each transport meets HDFS's faults.

Each writes its figures (worker runs, rows checked, rows lost, the longest stall of one table's
writes after the fault and when it ended, seconds from the fault until every offset was committed;
the fault's moment is taken just before its first step) to the terminal as a
``[fault figures]`` line and to the test's properties (junit XML), with the servers' log lines that
show what the cluster did meanwhile.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest
from anyio.to_thread import run_sync

from connectors.hbase import HBaseClient
from devstack import LocalStack
from devstack.processes import port_in_use
from devstack.settings import StackSettings
from pipeline.settings import HBaseClientKind, Settings

from .fault_support import (
    WorkerProcess,
    assert_every_row,
    busiest_region_server,
    committed_offsets,
    hbase_settings,
    http_get,
    index_rows,
    kill_9,
    own_stack,
    partitioned,
    produce_to_partitions,
    up_until_ok,
    with_cluster,
)
from .ledger_support import evidence, first_line_after
from .worker_support import expected_cells, order_event, order_settings, setup, write_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

#: clear of the shared stack, test_cluster_stack.py, test_gateways.py, the fault suite's cluster (9392,
#: 2481, 16300/16320+, 9390/9391) and the combined fault test's (9492, 2581, 16400/16420+, 19000/19010+)
PORTS = {"kafka_port": 9592, "kafka_controller_port": 9593, "zookeeper_port": 2681, "master_port": 16500,
         "regionserver_port": 16520, "thrift_port": 9590, "thrift2_port": 9591, "namenode_port": 19100,
         "datanode_port": 19110}
SESSION_TIMEOUT_MS = 6000
PARTITIONS, TOTAL, RATE = 4, 15_000, 500.0  # 30 s of events; the fault lands after about 6 s of them
ROWS = "hbase_ingest_rows_written_total"
Report = Callable[..., None]
Fault = Callable[[LocalStack, list[str]], Awaitable[None]]
Client = HBaseClientKind


def _ports_in_use() -> list[int]:
    """Every port of the module's cluster (data, IPC and HTTP of each server) that something listens on."""
    ports = [PORTS["kafka_port"], PORTS["kafka_controller_port"], PORTS["zookeeper_port"], PORTS["master_port"],
             PORTS["thrift_port"], PORTS["thrift2_port"], PORTS["namenode_port"], PORTS["namenode_port"] + 1,
             *range(PORTS["regionserver_port"], PORTS["regionserver_port"] + 2),
             *range(PORTS["datanode_port"], PORTS["datanode_port"] + 6)]
    return [p for p in ports if port_in_use(p)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    busy = _ports_in_use()
    assert not busy, f"ports of this module's cluster already in use: {busy}"
    yield from own_stack(StackSettings.model_validate({
        "state_dir": tmp_path_factory.mktemp("faults-hdfs") / "state", "region_servers": 2, "gateways": 1,
        "session_timeout_ms": SESSION_TIMEOUT_MS, "regionserver_heap_mb": 768, "hdfs": True, "datanodes": 2,
        **PORTS}))


@pytest.fixture
def whole(cluster: LocalStack) -> LocalStack:
    """The cluster with every process running (a test before may have left one stopped or aborted)."""
    up_until_ok(cluster, 300)
    return cluster


@pytest.fixture
def report(record_property: Callable[[str, object], None], capsys: pytest.CaptureFixture[str],
           request: pytest.FixtureRequest) -> Report:
    """Record a test's figures: a junit property each, and one line on the terminal (then ``notes``)."""
    def write(notes: list[str], **figures: float) -> None:
        for k, v in figures.items():
            record_property(k, round(v, 2))
        record_property("cluster", " | ".join(notes))
        with capsys.disabled():
            text = ", ".join(f"{k}={v:.1f}" for k, v in figures.items())
            sys.stdout.write(f"\n[fault figures] {request.node.name}: {text}\n")
            sys.stdout.write("".join(f"  {n}\n" for n in notes))

    return write


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


async def _poll(check: Callable[[], Awaitable[bool]], limit_s: float, what: str, pause_s: float = 0.5) -> float:
    t0 = time.monotonic()
    while not await check():
        assert time.monotonic() - t0 < limit_s, f"{what}: not within {limit_s:.0f} s"
        await anyio.sleep(pause_s)
    return time.monotonic() - t0


async def _table_rows(w: WorkerProcess, tables: list[str]) -> list[float]:
    return [await run_sync(w.metric, ROWS, f'table="{t}"') for t in tables]


async def _all_committed(settings: Settings, topic: str) -> bool:
    ends = {p: len(range(p, TOTAL, PARTITIONS)) for p in range(PARTITIONS)}
    try:
        return await committed_offsets(settings, topic, PARTITIONS) == ends
    except Exception:  # Kafka busy: not yet
        return False


def _lost(stack: LocalStack, settings: Settings) -> int:
    """Rows of the events missing from their tables (0 before the byte-for-byte check says more)."""
    want: dict[str, set[bytes]] = {}
    for i in range(TOTAL):
        for table, (row, _) in expected_cells(settings, order_event(i)).items():
            want.setdefault(table, set()).add(row)
    return sum(len(rows - index_rows(stack, table)) for table, rows in want.items())


async def _run_fault(stack: LocalStack, tmp_path: Path, unique: str, report: Report, fault: Fault,
                     servers: list[str], patterns: list[str], transport: Client = "thrift") -> None:
    """The worker, the events at RATE, ``fault`` once 3,000 rows are written (it appends what it saw to
    the notes), then every offset committed, the worker stopped and every row checked. Until then, each
    table's rows are sampled every 0.2 s: the longest time one table's count stood still after the fault
    short of its TOTAL rows is the stall, and its end is when the writes resumed (0: none over 1 s).
    ``servers`` and ``patterns``: whose log lines (from the fault on) go with the figures; ``transport``: the
    worker's transport (the reads that check the rows go through the gateway either way)."""
    settings = with_cluster(order_settings(unique, max_batch_rows=100, concurrency=2), stack, transport)
    async with HBaseClient(hbase_settings(stack)) as client:
        topic = await setup(settings, client, partitions=PARTITIONS)
    tables = [r.table for r in settings.routes]
    events = [order_event(i) for i in range(TOTAL)]
    w = WorkerProcess(write_config(tmp_path / "w.toml", settings), tmp_path / "worker.log", stack)
    notes: list[str] = []
    settled = anyio.Event()
    stall = {"s": 0.0, "resumed_s": 0.0}
    try:
        w.start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce_to_partitions, settings, topic, events, 0, PARTITIONS, RATE)

            async def writing() -> bool:
                return sum(await _table_rows(w, tables)) >= 3000

            await _poll(writing, 120, "the worker writing")
            assert not await _all_committed(settings, topic), "every offset committed before the fault"
            t_fault, fault_ms = time.monotonic(), _wall_ms()

            async def watch() -> None:
                last = await _table_rows(w, tables)
                since = [t_fault] * len(tables)
                while not settled.is_set():
                    await anyio.sleep(0.2)
                    now, rows = time.monotonic(), await _table_rows(w, tables)
                    for k, (n, b) in enumerate(zip(rows, last, strict=True)):
                        if n > b and b < TOTAL:
                            if now - since[k] > max(1.0, stall["s"]):
                                stall.update(s=now - since[k], resumed_s=now - t_fault)
                            since[k] = now
                    last = rows

            tg.start_soon(watch)
            await fault(stack, notes)

            async def committed() -> bool:
                return await _all_committed(settings, topic)

            await _poll(committed, 300, f"all {TOTAL} events committed", pause_s=1.0)
            committed_s = time.monotonic() - t_fault
            settled.set()

        async def serving() -> bool:
            return (await run_sync(http_get, w.metrics_port, "/healthz"))[0] == 200

        await _poll(serving, 60, "the worker serving /healthz")
        code = await run_sync(w.stop)
        assert code == 0, w.output()[-3000:]
    finally:
        w.kill()
    lost = await run_sync(_lost, stack, settings)
    assert lost == 0, f"{lost} rows lost"
    checked = await run_sync(assert_every_row, stack, settings, events)
    assert checked == 3 * TOTAL
    assert len(w.runs) == 1  # the worker never died
    logs = {n: stack.procs[n].log_file for n in servers}
    report([f"client: {transport}", *notes, *evidence(logs, fault_ms - 1000, patterns, limit=12)],
           runs=float(len(w.runs)),
           rows_checked=float(checked), lost=float(lost), stall_s=stall["s"], resumed_after_s=stall["resumed_s"],
           committed_after_s=committed_s)


# -- the faults -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["native", "thrift"])
async def test_master_killed_mid_write_and_started_10_s_later(
        whole: LocalStack, tmp_path: Path, unique: str, report: Report, client: Client) -> None:
    async def fault(stack: LocalStack, notes: list[str]) -> None:
        await run_sync(kill_9, stack, "master")
        await anyio.sleep(10)
        up_s, restarted = await run_sync(up_until_ok, stack, 180)
        notes.append(f"up after the kill took {up_s:.1f} s and started again: {restarted}")
        assert restarted == ["master"], restarted

    # the master is off the write path: the gateway and region servers go on writing without it
    await _run_fault(whole, tmp_path, unique, report, fault, ["master", "gateway-1"],
                     [r"ConnectionLoss|Master.*(?:initializ|active|registered)", "ABORTING", r"ServerCrashProcedure"],
                     client)


async def test_zookeeper_killed_mid_write_and_started_again(
        whole: LocalStack, tmp_path: Path, unique: str, report: Report) -> None:
    async def fault(stack: LocalStack, notes: list[str]) -> None:
        await run_sync(kill_9, stack, "zookeeper")
        up_s, restarted = await run_sync(up_until_ok, stack, 240)
        # a server whose session expired while ZooKeeper was away aborts after the first up: one more
        # up, a session timeout and more later, starts it again
        await anyio.sleep(SESSION_TIMEOUT_MS / 1000 * 2)
        again_s, again = await run_sync(up_until_ok, stack, 240)
        notes.append(f"up after the kill took {up_s:.1f} s and started again: {restarted}; "
                     f"{SESSION_TIMEOUT_MS * 2 / 1000:.0f} s later, up took {again_s:.1f} s and started: {again}")
        assert restarted[:1] == ["zookeeper"], restarted

    # region servers and the master keep their sessions through a short restart (ZooKeeper restores
    # them from its snapshot and log); the write path (gateway -> region server) needs ZooKeeper only
    # to locate regions it has not cached
    await _run_fault(whole, tmp_path, unique, report, fault, ["master", "regionserver-1", "regionserver-2"],
                     [r"Session 0x\w+ for server .*Closing socket", "SessionExpired", "ABORTING"])


async def test_a_datanode_killed_mid_write_and_started_20_s_later(
        whole: LocalStack, tmp_path: Path, unique: str, report: Report) -> None:
    async def fault(stack: LocalStack, notes: list[str]) -> None:
        await run_sync(kill_9, stack, "datanode-2")
        await anyio.sleep(20)
        up_s, restarted = await run_sync(up_until_ok, stack, 180)
        notes.append(f"up after the kill took {up_s:.1f} s and started again: {restarted}")
        assert restarted == ["datanode-2"], restarted

    # with replication 2 every WAL and store file has a copy on the other DataNode: the region servers
    # roll their WAL onto a pipeline without the dead one and go on
    await _run_fault(whole, tmp_path, unique, report, fault, ["master", "regionserver-1", "regionserver-2"],
                     [r"[Rr]oll|pipeline|Bad datanode|excluding|Slow sync", "ABORTING"])


async def test_a_region_server_frozen_past_its_session_aborts_and_comes_back(
        whole: LocalStack, tmp_path: Path, unique: str, report: Report) -> None:
    tables_of: list[str] = []

    async def fault(stack: LocalStack, notes: list[str]) -> None:
        tables = tables_of
        victim, on_victim = await run_sync(busiest_region_server, stack, tables)
        pid = stack.procs[victim].pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        stop_ms = _wall_ms()
        await anyio.sleep(30)
        os.kill(pid, signal.SIGCONT)
        cont_ms = _wall_ms()
        log = stack.procs[victim].log_file

        def aborted() -> bool:
            return first_line_after(log, cont_ms - 1000, r"YouAreDeadException|ABORTING region server") is not None

        async def dead() -> bool:
            return await run_sync(aborted)

        abort_s = await _poll(dead, 60, f"{victim} aborting after SIGCONT")

        async def gone() -> bool:  # an `up` while it still exits would wait its whole start timeout for it
            return stack.procs[victim].pid() is None

        await _poll(gone, 60, f"{victim} exiting after its abort")
        up_s, restarted = await run_sync(up_until_ok, stack, 240)
        notes.append(f"{victim} (tables {on_victim}) frozen at {stop_ms}, resumed at {cont_ms}, aborted "
                     f"{abort_s:.1f} s later; up took {up_s:.1f} s and started again: {restarted}")
        assert victim in restarted, restarted

    settings = order_settings(unique)
    tables_of.extend(r.table for r in settings.routes)
    await _run_fault(whole, tmp_path, unique, report, fault, ["master", "regionserver-1", "regionserver-2"],
                     [r"expired|ServerCrashProcedure.*(?:start|finish)|[Ss]plit.*WAL|YouAreDeadException",
                      "ABORTING region server", r"[Rr]ecover.*lease"], "native")


@pytest.mark.timeout(600)
async def test_a_region_server_cut_off_by_a_network_partition_for_60_s(
        whole: LocalStack, tmp_path: Path, unique: str, report: Report) -> None:
    tables_of: list[str] = []

    async def fault(stack: LocalStack, notes: list[str]) -> None:
        victim, on_victim = await run_sync(busiest_region_server, stack, tables_of)
        pid = stack.procs[victim].pid()
        assert pid is not None
        listening = stack.topology().process(victim).ports.values()
        with partitioned(pid, listening) as ports:
            cut_ms = _wall_ms()
            await anyio.sleep(60)
        healed_ms = _wall_ms()
        up_s, restarted = await run_sync(up_until_ok, stack, 240)
        notes.append(f"{victim} (tables {on_victim}) cut off at {cut_ms} ({len(ports)} ports: its own "
                     f"{sorted(listening)} and its connections'), healed at {healed_ms}; up took {up_s:.1f} s "
                     f"and started again: {restarted or 'nothing'}")

    settings = order_settings(unique)
    tables_of.extend(r.table for r in settings.routes)
    await _run_fault(whole, tmp_path, unique, report, fault, ["master", "regionserver-1", "regionserver-2",
                                                               "gateway-1"],
                     [r"expired|ServerCrashProcedure.*(?:start|finish)|YouAreDeadException|ABORTING",
                      r"[Tt]imeout|timed out|Slow sync|[Rr]oll", r"callTimeout|RetriesExhausted"], "native")
